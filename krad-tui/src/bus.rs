//! The UI's side of the bus: the agents' stream, the preview's Attach stream
//! and each call, every one on a thread of its own, each feeding the one
//! event channel; and which app they reach (`A` switches). Typed requests
//! and answers only (`krad_bus`'s client).
//!
//! Must never import the state's logic beyond the plain [`Action`] and
//! [`Outcome`] data, nor the terminal.

mod actions;
mod preview;
mod subscriber;

use std::net::{Shutdown, TcpStream};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use krad_bus::client::Client;

use crate::event::{Done, Event};
use crate::state::{Action, Refusal};
pub(crate) use preview::PreviewHandle;

/// Finds the app (again): api.json may name a new endpoint and token after
/// a restart.
pub type Connect = Arc<dyn Fn() -> Result<Client, String> + Send + Sync>;

/// The app the screen is on: how to find it, which one it is (a switch to
/// another app makes a new generation), the client last found, and the
/// agents' stream (shut down by a switch, so that its thread lets it go).
struct Current {
    connect: Connect,
    generation: u64,
    client: Option<Client>,
    stream: Option<TcpStream>,
}

/// [`Current`], shared with the agents' stream's thread, which waits on the
/// condition for a switch while the app is away.
type Shared = Arc<(Mutex<Current>, Condvar)>;

fn lock(shared: &Shared) -> MutexGuard<'_, Current> {
    shared.0.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The bus as the UI uses it.
pub(crate) struct Bus {
    current: Shared,
    events: Sender<Event>,
    preview: Option<PreviewHandle>,
}

impl Bus {
    /// Starts the agents' stream; it connects again whenever it breaks.
    pub(crate) fn start(connect: Connect, events: Sender<Event>) -> std::io::Result<Bus> {
        let current: Shared = Arc::new((
            Mutex::new(Current {
                connect,
                generation: 0,
                client: None,
                stream: None,
            }),
            Condvar::new(),
        ));
        let shared = Arc::clone(&current);
        let tx = events.clone();
        std::thread::Builder::new()
            .name("krad-tui-agents".into())
            .spawn(move || subscriber::run(&shared, &tx))?;
        Ok(Bus {
            current,
            events,
            preview: None,
        })
    }

    /// The client of the app as last found.
    pub(crate) fn client(&self) -> Option<Client> {
        lock(&self.current).client.clone()
    }

    /// Says, whenever asked from any thread, which app the screen is on: its
    /// generation, and its bus (none while it is not reached).
    pub(crate) fn here(&self) -> impl Fn() -> (u64, Option<String>) + Send + 'static {
        let current = Arc::clone(&self.current);
        move || {
            let current = lock(&current);
            let endpoint = current.client.as_ref().map(|c| c.endpoint().to_string());
            (current.generation, endpoint)
        }
    }

    /// Which app the screen is on: events and answers of an earlier one are
    /// stale.
    pub(crate) fn generation(&self) -> u64 {
        lock(&self.current).generation
    }

    /// Puts the screen on another app, found with `connect`: the stream of
    /// the one left is shut down and the preview stopped; the new one's
    /// stream starts at once.
    pub(crate) fn switch(&mut self, connect: Connect) {
        self.preview = None;
        let mut current = lock(&self.current);
        current.generation += 1;
        current.connect = connect;
        current.client = None;
        if let Some(stream) = current.stream.take() {
            let _ = stream.shutdown(Shutdown::Both);
        }
        drop(current);
        self.current.1.notify_all();
    }

    /// Makes a call on a thread of its own; its outcome comes as an event.
    pub(crate) fn call(&self, action: Action) {
        let events = self.events.clone();
        let (client, app) = {
            let current = lock(&self.current);
            (current.client.clone(), current.generation)
        };
        let Some(client) = client else {
            let _ = events.send(Event::Done(Box::new(Done {
                action,
                app,
                result: Err(Refusal {
                    message: "the app is not reachable".to_owned(),
                    conflict: false,
                }),
            })));
            return;
        };
        let spawned = std::thread::Builder::new()
            .name("krad-tui-call".into())
            .spawn({
                let events = events.clone();
                let action = action.clone();
                move || {
                    let outcome = actions::run(&client, &action);
                    let _ = events.send(Event::Done(Box::new(Done {
                        action,
                        app,
                        result: outcome,
                    })));
                }
            });
        if let Err(e) = spawned {
            let _ = events.send(Event::Done(Box::new(Done {
                action,
                app,
                result: Err(Refusal {
                    message: format!("cannot start a thread: {e}"),
                    conflict: false,
                }),
            })));
        }
    }

    /// Follows `target`'s screen (generation `generation`), leaving the last.
    pub(crate) fn preview(&mut self, target: Option<u64>, generation: u64) {
        self.preview = None;
        if let (Some(target), Some(client)) = (target, self.client()) {
            self.preview = preview::start(client, target, generation, self.events.clone());
        }
    }
}
