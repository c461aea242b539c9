//! Waiting (Wait) until one agent, or all or any of several, stops (or
//! exits): at once when the condition already holds; each waiter wakes only
//! when one of its own agents changes.
//!
//! A held Wait keeps only what its wait needs ([`HeldWait`]): the request is
//! read, and the watches taken, before the wait begins.

use std::time::Duration;

use crate::records::no_terminal;
use crate::store::Store;
use futures_util::future::select_all;
use krad_bus::protocol::{AgentRecord, AgentState, ApiError, Waited};
use krad_bus::request::wait::{Until, Wait, WaitFor};
use tokio::sync::watch;
use tokio::time::Instant;

/// A Wait, read: the watches of its agents, its condition and its deadline.
pub(crate) struct HeldWait {
    /// Exactly as many as the targets.
    watches: Vec<watch::Receiver<AgentRecord>>,
    until: Until,
    for_: WaitFor,
    /// Asked with `target` (answered with one record, not a list).
    one: bool,
    deadline: Instant,
}

impl HeldWait {
    /// Reads a Wait: `not_found` for a target the app does not know.
    pub(crate) fn new(store: &Store, request: Wait) -> Result<Self, ApiError> {
        let targets = request.terminals();
        let mut watches = Vec::with_capacity(targets.len());
        for target in targets {
            match store.watch(target) {
                Some(w) => watches.push(w),
                None => return Err(no_terminal(target)),
            }
        }
        Ok(Self {
            watches,
            until: request.until.unwrap_or_default(),
            for_: request.for_.unwrap_or_default(),
            one: request.target.is_some(),
            deadline: Instant::now() + Duration::from_secs(request.timeout_secs()),
        })
    }

    fn holds(&self, all: bool, any: bool) -> bool {
        match self.until {
            Until::All => all,
            Until::Any => any,
        }
    }

    /// Waits until the condition holds, or answers `TimedOut` at the Wait's
    /// own timeout.
    pub(crate) async fn until_met(mut self) -> Result<Waited, ApiError> {
        loop {
            // Only the states are looked at while waiting; the records are
            // copied out once the condition holds (a held Wait keeps none).
            let (mut all, mut any) = (true, false);
            for w in &mut self.watches {
                let m = meets(self.for_, &w.borrow_and_update());
                all &= m;
                any |= m;
            }
            if self.holds(all, any) {
                let records: Vec<AgentRecord> =
                    self.watches.iter().map(|w| w.borrow().clone()).collect();
                // A change between the two looks is taken on the next turn.
                let all = records.iter().all(|r| meets(self.for_, r));
                let any = records.iter().any(|r| meets(self.for_, r));
                if self.holds(all, any) {
                    return Ok(if self.one {
                        records
                            .into_iter()
                            .next()
                            .map_or(Waited::TimedOut, |r| Waited::Agent(Box::new(r)))
                    } else {
                        Waited::Agents(records)
                    });
                }
                continue;
            }
            let deadline = self.deadline;
            // Wait for any still-open watch to change. A watch whose agent was removed
            // keeps its final record (exited), which already meets the condition.
            if let [only] = self.watches.as_mut_slice() {
                // One target (the usual Wait): no futures to gather.
                if only.has_changed().is_err() {
                    tokio::time::sleep_until(deadline).await;
                    return Ok(Waited::TimedOut);
                }
                tokio::select! {
                    _ = only.changed() => {}
                    () = tokio::time::sleep_until(deadline) => return Ok(Waited::TimedOut),
                }
                continue;
            }
            let open: Vec<_> = self
                .watches
                .iter_mut()
                .filter(|w| w.has_changed().is_ok())
                .map(|w| Box::pin(w.changed()))
                .collect();
            if open.is_empty() {
                tokio::time::sleep_until(deadline).await;
                return Ok(Waited::TimedOut);
            }
            tokio::select! {
                _ = select_all(open) => {}
                () = tokio::time::sleep_until(deadline) => return Ok(Waited::TimedOut),
            }
        }
    }
}

fn meets(for_: WaitFor, record: &AgentRecord) -> bool {
    match for_ {
        WaitFor::Stop => record.state.is_stopped(),
        WaitFor::Exit => record.state == AgentState::Exited,
    }
}
