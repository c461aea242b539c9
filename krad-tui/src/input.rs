//! The keyboard: a thread that waits for input (poll, no timeout: an idle UI
//! takes no CPU), reads crossterm's key events and sends them on; it can be
//! paused, so that an attachment reads the raw bytes itself. Must never
//! import the state or the bus.
//!
//! A terminal sends Alt+key as Esc then the key, so Esc pressed quickly
//! before a key arrives as Alt+key: the UI binds no Alt key, so every
//! Alt+key is taken as the Esc and the key it is made of ([`keys_of`]).

use std::os::fd::{AsFd, OwnedFd};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::Duration;

use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyModifiers};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use crate::event::Event;

/// What the UI thread tells the keyboard thread.
enum Control {
    Pause,
    Resume,
}

/// The keyboard thread's handle.
pub(crate) struct Input {
    wake: OwnedFd,
    control: Sender<Control>,
    paused: Receiver<()>,
}

impl Input {
    /// Starts reading the keyboard.
    pub(crate) fn start(events: Sender<Event>) -> std::io::Result<Input> {
        let (wake_read, wake) = nix::unistd::pipe().map_err(std::io::Error::from)?;
        let (control, control_rx) = channel();
        let (paused_tx, paused) = channel();
        std::thread::Builder::new()
            .name("krad-tui-keys".into())
            .spawn(move || read_keys(&events, &wake_read, &control_rx, &paused_tx))?;
        Ok(Input {
            wake,
            control,
            paused,
        })
    }

    /// Stops reading until [`Input::resume`]; returns once the thread
    /// stopped (or after a second: it is then stuck on a half sequence).
    pub(crate) fn pause(&self) {
        if self.control.send(Control::Pause).is_ok() {
            let _ = nix::unistd::write(self.wake.as_fd(), b"p");
            let _ = self.paused.recv_timeout(Duration::from_secs(1));
        }
    }

    /// Reads again.
    pub(crate) fn resume(&self) {
        let _ = self.control.send(Control::Resume);
        let _ = nix::unistd::write(self.wake.as_fd(), b"r");
    }
}

fn read_keys(
    events: &Sender<Event>,
    wake: &OwnedFd,
    control: &Receiver<Control>,
    paused: &Sender<()>,
) {
    let stdin = std::io::stdin();
    loop {
        let (keys, woken, gone) = {
            let mut fds = [
                PollFd::new(stdin.as_fd(), PollFlags::POLLIN),
                PollFd::new(wake.as_fd(), PollFlags::POLLIN),
            ];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => {
                    let _ = events.send(Event::InputClosed);
                    return;
                }
            }
            let has = |fd: &PollFd<'_>, flags: PollFlags| {
                fd.revents().is_some_and(|r| r.intersects(flags))
            };
            (
                has(&fds[0], PollFlags::POLLIN),
                has(&fds[1], PollFlags::POLLIN),
                has(
                    &fds[0],
                    PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL,
                ) && !has(&fds[0], PollFlags::POLLIN),
            )
        };
        if woken {
            let mut buf = [0u8; 64];
            let _ = nix::unistd::read(wake.as_fd(), &mut buf);
            let mut pause = false;
            while let Ok(message) = control.try_recv() {
                pause = matches!(message, Control::Pause);
            }
            if pause {
                let _ = paused.send(());
                // Wait for Resume; a gone UI ends the thread.
                loop {
                    match control.recv() {
                        Ok(Control::Resume) => break,
                        Ok(Control::Pause) => {
                            let _ = paused.send(());
                        }
                        Err(_) => return,
                    }
                }
                let _ = nix::unistd::read(wake.as_fd(), &mut buf);
                continue;
            }
        }
        if gone {
            let _ = events.send(Event::InputClosed);
            return;
        }
        if keys {
            loop {
                match crossterm::event::poll(Duration::ZERO) {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(_) => {
                        let _ = events.send(Event::InputClosed);
                        return;
                    }
                }
                let event = match crossterm::event::read() {
                    Ok(TermEvent::Key(key)) => {
                        let (esc, key) = keys_of(key);
                        if let Some(esc) = esc
                            && events.send(Event::Key(esc)).is_err()
                        {
                            return;
                        }
                        Event::Key(key)
                    }
                    Ok(TermEvent::Paste(text)) => Event::Paste(text),
                    Ok(TermEvent::Resize(..)) => Event::Resize,
                    Ok(_) => continue,
                    Err(_) => {
                        let _ = events.send(Event::InputClosed);
                        return;
                    }
                };
                if events.send(event).is_err() {
                    return;
                }
            }
        }
    }
}

/// A key as the UI takes it: Alt+key (what the bytes of Esc and a key read
/// together decode to) is an Esc and then the key; any other key is itself.
fn keys_of(key: KeyEvent) -> (Option<KeyEvent>, KeyEvent) {
    if !key.modifiers.contains(KeyModifiers::ALT) {
        return (None, key);
    }
    let esc = KeyEvent::new_with_kind(KeyCode::Esc, KeyModifiers::NONE, key.kind);
    let bare = KeyEvent::new_with_kind(key.code, key.modifiers - KeyModifiers::ALT, key.kind);
    (Some(esc), bare)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn esc_read_together_with_a_key_is_esc_then_the_key() {
        let alt_q = KeyEvent::new(KeyCode::Char('q'), KeyModifiers::ALT);
        assert_eq!(
            keys_of(alt_q),
            (
                Some(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)),
                KeyEvent::new(KeyCode::Char('q'), KeyModifiers::NONE)
            )
        );
        let alt_ctrl_down = KeyEvent::new(KeyCode::Down, KeyModifiers::ALT | KeyModifiers::CONTROL);
        assert_eq!(
            keys_of(alt_ctrl_down).1,
            KeyEvent::new(KeyCode::Down, KeyModifiers::CONTROL)
        );
        let alt_esc = KeyEvent::new(KeyCode::Esc, KeyModifiers::ALT);
        let esc = KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE);
        assert_eq!(keys_of(alt_esc), (Some(esc), esc));
        let j = KeyEvent::new(KeyCode::Char('j'), KeyModifiers::NONE);
        assert_eq!(keys_of(j), (None, j));
    }
}
