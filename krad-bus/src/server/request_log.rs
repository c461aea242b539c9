//! At-most-once requests (section 8): the bus's side of the one ledger of
//! request ids ([`krad_once`], which the durable facet uses too) — the
//! answers' JSON, marked `replayed` when given again, the last 500 of each
//! caller kept in the app's store ([`KeptAnswers`]) with its state.
//!
//! A repeat of a finished id gets the first answer again with `"replayed": true`;
//! a repeat while the first still runs waits for it; the same id with another
//! request is `request_id_reused`. Retryable failures (`busy`, `unavailable`) are
//! not kept, so a retry runs again.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::protocol::ErrorCode;
use crate::token::Principal;

/// Answers kept per caller.
pub const KEPT_PER_CALLER: usize = 500;
/// Strings longer than this are cut in a kept answer, to bound the file.
const KEPT_STRING: usize = 16 * 1024;

/// A kept answer: a caller's request id, the request's fingerprint, the answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The request id.
    pub id: String,
    /// A hash of the request (see [`fingerprint`]).
    pub fingerprint: String,
    /// The answer, as first given (not marked `replayed`).
    pub answer: Value,
}

/// The legacy JSON file's shape (read once, to import it into the store).
#[derive(Debug, Default, Serialize, Deserialize)]
struct Kept {
    callers: HashMap<String, VecDeque<Entry>>,
}

/// Where kept answers live between runs: the app's store. Each call is one
/// transaction.
pub trait KeptAnswers: Send + Sync {
    /// Settles a request that ran: keeps its answer (unless `None`, a
    /// retryable failure) and drops whatever the app recorded as pending
    /// under the same caller and id — together.
    fn settle(&self, caller: &str, entry: Option<&Entry>, id: &str) -> Result<(), String>;
    /// Forgets every answer of a caller.
    fn forget_caller(&self, caller: &str) -> Result<(), String>;
}

/// A running request with an id, as its handler sees it (in
/// [`super::CallContext`]): what the app records with its intents so that a
/// retry after a crash gets the outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OnceKey {
    /// The caller, as [`caller_key`] names it.
    pub caller: String,
    /// The request id.
    pub id: String,
    /// The request's fingerprint.
    pub fingerprint: String,
}

/// The request-id log of a previous run, as it was kept in a JSON file (read
/// once, to import it into the store).
pub fn read_legacy_file(bytes: &[u8]) -> Result<Vec<(String, Entry)>, String> {
    let kept: Kept = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    Ok(kept
        .callers
        .into_iter()
        .flat_map(|(caller, entries)| entries.into_iter().map(move |e| (caller.clone(), e)))
        .collect())
}

/// What to do with a request that has an id.
pub enum Begin {
    /// First time: run it, then [`RequestLog::finish`] the ticket.
    Fresh(Ticket),
    /// Seen and finished: answer this (already marked `replayed`).
    Replay(Value),
    /// Still running: wait for the first answer (already marked `replayed`;
    /// the sender gone if the first was cancelled).
    Running(watch::Receiver<Option<Value>>),
    /// The id was used for another request.
    Reused,
}

/// A running request with an id. Dropping it unfinished (the work was
/// cancelled) frees the id for a retry, and its waiting repeats are told so.
pub struct Ticket {
    ticket: Option<krad_once::Ticket<Value>>,
    store: Option<Arc<dyn KeptAnswers>>,
}

/// The log: the one at-most-once ledger ([`krad_once::Ledger`]) over the
/// answers' JSON, kept in the app's store.
pub struct RequestLog {
    store: Option<Arc<dyn KeptAnswers>>,
    ledger: krad_once::Ledger<Value>,
}

impl RequestLog {
    /// A log kept only in memory (tests, tools).
    pub fn in_memory() -> RequestLog {
        RequestLog {
            store: None,
            ledger: krad_once::Ledger::new(KEPT_PER_CALLER),
        }
    }

    /// A log kept in `store`, starting with the answers it holds (oldest
    /// first, as `(caller, entry)`).
    pub fn kept_in(
        store: Arc<dyn KeptAnswers>,
        answers: impl IntoIterator<Item = (String, Entry)>,
    ) -> RequestLog {
        let answers = answers
            .into_iter()
            .map(|(caller, entry)| (caller, entry.id, entry.fingerprint, entry.answer));
        RequestLog {
            store: Some(store),
            ledger: krad_once::Ledger::with_answers(KEPT_PER_CALLER, answers),
        }
    }

    /// Looks an id up for a caller and a request (its wire JSON).
    pub fn begin(&self, principal: &Principal, id: &str, request: &Value) -> Begin {
        let caller = caller_key(principal);
        match self.ledger.claim(&caller, id, &fingerprint(request)) {
            krad_once::Claim::Fresh(ticket) => Begin::Fresh(Ticket {
                ticket: Some(ticket),
                store: self.store.clone(),
            }),
            krad_once::Claim::Replay(answer) => Begin::Replay(replayed(answer)),
            krad_once::Claim::Running(first) => Begin::Running(first),
            krad_once::Claim::Reused => Begin::Reused,
        }
    }

