//! Check: one agent's record now, or as soon as its rev passes `since_rev`.

use std::time::Duration;

use krad_bus::protocol::{AgentRecord, ApiError};
use krad_bus::request::check::Check;
use krad_bus::server::{CallContext, Handle};

use crate::{Core, EmbeddedApp};

impl Handle<Check> for EmbeddedApp {
    async fn handle(&self, _ctx: &CallContext, request: Check) -> Result<AgentRecord, ApiError> {
        let core = &self.core;
        let Some(mut watch) = core.store.watch(request.target) else {
            return Err(Core::no_terminal(request.target));
        };
        let record = watch.borrow_and_update().clone();
        let Some(wait_secs) = request.wait_secs else {
            return Ok(record);
        };
        let since = request.since_rev.unwrap_or(record.rev);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(wait_secs);
        loop {
            let record = watch.borrow_and_update().clone();
            if record.rev > since {
                return Ok(record);
            }
            tokio::select! {
                changed = watch.changed() => {
                    if changed.is_err() {
                        // Removed: its last record is the answer.
                        return Ok(watch.borrow().clone());
                    }
                }
                () = tokio::time::sleep_until(deadline) => return Ok(record),
            }
        }
    }
}
