//! The preview's stream: Output's scrollback first, then Attach on the
//! terminal — read only: no keys and no size go up, so the agent's terminal
//! keeps its size. Dropping the handle closes the connection. Must never
//! import the state or the terminal.

use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use krad_bus::client::{Client, ClientError, Item};
use krad_bus::protocol::{AttachMessage, Response};
use krad_bus::request::attach::Attach;
use krad_bus::request::output::Output;

use crate::event::{Event, PreviewEvent};

/// How many scrollback lines the preview asks Output for.
const SCROLLBACK_LINES: u64 = 1_000;

/// A running preview; dropped, its stream ends.
pub(crate) struct PreviewHandle {
    cancelled: Arc<AtomicBool>,
    stream: Arc<Mutex<Option<TcpStream>>>,
}

impl Drop for PreviewHandle {
    fn drop(&mut self) {
        self.cancelled.store(true, Ordering::SeqCst);
        if let Some(stream) = self
            .stream
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

/// Starts following `target`.
pub(super) fn start(
    client: Client,
    target: u64,
    generation: u64,
    events: Sender<Event>,
) -> Option<PreviewHandle> {
    let cancelled = Arc::new(AtomicBool::new(false));
    let stream = Arc::new(Mutex::new(None));
    let handle = PreviewHandle {
        cancelled: Arc::clone(&cancelled),
        stream: Arc::clone(&stream),
    };
    std::thread::Builder::new()
        .name("krad-tui-preview".into())
        .spawn(move || {
            let why = follow(&client, target, &cancelled, &stream, &|event| {
                events.send(Event::Preview(generation, event)).is_ok()
            });
            if !cancelled.load(Ordering::SeqCst) {
                let _ = events.send(Event::Preview(generation, PreviewEvent::Ended(why)));
            }
        })
        .ok()?;
    Some(handle)
}

fn follow(
    client: &Client,
    target: u64,
    cancelled: &AtomicBool,
    shared: &Mutex<Option<TcpStream>>,
    send: &dyn Fn(PreviewEvent) -> bool,
) -> String {
    let output = Output {
        target,
        lines: Some(SCROLLBACK_LINES),
    };
    if let Ok(answered) = client.call(output, None, Duration::from_secs(5))
        && let Ok(info) = answered.answer
        && !send(PreviewEvent::Scrollback(info.scrollback))
    {
        return String::new();
    }
    let mut lines = match client.attach(Attach { target }) {
        Ok(lines) => lines,
        Err(e) => return e.to_string(),
    };
    {
        let mut slot = shared.lock().unwrap_or_else(PoisonError::into_inner);
        if cancelled.load(Ordering::SeqCst) {
            return String::new();
        }
        *slot = lines.try_clone_stream().ok();
    }
    loop {
        let line = match lines.next() {
            None => return "the stream ended".to_owned(),
            Some(Ok(line)) => line,
            Some(Err(ClientError::Io(e))) => return e.to_string(),
            // A line that is not JSON is skipped.
            Some(Err(_)) => continue,
        };
        let event = match line.item {
            Item::Message(AttachMessage::Screen(screen)) => PreviewEvent::Screen(
                screen.cols,
                screen.rows,
                BASE64.decode(screen.data).unwrap_or_default(),
            ),
            Item::Message(AttachMessage::Output(data)) => match BASE64.decode(data.data) {
                Ok(bytes) => PreviewEvent::Output(bytes),
                Err(_) => continue,
            },
            Item::Message(AttachMessage::Exited(exited)) => {
                return match (exited.exit_code, exited.signal) {
                    (_, Some(signal)) => format!("the program was killed by signal {signal}"),
                    (Some(code), None) => format!("the program exited with code {code}"),
                    (None, None) => "the program ended".to_owned(),
                };
            }
            Item::Message(AttachMessage::ShuttingDown) => return "the app is stopping".to_owned(),
            Item::Message(AttachMessage::Error(error)) | Item::Answer(Response::Error(error)) => {
                return error.message;
            }
            Item::Answer(_) | Item::UnreadableError(_) | Item::Unknown => continue,
        };
        if !send(event) {
            return String::new();
        }
    }
}