    /// Records the answer of a request that ran, and wakes its repeats.
    /// Retryable failures (`busy`, `unavailable`) are not kept.
    pub fn finish(&self, mut ticket: Ticket, answer: Value) {
        let Some(once) = ticket.ticket.take() else {
            return;
        };
        let retryable = ErrorCode::of_answer(&answer).is_some_and(ErrorCode::retryable);
        let kept = (!retryable).then(|| bounded(answer.clone()));
        let (caller, id, print) = (
            once.caller().to_owned(),
            once.id().to_owned(),
            once.fingerprint().to_owned(),
        );
        // Kept in the store first, under the ledger's lock: a repeat sees the
        // answer in memory only once it is on disk.
        let persisted = once.finish_with(kept, replayed(answer), |kept| {
            persist(&self.store, &caller, &id, &print, kept)
        });
        if let Err(e) = persisted {
            tracing::error!("cannot keep a request id's answer: {e}");
        }
    }

    /// Settles a request id whose request a crash interrupted, once the app's
    /// recovery took it to its end (`Some(answer)`: a retry gets it, replayed)
    /// or back to its start (`None`: a retry runs afresh).
    pub fn recovered(&self, key: &OnceKey, answer: Option<Value>) -> Result<(), String> {
        self.ledger.settle_with(
            &key.caller,
            &key.id,
            &key.fingerprint,
            answer.map(bounded),
            |kept| persist(&self.store, &key.caller, &key.id, &key.fingerprint, kept),
        )
    }

    /// Forgets what a closed terminal's requests answered: its token no longer
    /// works, so no repeat can come, and the log stays bounded by the
    /// terminals that live (× [`KEPT_PER_CALLER`]).
    pub fn forget_terminal(&self, terminal: &crate::protocol::TerminalRef) {
        let key = caller_key(&Principal::Terminal(terminal.clone()));
        self.ledger.forget_caller(&key, || {
            if let Some(store) = &self.store
                && let Err(e) = store.forget_caller(&key)
            {
                tracing::error!("cannot forget a closed terminal's request ids: {e}");
            }
        });
    }
}

/// Keeps (or, for `None`, drops) an id's answer in the store, with whatever
/// the app recorded as pending under it.
fn persist(
    store: &Option<Arc<dyn KeptAnswers>>,
    caller: &str,
    id: &str,
    fingerprint: &str,
    kept: Option<&Value>,
) -> Result<(), String> {
    let Some(store) = store else {
        return Ok(());
    };
    let entry = kept.map(|answer| Entry {
        id: id.to_owned(),
        fingerprint: fingerprint.to_owned(),
        answer: answer.clone(),
    });
    store.settle(caller, entry.as_ref(), id)
}

impl Ticket {
    /// The request's id, caller and fingerprint, for its handler.
    pub fn key(&self) -> OnceKey {
        let (caller, id, fingerprint) = self.ticket.as_ref().map_or_else(
            || (String::new(), String::new(), String::new()),
            |t| {
                (
                    t.caller().to_owned(),
                    t.id().to_owned(),
                    t.fingerprint().to_owned(),
                )
            },
        );
        OnceKey {
            caller,
            id,
            fingerprint,
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let Some(once) = self.ticket.take() else {
            return;
        };
        let (caller, id) = (once.caller().to_owned(), once.id().to_owned());
        let store = self.store.clone();
        // Cancelled: nothing of it is pending any more.
        once.cancel_with(|| {
            if let Some(store) = &store
                && let Err(e) = store.settle(&caller, None, &id)
            {
                tracing::error!("cannot settle a cancelled request id: {e}");
            }
        });
    }
}

/// A request's fingerprint: a hash of its wire JSON.
pub fn fingerprint(request: &Value) -> String {
    hex::encode(Sha256::digest(request.to_string().as_bytes()))
}

/// How the log names a caller.
pub fn caller_key(principal: &Principal) -> String {
    match principal {
        Principal::Client => "client".to_owned(),
        Principal::Durable => "durable".to_owned(),
        Principal::Lead(t) | Principal::Terminal(t) => {
            format!("terminal:{}/{}", t.environment, t.terminal)
        }
    }
}

/// The answer with `"replayed": true` inside its object (`"Ok"` becomes
/// `{"Ok":{"replayed":true}}`).
fn replayed(answer: Value) -> Value {
    match answer {
        Value::String(name) => {
            let mut inner = Map::new();
            inner.insert("replayed".into(), Value::Bool(true));
            let mut outer = Map::new();
            outer.insert(name, Value::Object(inner));
            Value::Object(outer)
        }
        Value::Object(mut outer) => {
            for value in outer.values_mut() {
                if let Value::Object(inner) = value {
                    inner.insert("replayed".into(), Value::Bool(true));
                }
            }
            Value::Object(outer)
        }
        other => other,
    }
}

/// Cuts long strings so a kept answer stays small.
fn bounded(value: Value) -> Value {
    match value {
        Value::String(mut s) if s.len() > KEPT_STRING => {
            let mut end = KEPT_STRING;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            s.truncate(end);
            Value::String(s)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(bounded).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, bounded(v))).collect())
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Mutex;

