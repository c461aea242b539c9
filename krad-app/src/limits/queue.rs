//! The queue's line: work sent with `"queue": true` that `[limits]` leave no
//! room for yet, in order, kept in the store (`Kind::Queued`) before it is
//! answered. The state only — [`crate::queue`] queues work and starts it as
//! room frees. Imports nothing above the store.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use krad_bus::protocol::ApiError;
use krad_bus::protocol::ErrorCode;
use krad_bus::request::send::Send;
use krad_bus::request::spawn::Spawn;
use krad_store::{Db, Kind, StoreError, Tx};
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

/// A Spawn that waits in the queue, resolved as it was asked: who it is and
/// where, so that it starts later as it would have then.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct QueuedSpawn {
    /// Its terminal, given out when it was queued.
    pub terminal: u64,
    /// The request, its environment and profile filled in.
    pub request: Spawn,
    /// It gets a lead token.
    pub lead: bool,
    /// The terminal that spawned it.
    pub parent: Option<u64>,
    /// Its group and number when it is a variant.
    pub variant: Option<(String, u32)>,
}

/// One piece of work waiting, as the store keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct InLine {
    /// Its place in line: later work has a larger number.
    pub seq: u64,
    /// When it was queued (RFC 3339).
    pub since: String,
    /// What it is.
    pub work: Work,
}

/// What waits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Work {
    /// A Spawn, its terminal on record as `queued`.
    Spawn(Box<QueuedSpawn>),
    /// A Send.
    Send {
        /// The request.
        request: Send,
    },
}

impl Work {
    /// The terminal the work is for.
    pub(crate) fn terminal(&self) -> u64 {
        match self {
            Work::Spawn(spawn) => spawn.terminal,
            Work::Send { request } => request.target,
        }
    }
}

/// The queue in memory, in order; the store holds the same.
#[derive(Default)]
pub(crate) struct Queue {
    line: Mutex<Line>,
    pub(crate) wake: Arc<Notify>,
    /// The app is stopping: nothing more starts.
    stopped: AtomicBool,
}

#[derive(Default)]
pub(crate) struct Line {
    pub(crate) waiting: Vec<InLine>,
    pub(crate) next_seq: u64,
    /// The queued terminal whose turn came and which is being started: out
    /// of line (a Close no longer takes it out) but `queued` on record until
    /// its program starts, first in line till then.
    pub(crate) starting: Option<u64>,
}

impl Queue {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Line> {
        self.line.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts nothing more (the app stops; the queue is kept for the next).
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
    }

    /// Whether the app is stopping.
    pub(crate) fn stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// How much work waits.
    pub(crate) fn len(&self) -> usize {
        self.lock().waiting.len()
    }

    /// The terminals in line, in order: the one being started first, then
    /// each piece of work's.
    pub(crate) fn terminals_in_order(&self) -> Vec<u64> {
        let line = self.lock();
        line.starting
            .into_iter()
            .chain(line.waiting.iter().map(|w| w.work.terminal()))
            .collect()
    }

    /// Notes (or with `None`, forgets) the queued terminal being started.
    pub(crate) fn set_starting(&self, terminal: Option<u64>) {
        self.lock().starting = terminal;
    }

    /// Puts `work` last in line, once `keep` kept it in the store; returns
    /// its place, from 1.
    pub(crate) fn push(
        &self,
        work: Work,
        since: String,
        keep: impl FnOnce(&InLine) -> Result<(), ApiError>,
    ) -> Result<u32, ApiError> {
        let mut line = self.lock();
        let waiting = InLine {
            seq: line.next_seq.max(1),
            since,
            work,
        };
        keep(&waiting)?;
        line.next_seq = waiting.seq + 1;
        line.waiting.push(waiting);
        let place = line.waiting.len();
        drop(line);
        self.wake.notify_one();
        Ok(u32::try_from(place).unwrap_or(u32::MAX))
    }

