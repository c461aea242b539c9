//! The agents' stream (SubscribeAgents): connects, forwards the snapshot and
//! every change, and when the app stops or cannot be reached says so and
//! tries again (250 ms, doubling to 2 s) until it is back — or at once to the
//! app a switch names. Each event carries its app's generation. Must never import
//! the state or the terminal.

use std::sync::PoisonError;
use std::sync::mpsc::Sender;
use std::time::Duration;

use krad_bus::client::{Client, ClientError, Item};
use krad_bus::protocol::{Response, StreamMessage};
use krad_bus::request::subscribe_agents::SubscribeAgents;

use super::{Shared, lock};
use crate::event::{BusEvent, Event};

const FIRST_PAUSE: Duration = Duration::from_millis(250);
/// The app sends a heartbeat every 15 s: a stream silent for this long is a
/// dead link (an SSH forward gone without a word), and is opened again.
const SILENCE: Duration = Duration::from_secs(45);
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// Runs until the UI is gone.
pub(super) fn run(shared: &Shared, events: &Sender<Event>) {
    let mut pause = FIRST_PAUSE;
    loop {
        let (connect, generation) = {
            let current = lock(shared);
            (current.connect.clone(), current.generation)
        };
        let why = match connect() {
            Err(why) => why,
            Ok(client) => {
                {
                    let mut current = lock(shared);
                    if current.generation != generation {
                        continue;
                    }
                    current.client = Some(client.clone());
                }
                match follow(&client, shared, generation, events) {
                    Followed::UiGone => return,
                    Followed::Ended { why, streamed } => {
                        if streamed {
                            pause = FIRST_PAUSE;
                        }
                        why
                    }
                }
            }
        };
        // A switch ended the stream: the next app's starts at once.
        if lock(shared).generation != generation {
            pause = FIRST_PAUSE;
            continue;
        }
        if events
            .send(Event::Bus(generation, BusEvent::Down(why)))
            .is_err()
        {
            return;
        }
        // The pause, cut short by a switch.
        let (mutex, switched) = &**shared;
        let current = mutex.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = switched
            .wait_timeout_while(current, pause, |c| c.generation == generation)
            .unwrap_or_else(PoisonError::into_inner);
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

enum Followed {
    UiGone,
    Ended { why: String, streamed: bool },
}

fn follow(client: &Client, shared: &Shared, generation: u64, events: &Sender<Event>) -> Followed {
    let stream = match client.subscribe(SubscribeAgents::default()) {
        Ok(stream) => stream,
        Err(e) => {
            return Followed::Ended {
                why: e.to_string(),
                streamed: false,
            };
        }
    };
    // Kept where a switch can shut it down (unless one came meanwhile).
    {
        let mut current = lock(shared);
        if current.generation != generation {
            return Followed::Ended {
                why: "switched to another app".to_owned(),
                streamed: false,
            };
        }
        current.stream = stream.try_clone_stream().ok();
    }
    if let Err(e) = stream.set_read_timeout(Some(SILENCE)) {
        return Followed::Ended {
            why: e.to_string(),
            streamed: false,
        };
    }
    let mut streamed = false;
    let mut why = "the app closed the stream".to_owned();
    for message in stream {
        let line = match message {
            Ok(line) => line,
            Err(ClientError::Io(e))
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                why = format!("no word from the app for {} s", SILENCE.as_secs());
                break;
            }
            Err(e) => {
                why = e.to_string();
                break;
            }
        };
        let event = match line.item {
            Item::Message(StreamMessage::Snapshot(snapshot)) => {
                if !streamed && events.send(Event::Bus(generation, BusEvent::Up)).is_err() {
                    return Followed::UiGone;
                }
                streamed = true;
                BusEvent::Snapshot(snapshot)
            }
            Item::Message(StreamMessage::Agent(agent)) => BusEvent::Agent(agent),
            Item::Message(StreamMessage::Removed(removed)) => BusEvent::Removed(removed),
            Item::Message(StreamMessage::Sampled(sampled)) => BusEvent::Sampled(sampled),
            Item::Message(StreamMessage::Heartbeat(_)) => continue,
            Item::Message(StreamMessage::ShuttingDown) => {
                why = "the app is stopping".to_owned();
                break;
            }
            // An error answer instead of a stream ends it.
            Item::Answer(Response::Error(error)) => {
                why = error.message;
                break;
            }
            // A message from a newer app is skipped.
            Item::Answer(_) | Item::UnreadableError(_) | Item::Unknown => continue,
        };
        if events.send(Event::Bus(generation, event)).is_err() {
            return Followed::UiGone;
        }
    }
    let mut current = lock(shared);
    if current.generation == generation {
        current.stream = None;
    }
    Followed::Ended { why, streamed }
}