    #[test]
    fn a_closed_terminal_s_answers_are_forgotten() {
        let log = RequestLog::in_memory();
        let me = crate::protocol::TerminalRef {
            environment: "main".into(),
            terminal: 4,
        };
        let req = json!({"Send":{"target":5,"text":"x"}});
        let Begin::Fresh(ticket) = log.begin(&Principal::Terminal(me.clone()), "s1", &req) else {
            panic!()
        };
        log.finish(ticket, json!("Ok"));
        assert!(matches!(
            log.begin(&Principal::Terminal(me.clone()), "s1", &req),
            Begin::Replay(_)
        ));
        log.forget_terminal(&me);
        assert!(matches!(
            log.begin(&Principal::Terminal(me.clone()), "s1", &req),
            Begin::Fresh(_)
        ));
    }

    /// A store that remembers what it was told.
    #[derive(Default)]
    struct Remembered(Mutex<Vec<(String, Option<Entry>, String)>>);

    impl KeptAnswers for Remembered {
        fn settle(&self, caller: &str, entry: Option<&Entry>, id: &str) -> Result<(), String> {
            let mut told = self.0.lock().unwrap();
            told.push((caller.into(), entry.cloned(), id.into()));
            Ok(())
        }
        fn forget_caller(&self, _: &str) -> Result<(), String> {
            Ok(())
        }
    }

    #[test]
    fn replays_finished_ids_and_refuses_reuse() {
        let store = Arc::new(Remembered::default());
        let log = RequestLog::kept_in(store.clone(), []);
        let req = json!({"Spawn":{"profile":"exec"}});
        let Begin::Fresh(ticket) = log.begin(&Principal::Client, "a", &req) else {
            panic!()
        };
        assert!(matches!(
            log.begin(&Principal::Client, "a", &req),
            Begin::Running(_)
        ));
        assert!(matches!(
            log.begin(&Principal::Client, "a", &json!("Other")),
            Begin::Reused
        ));
        log.finish(ticket, json!("Ok"));
        let Begin::Replay(answer) = log.begin(&Principal::Client, "a", &req) else {
            panic!()
        };
        assert_eq!(answer, json!({"Ok":{"replayed":true}}));
        // Kept: a new log started from what the store holds finds it.
        let told = store.0.lock().unwrap().clone();
        let [(caller, Some(entry), id)] = &told[..] else {
            panic!("{told:?}")
        };
        assert_eq!((caller.as_str(), id.as_str()), ("client", "a"));
        let again = RequestLog::kept_in(store.clone(), [(caller.clone(), entry.clone())]);
        assert!(matches!(
            again.begin(&Principal::Client, "a", &req),
            Begin::Replay(_)
        ));
        assert!(matches!(
            again.begin(&Principal::Client, "a", &json!("Other")),
            Begin::Reused
        ));
    }

    #[test]
    fn a_legacy_file_is_read() {
        let file = br#"{"callers":{"client":[{"id":"a","fingerprint":"f","answer":"Ok"}]}}"#;
        let read = read_legacy_file(file).unwrap();
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].0, "client");
        assert!(read_legacy_file(b"{").is_err());
    }

    #[test]
    fn retryable_failures_are_not_kept_and_cancelled_work_frees_the_id() {
        let log = RequestLog::in_memory();
        let req = json!("Shutdown");
        let Begin::Fresh(t) = log.begin(&Principal::Client, "b", &req) else {
            panic!()
        };
        log.finish(t, json!({"Error":{"code":"busy","message":"x"}}));
        let Begin::Fresh(t) = log.begin(&Principal::Client, "b", &req) else {
            panic!()
        };
        let Begin::Running(mut waiter) = log.begin(&Principal::Client, "b", &req) else {
            panic!()
        };
        drop(t);
        assert!(waiter.borrow_and_update().is_none());
        assert!(matches!(
            log.begin(&Principal::Client, "b", &req),
            Begin::Fresh(_)
        ));
    }

    #[test]
    fn answers_are_marked_inside_their_object_and_kept_small() {
        assert_eq!(
            replayed(json!({"Agent":{"terminal":1}})),
            json!({"Agent":{"terminal":1,"replayed":true}})
        );
        let big = bounded(json!({"CodeResult":{"stdout":"x".repeat(100_000)}}));
        assert_eq!(
            big["CodeResult"]["stdout"].as_str().unwrap().len(),
            KEPT_STRING
        );
    }
}
