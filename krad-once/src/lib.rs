//! At most once: the one ledger of request ids and their first answers,
//! used by the bus (contract section 8, `krad_bus::server::request_log`) and
//! by the durable facet's POSTs (`krad_durable::request_ids`).
//!
//! A caller's request id is claimed once: the first claim runs the work
//! ([`Claim::Fresh`]); a repeat while it runs waits for its answer
//! ([`Claim::Running`]); a repeat once it finished gets the first answer
//! again ([`Claim::Replay`]); the same id with another request (another
//! fingerprint) is [`Claim::Reused`]. A [`Ticket`] dropped unfinished (the
//! work was cancelled) frees the id. The last `keep` finished ids of each
//! caller are kept, oldest out first; running ones are never evicted.
//!
//! The ledger lives in memory. A user that keeps answers across restarts
//! (the bus, in the app's store) does its writes through the `persist`
//! callbacks, which run under the ledger's lock: a repeat sees an answer in
//! memory only once it is on disk.
//!
//! Knows nothing of JSON, HTTP or the bus: answers are any `A: Clone`.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::watch;

/// What a claimed request id is.
pub enum Claim<A> {
    /// New: run the work, then [`Ticket::finish`].
    Fresh(Ticket<A>),
    /// Finished before: its first answer.
    Replay(A),
    /// Running now: what its first run answers, once it has (`None` until
    /// then; the sender gone when the first run was cancelled).
    Running(watch::Receiver<Option<A>>),
    /// Used before with another request.
    Reused,
}

enum Slot<A> {
    Running(watch::Receiver<Option<A>>),
    Done(A),
}

struct Entry<A> {
    fingerprint: String,
    slot: Slot<A>,
}

/// One caller's ids: every entry, and the finished ones in the order they
/// finished (for eviction).
struct Ids<A> {
    entries: HashMap<String, Entry<A>>,
    finished: VecDeque<String>,
}

impl<A> Default for Ids<A> {
    fn default() -> Self {
        Ids {
            entries: HashMap::new(),
            finished: VecDeque::new(),
        }
    }
}

struct Inner<A> {
    callers: HashMap<String, Ids<A>>,
    keep: usize,
}

impl<A> Inner<A> {
    /// Marks `id` of `caller` finished with `answer` (or forgets it, for
    /// `None`), and evicts past `keep`.
    fn settle(&mut self, caller: &str, id: &str, fingerprint: &str, answer: Option<A>) {
        let keep = self.keep;
        let ids = self.callers.entry(caller.to_owned()).or_default();
        ids.finished.retain(|old| old != id);
        match answer {
            Some(answer) => {
                ids.entries.insert(
                    id.to_owned(),
                    Entry {
                        fingerprint: fingerprint.to_owned(),
                        slot: Slot::Done(answer),
                    },
                );
                ids.finished.push_back(id.to_owned());
                while ids.finished.len() > keep {
                    if let Some(old) = ids.finished.pop_front() {
                        ids.entries.remove(&old);
                    }
                }
            }
            None => {
                ids.entries.remove(id);
            }
        }
        if ids.entries.is_empty() {
            self.callers.remove(caller);
        }
    }
}

/// The ledger: every caller's request ids.
pub struct Ledger<A> {
    inner: Arc<Mutex<Inner<A>>>,
}

impl<A> Clone for Ledger<A> {
    fn clone(&self) -> Self {
        Ledger {
            inner: self.inner.clone(),
        }
    }
}

