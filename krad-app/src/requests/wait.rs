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
    async fn handle(&self, _ctx: &CallContext, request: Wait) -> Result<Waited, ApiError> {
        let core = &self.core;
        let targets = request.terminals();
        let mut watches: Vec<watch::Receiver<AgentRecord>> = Vec::with_capacity(targets.len());
        for &target in &targets {
            match core.store.watch(target) {
                Some(w) => watches.push(w),
                None => return Err(Core::no_terminal(target)),
            }
        }
        let until = request.until.unwrap_or_default();
        let for_ = request.for_.unwrap_or_default();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(request.timeout_secs());
        loop {
            let records: Vec<AgentRecord> = watches
                .iter_mut()
                .map(|w| w.borrow_and_update().clone())
                .collect();
            let met = |r: &AgentRecord| match for_ {
                WaitFor::Stop => r.state.is_stopped(),
                WaitFor::Exit => r.state == AgentState::Exited,
            };
            let done = match until {
                Until::All => records.iter().all(met),
                Until::Any => records.iter().any(met),
            };
            if done {
                return Ok(if request.target.is_some() {
                    records
                        .into_iter()
                        .next()
                        .map_or(Waited::TimedOut, |r| Waited::Agent(Box::new(r)))
                } else {
                    Waited::Agents(records)
                });
            }
            // Wait for any still-open watch to change. A watch whose agent was removed
            // keeps its final record (exited), which already meets the condition.
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
