//! Wait: until one agent, or all or any of several, stops (or exits).
//! Answers at once when the condition already holds; each waiter wakes only when
//! one of its own agents changes.

use std::time::Duration;

use futures_util::future::select_all;
use krad_bus::protocol::{AgentRecord, AgentState, ApiError, Waited};
use krad_bus::request::wait::{Until, Wait, WaitFor};
use krad_bus::server::{CallContext, Handle};
use tokio::sync::watch;

use crate::{Core, EmbeddedApp};

impl Handle<Wait> for EmbeddedApp {
    // It answers `TimedOut` at its own timeout, before the bus's deadline.
    const ANSWERS_BEFORE_DEADLINE: bool = true;

    async fn handle(&self, _ctx: &CallContext, request: Wait) -> Result<Waited, ApiError> {
        let core = &self.core;
        let targets = request.terminals();
        // Exactly as many as the targets: a held Wait keeps this for its life.
        let mut watches: Vec<watch::Receiver<AgentRecord>> = Vec::with_capacity(targets.len());
        for target in targets {
            match core.store.watch(target) {
                Some(w) => watches.push(w),
                None => return Err(Core::no_terminal(target)),
            }
        }
        let until = request.until.unwrap_or_default();
        let for_ = request.for_.unwrap_or_default();
        let one = request.target.is_some();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(request.timeout_secs());
        drop(request);
        let met = |r: &AgentRecord| match for_ {
            WaitFor::Stop => r.state.is_stopped(),
            WaitFor::Exit => r.state == AgentState::Exited,
        };
        loop {
            // Only the states are looked at while waiting; the records are
            // copied out once the condition holds (a held Wait keeps none).
            let (mut all, mut any) = (true, false);
            for w in &mut watches {
                let m = met(&w.borrow_and_update());
                all &= m;
                any |= m;
            }
            let holds = |all: bool, any: bool| match until {
                Until::All => all,
                Until::Any => any,
            };
            if holds(all, any) {
                let records: Vec<AgentRecord> =
                    watches.iter().map(|w| w.borrow().clone()).collect();
                // A change between the two looks is taken on the next turn.
                if holds(records.iter().all(met), records.iter().any(met)) {
                    return Ok(if one {
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
            // Wait for any still-open watch to change. A watch whose agent was removed
            // keeps its final record (exited), which already meets the condition.
            if let [only] = watches.as_mut_slice() {
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
            let open: Vec<_> = watches
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