fn lock<A>(inner: &Mutex<Inner<A>>) -> MutexGuard<'_, Inner<A>> {
    inner.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<A: Clone> Ledger<A> {
    /// An empty ledger keeping the last `keep` finished ids of each caller.
    pub fn new(keep: usize) -> Ledger<A> {
        Ledger {
            inner: Arc::new(Mutex::new(Inner {
                callers: HashMap::new(),
                keep,
            })),
        }
    }

    /// A ledger holding the answers kept by an earlier run: `(caller, id,
    /// fingerprint, answer)`, oldest first.
    pub fn with_answers(
        keep: usize,
        answers: impl IntoIterator<Item = (String, String, String, A)>,
    ) -> Ledger<A> {
        let ledger = Ledger::new(keep);
        {
            let mut inner = lock(&ledger.inner);
            for (caller, id, fingerprint, answer) in answers {
                inner.settle(&caller, &id, &fingerprint, Some(answer));
            }
        }
        ledger
    }

    /// Claims `id` of `caller` for the request whose fingerprint is
    /// `fingerprint`.
    pub fn claim(&self, caller: &str, id: &str, fingerprint: &str) -> Claim<A> {
        let mut inner = lock(&self.inner);
        let ids = inner.callers.entry(caller.to_owned()).or_default();
        if let Some(entry) = ids.entries.get(id) {
            if entry.fingerprint != fingerprint {
                return Claim::Reused;
            }
            return match &entry.slot {
                Slot::Done(answer) => Claim::Replay(answer.clone()),
                Slot::Running(first) => Claim::Running(first.clone()),
            };
        }
        let (done, first) = watch::channel(None);
        ids.entries.insert(
            id.to_owned(),
            Entry {
                fingerprint: fingerprint.to_owned(),
                slot: Slot::Running(first),
            },
        );
        Claim::Fresh(Ticket {
            ledger: self.clone(),
            caller: caller.to_owned(),
            id: id.to_owned(),
            fingerprint: fingerprint.to_owned(),
            done: Some(done),
        })
    }

    /// Settles an id no ticket holds (its request was interrupted by a
    /// crash, and the app's recovery took it to its end or back): `Some`
    /// answer is replayed from now on, `None` frees the id. `persist` runs
    /// first, under the lock; its error leaves the ledger as it was.
    pub fn settle_with<E>(
        &self,
        caller: &str,
        id: &str,
        fingerprint: &str,
        answer: Option<A>,
        persist: impl FnOnce(Option<&A>) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut inner = lock(&self.inner);
        persist(answer.as_ref())?;
        inner.settle(caller, id, fingerprint, answer);
        Ok(())
    }

    /// Forgets every id of `caller` (it can make no request again); whether
    /// it had any. `persist` runs under the lock when it had.
    pub fn forget_caller(&self, caller: &str, persist: impl FnOnce()) -> bool {
        let mut inner = lock(&self.inner);
        let had = inner.callers.remove(caller).is_some();
        if had {
            persist();
        }
        had
    }
}

/// The right to run a fresh id's work. Dropped unfinished, the id is freed
/// and the repeats waiting for it see its sender gone.
pub struct Ticket<A> {
    ledger: Ledger<A>,
    caller: String,
    id: String,
    fingerprint: String,
    done: Option<watch::Sender<Option<A>>>,
}

impl<A: Clone> Ticket<A> {
    /// The caller.
    pub fn caller(&self) -> &str {
        &self.caller
    }

    /// The request id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The request's fingerprint.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Finishes the work: `kept` is replayed to repeats from now on (`None`:
    /// not kept, a repeat runs again), and `told` goes to the repeats that
    /// waited. `persist` runs first, under the ledger's lock (its error is
    /// returned; the answer is kept in memory all the same).
    pub fn finish_with<E>(
        mut self,
        kept: Option<A>,
        told: A,
        persist: impl FnOnce(Option<&A>) -> Result<(), E>,
    ) -> Result<(), E> {
        let persisted = {
            let mut inner = lock(&self.ledger.inner);
            let persisted = persist(kept.as_ref());
            inner.settle(&self.caller, &self.id, &self.fingerprint, kept);
            persisted
        };
        if let Some(done) = self.done.take() {
            done.send_replace(Some(told));
        }
        persisted
    }

    /// Finishes the work with `answer`, kept and told.
    pub fn finish(self, answer: A) {
        let kept = answer.clone();
        let _ = self.finish_with::<()>(Some(kept), answer, |_| Ok(()));
    }