    /// Takes out the work `matches` picks, here and in the store; returns
    /// what it took.
    pub(crate) fn take(&self, db: &Db, matches: impl Fn(&InLine) -> bool) -> Vec<InLine> {
        let taken = self.take_out(matches);
        forget(db, &taken);
        taken
    }

    /// The same, with `also` written in the store's transaction.
    pub(crate) fn take_with(
        &self,
        db: &Db,
        matches: impl Fn(&InLine) -> bool,
        also: impl FnOnce(&Tx<'_>) -> Result<(), StoreError>,
    ) -> Vec<InLine> {
        let taken = self.take_out(matches);
        let removed = db.write(|tx| {
            for waiting in &taken {
                tx.remove(Kind::Queued, &key(waiting.seq))?;
            }
            also(tx)
        });
        if let Err(e) = removed {
            tracing::error!("cannot take work out of the queue in the store: {e}");
        }
        taken
    }

    /// Takes out the work `matches` picks here only (the store keeps it
    /// until [`forget`]).
    pub(crate) fn take_out(&self, matches: impl Fn(&InLine) -> bool) -> Vec<InLine> {
        let mut line = self.lock();
        let (taken, staying): (Vec<_>, Vec<_>) = line.waiting.drain(..).partition(|w| matches(w));
        line.waiting = staying;
        taken
    }
}

/// Removes `done` from the store's queue.
pub(crate) fn forget(db: &Db, done: &[InLine]) {
    let removed = db.write(|tx| {
        for waiting in done {
            tx.remove(Kind::Queued, &key(waiting.seq))?;
        }
        Ok(())
    });
    if let Err(e) = removed {
        tracing::error!("cannot take work out of the queue in the store: {e}");
    }
}

/// The store's key of the work at `seq`: zero-padded, so that the keys sort
/// in the queue's order.
pub(crate) fn key(seq: u64) -> String {
    format!("{seq:020}")
}

/// Writes `waiting` in the store.
pub(crate) fn keep(tx: &krad_store::Tx<'_>, waiting: &InLine) -> Result<(), StoreError> {
    tx.put(Kind::Queued, &key(waiting.seq), waiting)
}

pub(crate) fn kept(written: Result<(), StoreError>) -> Result<(), ApiError> {
    written.map_err(|e| cannot_keep(&e))
}

pub(crate) fn cannot_keep(e: &dyn std::fmt::Display) -> ApiError {
    ApiError::new(
        ErrorCode::Failed,
        format!("cannot keep the request in the queue: {e}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_in_the_queue_order() {
        assert!(key(9) < key(10));
        assert!(key(99) < key(100_000));
        assert_eq!(key(42).len(), 20);
    }

    #[test]
    fn work_is_kept_as_json_and_read_back() {
        let spawn = InLine {
            seq: 3,
            since: "2026-12-06T21:00:00Z".to_owned(),
            work: Work::Spawn(Box::new(QueuedSpawn {
                terminal: 7,
                request: Spawn {
                    environment: Some("main".to_owned()),
                    profile: Some("exec".to_owned()),
                    queue: Some(true),
                    ..Spawn::default()
                },
                lead: false,
                parent: Some(2),
                variant: Some(("login".to_owned(), 2)),
            })),
        };
        let text = serde_json::to_string(&spawn).unwrap();
        assert!(text.contains(r#""kind":"spawn""#), "{text}");
        assert_eq!(serde_json::from_str::<InLine>(&text).unwrap(), spawn);
        let send = InLine {
            seq: 4,
            since: "2026-12-06T21:00:01Z".to_owned(),
            work: Work::Send {
                request: Send {
                    target: 7,
                    text: "go on".to_owned(),
                    ..Send::default()
                },
            },
        };
        let text = serde_json::to_string(&send).unwrap();
        assert_eq!(serde_json::from_str::<InLine>(&text).unwrap(), send);
        assert_eq!(send.work.terminal(), 7);
    }
}
