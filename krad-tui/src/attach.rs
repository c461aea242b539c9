//! Attaching from the home screen: the user's terminal shows the agent's real
//! TUI (the Attach stream: its screen, then its output; the keys and the size
//! go up) until the detach key, the program's end, the app's, or a signal;
//! then the home screen comes back. The keyboard thread is paused meanwhile,
//! so the raw bytes come here. Must never import the state or draw.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsFd;
use std::sync::mpsc::Receiver;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use krad_bus::client::{Client, ClientError, Item, Lines};
use krad_bus::protocol::{AttachInput, AttachMessage, DataInfo, ResizeInfo, Response};
use krad_bus::request::attach::Attach;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use crate::event::Event;
use crate::terminal::write_out;

/// How long the app may take with the first message.
const FIRST_MESSAGE: Duration = Duration::from_secs(10);
/// How often the loop looks at the event channel (a signal, a resize) while
/// attached.
const TICK: u16 = 50;

/// How an attachment ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Ending {
    /// The detach key.
    Detached,
    /// The program ended: how.
    Exited(String),
    /// The app stopped or the connection broke.
    AppGone,
    /// A signal asked the UI to end.
    Stop(&'static str),
    /// The keyboard is gone.
    InputClosed,
}

/// Attaches to `target` until it ends; events that are not the attachment's
/// are kept in `kept` for the UI.
pub(crate) fn attach(
    client: &Client,
    target: u64,
    detach_key: u8,
    events: &Receiver<Event>,
    kept: &mut Vec<Event>,
) -> Result<Ending, String> {
    let lines = client
        .attach(Attach { target })
        .map_err(|e| e.to_string())?;
    let (screen, socket, early) = first_message(lines)?;
    write_out(b"\x1b[0m\x1b[H\x1b[2J\x1b[?25h");
    write_out(&screen);
    let mut socket = socket;
    send(&mut socket, &resize());
    let ending = pump(&mut socket, early, detach_key, events, kept);
    let _ = socket.shutdown(Shutdown::Both);
    Ok(ending)
}

/// The first message: the screen's bytes, the connection, and what was read
/// after the first message.
fn first_message(mut lines: Lines<AttachMessage>) -> Result<(Vec<u8>, TcpStream, Vec<u8>), String> {
    lines
        .set_read_timeout(Some(FIRST_MESSAGE))
        .map_err(|e| e.to_string())?;
    let first = lines.next();
    lines.set_read_timeout(None).map_err(|e| e.to_string())?;
    let screen = match first {
        None => return Err("the app closed the connection".to_owned()),
        Some(Err(ClientError::Io(e))) => return Err(e.to_string()),
        Some(Err(_)) => return Err("the app's answer could not be read".to_owned()),
        Some(Ok(line)) => match line.item {
            Item::Message(AttachMessage::Screen(screen)) => screen,
            Item::Message(AttachMessage::Error(error)) | Item::Answer(Response::Error(error)) => {
                return Err(error.message);
            }
            Item::Message(_) => return Err("the terminal ended".to_owned()),
            Item::Answer(other) => return Err(format!("unexpected answer: {other:?}")),
            Item::UnreadableError(_) | Item::Unknown => {
                return Err("the app's answer could not be read".to_owned());
            }
        },
    };
    let bytes = BASE64.decode(screen.data).map_err(|e| e.to_string())?;
    let (socket, early) = lines.into_parts();
    Ok((bytes, socket, early))
}

fn pump(
    socket: &mut TcpStream,
    mut pending: Vec<u8>,
    detach_key: u8,
    events: &Receiver<Event>,
    kept: &mut Vec<Event>,
) -> Ending {
    let stdin = std::io::stdin();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // Whole lines already read first.
        while let Some(end) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            match serde_json::from_slice::<AttachMessage>(&line) {
                Ok(AttachMessage::Output(DataInfo { data })) => {
                    if let Ok(bytes) = BASE64.decode(data) {
                        write_out(&bytes);
                    }
                }
                Ok(AttachMessage::Screen(screen)) => {
                    if let Ok(bytes) = BASE64.decode(screen.data) {
                        write_out(&bytes);
                    }
                }
                Ok(AttachMessage::Exited(exited)) => {
                    let how = match (exited.exit_code, exited.signal) {
                        (_, Some(signal)) => format!("was killed by signal {signal}"),
                        (Some(code), None) => format!("exited with code {code}"),
                        (None, None) => "ended".to_owned(),
                    };
                    return Ending::Exited(how);
                }
                Ok(AttachMessage::ShuttingDown) => return Ending::AppGone,
                Ok(AttachMessage::Error(_)) | Err(_) => {}
            }
        }
        let (keys, output, gone) = {
            let mut fds = [
                PollFd::new(stdin.as_fd(), PollFlags::POLLIN),
                PollFd::new(socket.as_fd(), PollFlags::POLLIN),
            ];
            match poll(&mut fds, PollTimeout::from(TICK)) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(_) => return Ending::AppGone,
            }
            let has = |fd: &PollFd<'_>, flags: PollFlags| {
                fd.revents().is_some_and(|r| r.intersects(flags))
            };
            (
                has(&fds[0], PollFlags::POLLIN),
                has(
                    &fds[1],
                    PollFlags::POLLIN | PollFlags::POLLHUP | PollFlags::POLLERR,
                ),
                has(
                    &fds[0],
                    PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL,
                ) && !has(&fds[0], PollFlags::POLLIN),
            )
        };
        if gone {
            return Ending::InputClosed;
        }
        if keys {
            let n = match stdin.lock().read(&mut buf) {
                Ok(0) => return Ending::InputClosed,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => 0,
                Err(_) => return Ending::InputClosed,
            };
            let typed = &buf[..n];
            let (before, detach) = match typed.iter().position(|&b| b == detach_key) {
                Some(at) => (&typed[..at], true),
                None => (typed, false),
            };
            if !before.is_empty() {
                let input = AttachInput::Input(DataInfo {
                    data: BASE64.encode(before),
                });
                if !send(socket, &input) {
                    return Ending::AppGone;
                }
            }
            if detach {
                return Ending::Detached;
            }
        }
        if output {
            match socket.read(&mut buf) {
                Ok(0) => return Ending::AppGone,
                Ok(n) => pending.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Ending::AppGone,
            }
        }
        while let Ok(event) = events.try_recv() {
            match event {
                Event::Stop(signal) => return Ending::Stop(signal),
                Event::Resize => {
                    if !send(socket, &resize()) {
                        return Ending::AppGone;
                    }
                }
                Event::InputClosed => return Ending::InputClosed,
                other => kept.push(other),
            }
        }
    }
}

/// `Resize` with the user's terminal size.
fn resize() -> AttachInput {
    let (cols, rows) = crossterm::terminal::size().unwrap_or((80, 24));
    AttachInput::Resize(ResizeInfo {
        cols: cols.max(1),
        rows: rows.max(1),
    })
}

/// Sends a line; false when the connection broke.
fn send(socket: &mut TcpStream, input: &AttachInput) -> bool {
    socket.write_all(&input.to_line()).is_ok()
}
