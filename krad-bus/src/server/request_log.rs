//! At-most-once requests (section 8): the answers of the last 500 request ids of
//! each caller, kept on disk with the app's state.
//!
//! A repeat of a finished id gets the first answer again with `"replayed": true`;
//! a repeat while the first still runs waits for it; the same id with another
//! request is `request_id_reused`. Retryable failures (`busy`, `unavailable`) are
//! not kept, so a retry runs again.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
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

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Entry {
    id: String,
    fingerprint: String,
    answer: Value,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Kept {
    callers: HashMap<String, VecDeque<Entry>>,
}

type Key = (String, String);

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
    finished: bool,
}

/// The log.
pub struct RequestLog {
    path: Option<PathBuf>,
    inner: Shared,
}

impl RequestLog {
    /// A log kept in `path` (loaded if it exists), or only in memory.
    pub fn open(path: Option<&Path>) -> RequestLog {
        let kept = path
            .and_then(|p| std::fs::read(p).ok())
            .and_then(|bytes| match serde_json::from_slice(&bytes) {
                Ok(kept) => Some(kept),
                Err(e) => {
                    tracing::warn!("the request-id log is unreadable ({e}); starting a new one");
                    None
                }
            })
            .unwrap_or_default();
        RequestLog {
            path: path.map(Path::to_path_buf),
            inner: Arc::new(Mutex::new((kept, HashMap::new()))),
        }
    }

    fn lock(&self) -> MutexGuard<'_, (Kept, Running)> {
        lock(&self.inner)
    }

    /// Looks an id up for a caller and a request (its wire JSON).
    pub fn begin(&self, principal: &Principal, id: &str, request: &Value) -> Begin {
        let key = (caller_key(principal), id.to_owned());
        let fingerprint = hex::encode(Sha256::digest(request.to_string().as_bytes()));
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
        {
            let mut inner = self.lock();
            let (kept, running) = &mut *inner;
            running.remove(&ticket.key);
            if !retryable {
                let entries = kept.callers.entry(ticket.key.0.clone()).or_default();
                entries.push_back(Entry {
                    id: ticket.key.1.clone(),
                    fingerprint: ticket.fingerprint.clone(),
                    answer: bounded(answer.clone()),
                });
                while entries.len() > KEPT_PER_CALLER {
                    entries.pop_front();
                }
                self.save(kept);
            }
        }
        ticket.done.send_replace(Some(replayed(answer)));
    }

    /// Forgets what a closed terminal's requests answered: its token no longer
    /// works, so no repeat can come, and the log stays bounded by the
    /// terminals that live (× [`KEPT_PER_CALLER`]).
    pub fn forget_terminal(&self, terminal: &crate::protocol::TerminalRef) {
        let key = caller_key(&Principal::Terminal(terminal.clone()));
        let mut inner = self.lock();
        if inner.0.callers.remove(&key).is_some() {
            self.save(&inner.0);
        }
    }

    fn save(&self, kept: &Kept) {
        let Some(path) = &self.path else { return };
        let temp = path.with_extension("json.tmp");
        let written = serde_json::to_vec(kept)
            .map_err(std::io::Error::other)
            .and_then(|bytes| std::fs::write(&temp, bytes))
            .and_then(|()| std::fs::rename(&temp, path));
        if let Err(e) = written {
            tracing::error!("cannot persist the request-id log: {e}");
        }
    }
}

fn lock(shared: &Shared) -> MutexGuard<'_, (Kept, Running)> {
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.finished {
            lock(&self.shared).1.remove(&self.key);
        }
    }
}

fn caller_key(principal: &Principal) -> String {
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
        let log = RequestLog::open(None);
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

    #[test]
    fn replays_finished_ids_and_refuses_reuse() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ids.json");
        let log = RequestLog::open(Some(&path));
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
        // Persisted: a new log finds it.
        let again = RequestLog::open(Some(&path));
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
    fn retryable_failures_are_not_kept_and_cancelled_work_frees_the_id() {
        let log = RequestLog::open(None);
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
