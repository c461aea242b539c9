//! At-most-once requests (section 8): the answers of the last 500 request ids of
//! each caller, kept in the app's store ([`KeptAnswers`]) with its state.
//!
//! A repeat of a finished id gets the first answer again with `"replayed": true`;
//! a repeat while the first still runs waits for it; the same id with another
//! request is `request_id_reused`. Retryable failures (`busy`, `unavailable`) are
//! not kept, so a retry runs again.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

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

#[derive(Debug, Default, Serialize, Deserialize)]
struct Kept {
    callers: HashMap<String, VecDeque<Entry>>,
}

type Key = (String, String);

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
    /// Still running: wait for the first answer.
    Running(watch::Receiver<Option<Value>>),
    /// The id was used for another request.
    Reused,
}

type Running = HashMap<Key, (String, watch::Receiver<Option<Value>>)>;
type Shared = Arc<Mutex<(Kept, Running)>>;

/// A running request with an id. Dropping it unfinished (the work was
/// cancelled) frees the id for a retry, and its waiting repeats are told so.
pub struct Ticket {
    key: Key,
    fingerprint: String,
    done: watch::Sender<Option<Value>>,
    shared: Shared,
    store: Option<Arc<dyn KeptAnswers>>,
    finished: bool,
}

/// The log.
pub struct RequestLog {
    store: Option<Arc<dyn KeptAnswers>>,
    inner: Shared,
}

impl RequestLog {
    /// A log kept only in memory (tests, tools).
    pub fn in_memory() -> RequestLog {
        RequestLog {
            store: None,
            inner: Arc::default(),
        }
    }

    /// A log kept in `store`, starting with the answers it holds (oldest
    /// first, as `(caller, entry)`).
    pub fn kept_in(
        store: Arc<dyn KeptAnswers>,
        answers: impl IntoIterator<Item = (String, Entry)>,
    ) -> RequestLog {
        let mut kept = Kept::default();
        for (caller, entry) in answers {
            kept.callers.entry(caller).or_default().push_back(entry);
        }
        RequestLog {
            store: Some(store),
            inner: Arc::new(Mutex::new((kept, HashMap::new()))),
        }
    }

    fn lock(&self) -> MutexGuard<'_, (Kept, Running)> {
        lock(&self.inner)
    }

    /// Looks an id up for a caller and a request (its wire JSON).
    pub fn begin(&self, principal: &Principal, id: &str, request: &Value) -> Begin {
        let key = (caller_key(principal), id.to_owned());
        let fingerprint = fingerprint(request);
        let mut inner = self.lock();
        let (kept, running) = &mut *inner;
        if let Some(entry) = kept
            .callers
            .get(&key.0)
            .and_then(|entries| entries.iter().find(|e| e.id == key.1))
        {
            if entry.fingerprint != fingerprint {
                return Begin::Reused;
            }
            return Begin::Replay(replayed(entry.answer.clone()));
        }
        if let Some((print, receiver)) = running.get(&key) {
            if *print != fingerprint {
                return Begin::Reused;
            }
            return Begin::Running(receiver.clone());
        }
        let (done, receiver) = watch::channel(None);
        running.insert(key.clone(), (fingerprint.clone(), receiver));
        Begin::Fresh(Ticket {
            key,
            fingerprint,
            done,
            shared: self.inner.clone(),
            store: self.store.clone(),
            finished: false,
        })
    }

    /// Records the answer of a request that ran, and wakes its repeats.
    pub fn finish(&self, mut ticket: Ticket, answer: Value) {
        ticket.finished = true;
        let retryable = answer
            .get("Error")
            .and_then(|e| e.get("code"))
            .and_then(|c| serde_json::from_value::<ErrorCode>(c.clone()).ok())
            .is_some_and(ErrorCode::retryable);
        let entry = (!retryable).then(|| Entry {
            id: ticket.key.1.clone(),
            fingerprint: ticket.fingerprint.clone(),
            answer: bounded(answer.clone()),
        });
        {
            let mut inner = self.lock();
            let (kept, running) = &mut *inner;
            running.remove(&ticket.key);
            // Kept in the store first, under the log's lock: a repeat sees the
            // answer in memory only once it is on disk.
            if let Some(store) = &self.store
                && let Err(e) = store.settle(&ticket.key.0, entry.as_ref(), &ticket.key.1)
            {
                tracing::error!("cannot keep a request id's answer: {e}");
            }
            if let Some(entry) = entry {
                let entries = kept.callers.entry(ticket.key.0.clone()).or_default();
                entries.push_back(entry);
                while entries.len() > KEPT_PER_CALLER {
                    entries.pop_front();
                }
            }
        }
        ticket.done.send_replace(Some(replayed(answer)));
    }

    /// Settles a request id whose request a crash interrupted, once the app's
    /// recovery took it to its end (`Some(answer)`: a retry gets it, replayed)
    /// or back to its start (`None`: a retry runs afresh).
    pub fn recovered(&self, key: &OnceKey, answer: Option<Value>) -> Result<(), String> {
        let entry = answer.map(|answer| Entry {
            id: key.id.clone(),
            fingerprint: key.fingerprint.clone(),
            answer: bounded(answer),
        });
        let mut inner = self.lock();
        if let Some(store) = &self.store {
            store.settle(&key.caller, entry.as_ref(), &key.id)?;
        }
        if let Some(entry) = entry {
            let entries = inner.0.callers.entry(key.caller.clone()).or_default();
            entries.retain(|e| e.id != entry.id);
            entries.push_back(entry);
            while entries.len() > KEPT_PER_CALLER {
                entries.pop_front();
            }
        }
        Ok(())
    }

    /// Forgets what a closed terminal's requests answered: its token no longer
    /// works, so no repeat can come, and the log stays bounded by the
    /// terminals that live (× [`KEPT_PER_CALLER`]).
    pub fn forget_terminal(&self, terminal: &crate::protocol::TerminalRef) {
        let key = caller_key(&Principal::Terminal(terminal.clone()));
        let mut inner = self.lock();
        if inner.0.callers.remove(&key).is_some()
            && let Some(store) = &self.store
            && let Err(e) = store.forget_caller(&key)
        {
            tracing::error!("cannot forget a closed terminal's request ids: {e}");
        }
    }
}

fn lock(shared: &Shared) -> MutexGuard<'_, (Kept, Running)> {
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

impl Ticket {
    /// The request's id, caller and fingerprint, for its handler.
    pub fn key(&self) -> OnceKey {
        OnceKey {
            caller: self.key.0.clone(),
            id: self.key.1.clone(),
            fingerprint: self.fingerprint.clone(),
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.finished {
            lock(&self.shared).1.remove(&self.key);
            // Cancelled: nothing of it is pending any more.
            if let Some(store) = &self.store
                && let Err(e) = store.settle(&self.key.0, None, &self.key.1)
            {
                tracing::error!("cannot settle a cancelled request id: {e}");
            }
        }
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
        assert!(log.lock().0.callers.is_empty());
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
