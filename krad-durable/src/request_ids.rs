//! At-most-once POSTs: the request ids of one epoch and their first answers.
//!
//! The phone makes one request id per intent and retries with the same id when
//! it cannot tell whether a POST arrived. A repeat of a finished id gets the
//! first answer again with `"replayed": true` and runs nothing; a repeat while
//! the first is still running waits for it; the same id with another route or
//! body is `request-id-reused`. The log lives in memory: a new epoch starts it
//! empty, which the phone learns from hello.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::watch;

/// Finished ids kept; the contract asks for at least 500.
pub const KEPT: usize = 1000;

/// The first answer to a request id.
#[derive(Debug, Clone)]
pub struct Finished {
    /// Its HTTP status.
    pub status: u16,
    /// Its body.
    pub body: Value,
}

enum Slot {
    Running(watch::Receiver<Option<Finished>>),
    Done(Finished),
}

struct Entry {
    fingerprint: [u8; 32],
    slot: Slot,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<String, Entry>,
    /// Ids in the order they arrived, for eviction.
    order: VecDeque<String>,
}

/// What a request id is, when a POST carrying it arrives.
pub enum Claim {
    /// New: run the call, then [`Ticket::finish`].
    Fresh(Ticket),
    /// Finished before: answer this again, replayed.
    Replay(Finished),
    /// Running now: wait for the first try's answer, then replay it.
    Running(watch::Receiver<Option<Finished>>),
    /// Used before with another route or body.
    Reused,
}

/// The right to run a fresh request id's call; record its answer with
/// [`Ticket::finish`]. Dropped unfinished, the id is forgotten.
pub struct Ticket {
    log: Arc<RequestIds>,
    id: String,
    done: Option<watch::Sender<Option<Finished>>>,
}

impl Ticket {
    /// Records the first answer and wakes the retries waiting for it.
    pub fn finish(mut self, finished: Finished) {
        let mut inner = self.log.lock();
        if let Some(entry) = inner.entries.get_mut(&self.id) {
            entry.slot = Slot::Done(finished.clone());
        }
        drop(inner);
        if let Some(done) = self.done.take() {
            done.send_replace(Some(finished));
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if self.done.is_some() {
            let mut inner = self.log.lock();
            inner.entries.remove(&self.id);
            inner.order.retain(|id| id != &self.id);
        }
    }
}

/// The request-id log of one epoch.
#[derive(Default)]
pub struct RequestIds {
    inner: Mutex<Inner>,
}

impl RequestIds {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Claims `id` for a POST to `route` with `body`.
    pub fn claim(self: &Arc<Self>, id: &str, route: &str, body: &Value) -> Claim {
        let fingerprint = fingerprint(route, body);
        let mut inner = self.lock();
        if let Some(entry) = inner.entries.get(id) {
            if entry.fingerprint != fingerprint {
                return Claim::Reused;
            }
            return match &entry.slot {
                Slot::Done(finished) => Claim::Replay(finished.clone()),
                Slot::Running(wait) => Claim::Running(wait.clone()),
            };
        }
        let (done, wait) = watch::channel(None);
        inner.entries.insert(
            id.to_owned(),
            Entry {
                fingerprint,
                slot: Slot::Running(wait),
            },
        );
        inner.order.push_back(id.to_owned());
        while inner.order.len() > KEPT {
            // The oldest finished id goes; running ones stay until they finish.
            let Some(position) = inner.order.iter().position(|old| {
                matches!(
                    inner.entries.get(old).map(|e| &e.slot),
                    Some(Slot::Done(_)) | None
                )
            }) else {
                break;
            };
            if let Some(old) = inner.order.remove(position) {
                inner.entries.remove(&old);
            }
        }
        Claim::Fresh(Ticket {
            log: self.clone(),
            id: id.to_owned(),
            done: Some(done),
        })
    }
}

/// The route and the body, canonical (serde_json's maps are sorted).
fn fingerprint(route: &str, body: &Value) -> [u8; 32] {
    let mut hash = Sha256::new();
    hash.update(route.as_bytes());
    hash.update([0]);
    hash.update(body.to_string().as_bytes());
    hash.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_finished_id_replays_and_another_body_is_reused() {
        let log = Arc::new(RequestIds::default());
        let body = json!({"request_id": "r1", "ask": "a"});
        let Claim::Fresh(ticket) = log.claim("r1", "/pane/p1/answer", &body) else {
            panic!("fresh")
        };
        assert!(matches!(
            log.claim("r1", "/pane/p1/answer", &body),
            Claim::Running(_)
        ));
        ticket.finish(Finished {
            status: 200,
            body: json!({"result": "taken"}),
        });
        let Claim::Replay(first) = log.claim("r1", "/pane/p1/answer", &body) else {
            panic!("replay")
        };
        assert_eq!(first.body["result"], "taken");
        assert!(matches!(
            log.claim("r1", "/pane/p2/answer", &body),
            Claim::Reused
        ));
    }

    #[test]
    fn at_least_500_are_kept_and_a_dropped_ticket_forgets() {
        let log = Arc::new(RequestIds::default());
        for i in 0..(KEPT + 10) {
            let Claim::Fresh(t) = log.claim(&format!("r{i}"), "/x", &json!({})) else {
                panic!()
            };
            t.finish(Finished {
                status: 200,
                body: json!({}),
            });
        }
        assert!(matches!(log.claim("r9", "/x", &json!({})), Claim::Fresh(_)));
        assert!(matches!(
            log.claim(&format!("r{}", KEPT + 9), "/x", &json!({})),
            Claim::Replay(_)
        ));
        drop(log.claim("gone", "/x", &json!({})));
        assert!(matches!(
            log.claim("gone", "/x", &json!({})),
            Claim::Fresh(_)
        ));
    }
}
