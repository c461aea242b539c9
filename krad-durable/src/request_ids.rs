//! At-most-once POSTs: the request ids of one epoch and their first answers.
//!
//! The phone makes one request id per intent and retries with the same id when
//! it cannot tell whether a POST arrived. A repeat of a finished id gets the
//! first answer again with `"replayed": true` and runs nothing; a repeat while
//! the first is still running waits for it; the same id with another route or
//! body is `request-id-reused`. The log lives in memory: a new epoch starts it
//! empty, which the phone learns from hello. The ledger is the one the bus
//! uses ([`krad_once`]).

use std::sync::Arc;

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
pub struct Ticket(krad_once::Ticket<Finished>);

impl Ticket {
    /// Records the first answer and wakes the retries waiting for it.
    pub fn finish(self, finished: Finished) {
        self.0.finish(finished);
    }
}

/// The request-id log of one epoch: the one at-most-once ledger
/// ([`krad_once`], which the bus uses too), with the phone as its one caller.
pub struct RequestIds {
    ledger: krad_once::Ledger<Finished>,
}

impl Default for RequestIds {
    fn default() -> Self {
        RequestIds {
            ledger: krad_once::Ledger::new(KEPT),
        }
    }
}

impl RequestIds {
    /// Claims `id` for a POST to `route` with `body`.
    pub fn claim(self: &Arc<Self>, id: &str, route: &str, body: &Value) -> Claim {
        match self.ledger.claim("phone", id, &fingerprint(route, body)) {
            krad_once::Claim::Fresh(ticket) => Claim::Fresh(Ticket(ticket)),
            krad_once::Claim::Replay(finished) => Claim::Replay(finished),
            krad_once::Claim::Running(first) => Claim::Running(first),
            krad_once::Claim::Reused => Claim::Reused,
        }
    }
}

/// The route and the body, canonical (serde_json's maps are sorted).
fn fingerprint(route: &str, body: &Value) -> String {
    let mut hash = Sha256::new();
    hash.update(route.as_bytes());
    hash.update([0]);
    hash.update(body.to_string().as_bytes());
    hex::encode(hash.finalize())
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
