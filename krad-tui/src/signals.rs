//! Signals as events: SIGTERM, SIGHUP, SIGINT and SIGQUIT end the UI (so the
//! guard puts the terminal back), SIGWINCH redraws. They are blocked in the
//! UI's threads and taken by one thread with `sigwait`, so no handler runs
//! and nothing is lost. Must never import the state or the bus.

use std::sync::mpsc::Sender;

use nix::sys::signal::{SigSet, Signal};

use crate::event::Event;

/// The signals the UI takes.
fn set() -> SigSet {
    let mut set = SigSet::empty();
    for signal in [
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGINT,
        Signal::SIGQUIT,
        Signal::SIGWINCH,
    ] {
        set.add(signal);
    }
    set
}

/// Blocks the signals in this thread (and so in every thread it starts from
/// now on), and starts the thread that takes them. Call before any other
/// thread starts.
pub(crate) fn start(events: Sender<Event>) -> std::io::Result<()> {
    let set = set();
    set.thread_block().map_err(std::io::Error::from)?;
    std::thread::Builder::new()
        .name("krad-tui-signals".into())
        .spawn(move || {
            loop {
                let event = match set.wait() {
                    Ok(Signal::SIGWINCH) => Event::Resize,
                    Ok(signal) => Event::Stop(signal.as_str()),
                    Err(_) => continue,
                };
                if events.send(event).is_err() {
                    return;
                }
            }
        })?;
    Ok(())
}

/// Unblocks the signals in this thread again, when the UI is over.
pub(crate) fn stop() {
    let _ = set().thread_unblock();
}