    /// Drops the ticket unfinished, running `persist` under the lock once
    /// the id is freed (the app drops what it recorded as pending).
    pub fn cancel_with(mut self, persist: impl FnOnce()) {
        self.done = None;
        let mut inner = lock(&self.ledger.inner);
        inner.settle(&self.caller, &self.id, &self.fingerprint, None);
        persist();
    }
}

impl<A> Drop for Ticket<A> {
    fn drop(&mut self) {
        if self.done.take().is_some() {
            let mut inner = lock(&self.ledger.inner);
            if let Some(ids) = inner.callers.get_mut(&self.caller) {
                ids.entries.remove(&self.id);
                if ids.entries.is_empty() {
                    inner.callers.remove(&self.caller);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh(claim: Claim<u32>) -> Ticket<u32> {
        match claim {
            Claim::Fresh(ticket) => ticket,
            _ => panic!("not fresh"),
        }
    }

    #[test]
    fn a_finished_id_replays_a_running_one_waits_and_another_request_is_reused() {
        let ledger = Ledger::new(10);
        let ticket = fresh(ledger.claim("c", "r1", "f"));
        let Claim::Running(mut first) = ledger.claim("c", "r1", "f") else {
            panic!("running")
        };
        assert!(matches!(ledger.claim("c", "r1", "g"), Claim::Reused));
        ticket.finish(7);
        assert_eq!(*first.borrow_and_update(), Some(7));
        assert!(matches!(ledger.claim("c", "r1", "f"), Claim::Replay(7)));
        assert!(matches!(ledger.claim("c", "r1", "g"), Claim::Reused));
        // Another caller's id of the same name is its own.
        assert!(matches!(ledger.claim("d", "r1", "g"), Claim::Fresh(_)));
    }

    #[test]
    fn the_last_finished_are_kept_per_caller_and_a_dropped_ticket_frees_its_id() {
        let ledger = Ledger::new(3);
        let running = fresh(ledger.claim("c", "long", "f"));
        for i in 0..5 {
            fresh(ledger.claim("c", &format!("r{i}"), "f")).finish(i);
        }
        assert!(matches!(ledger.claim("c", "r1", "f"), Claim::Fresh(_)));
        assert!(matches!(ledger.claim("c", "r4", "f"), Claim::Replay(4)));
        // A running id is never evicted.
        assert!(matches!(ledger.claim("c", "long", "f"), Claim::Running(_)));
        drop(running);
        assert!(matches!(ledger.claim("c", "long", "f"), Claim::Fresh(_)));
    }

    #[test]
    fn an_answer_not_kept_is_told_to_waiters_and_the_id_runs_again() {
        let ledger = Ledger::new(3);
        let ticket = fresh(ledger.claim("c", "r", "f"));
        let Claim::Running(mut first) = ledger.claim("c", "r", "f") else {
            panic!()
        };
        let persisted: Result<(), ()> = ticket.finish_with(None, 9, |kept| {
            assert!(kept.is_none());
            Ok(())
        });
        assert!(persisted.is_ok());
        assert_eq!(*first.borrow_and_update(), Some(9));
        assert!(matches!(ledger.claim("c", "r", "f"), Claim::Fresh(_)));
    }

    #[test]
    fn settled_and_forgotten_ids_and_answers_from_an_earlier_run() {
        let ledger = Ledger::with_answers(5, [("c".into(), "old".into(), "f".into(), 1)]);
        assert!(matches!(ledger.claim("c", "old", "f"), Claim::Replay(1)));
        let settled: Result<(), ()> = ledger.settle_with("c", "crash", "f", Some(2), |_| Ok(()));
        assert!(settled.is_ok());
        assert!(matches!(ledger.claim("c", "crash", "f"), Claim::Replay(2)));
        let refused = ledger.settle_with("c", "failed", "f", Some(3), |_| Err("disk"));
        assert_eq!(refused, Err("disk"));
        assert!(matches!(ledger.claim("c", "failed", "f"), Claim::Fresh(_)));
        let mut told = false;
        assert!(ledger.forget_caller("c", || told = true));
        assert!(told);
        assert!(matches!(ledger.claim("c", "old", "f"), Claim::Fresh(_)));
    }
}
