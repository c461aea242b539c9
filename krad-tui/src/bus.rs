//! The UI's side of the bus: the agents' stream, the preview's Attach stream
//! and each call, every one on a thread of its own, each feeding the one
//! event channel. Typed requests and answers only (`krad_bus`'s client).
//!
//! Must never import the state's logic beyond the plain [`Action`] and
//! [`Outcome`] data, nor the terminal.

mod actions;
mod preview;
mod subscriber;

use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, PoisonError};

use krad_bus::client::Client;

use crate::event::{Done, Event};
use crate::state::{Action, Refusal};
pub(crate) use preview::PreviewHandle;

/// Finds the app (again): api.json may name a new endpoint and token after
/// a restart.
pub type Connect = Arc<dyn Fn() -> Result<Client, String> + Send + Sync>;

/// The bus as the UI uses it.
pub(crate) struct Bus {
    client: Arc<Mutex<Option<Client>>>,
    events: Sender<Event>,
    preview: Option<PreviewHandle>,
}

impl Bus {
    /// Starts the agents' stream; it connects again whenever it breaks.
    pub(crate) fn start(connect: Connect, events: Sender<Event>) -> std::io::Result<Bus> {
        let client = Arc::new(Mutex::new(None));
        let shared = Arc::clone(&client);
        let tx = events.clone();
        std::thread::Builder::new()
            .name("krad-tui-agents".into())
            .spawn(move || subscriber::run(&connect, &shared, &tx))?;
        Ok(Bus {
            client,
            events,
            preview: None,
        })
    }

    /// The client of the app as last found.
    pub(crate) fn client(&self) -> Option<Client> {
        self.client
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Makes a call on a thread of its own; its outcome comes as an event.
    pub(crate) fn call(&self, action: Action) {
        let events = self.events.clone();
        let Some(client) = self.client() else {
            let _ = events.send(Event::Done(Box::new(Done {
                action,
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
                        result: outcome,
                    })));
                }
            });
        if let Err(e) = spawned {
            let _ = events.send(Event::Done(Box::new(Done {
                action,
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
