//! Check: one agent's record now, or as soon as its rev passes `since_rev`,
//! answered from the record's kept JSON.

use std::time::Duration;

use krad_bus::protocol::{AgentRecord, ApiError, EncodedAnswer, RecordJson};
use krad_bus::request::check::Check;
use krad_bus::server::{CallContext, HandleEncoded};

use crate::app::Core;
use crate::app::EmbeddedApp;
use crate::records::no_terminal;

impl HandleEncoded<Check> for EmbeddedApp {
    async fn handle_encoded(
        &self,
        _ctx: &CallContext,
        request: Check,
    ) -> Result<EncodedAnswer, ApiError> {
        let core = self.core();
        let Some(wait_secs) = request.wait_secs else {
            return match core.store().json(request.target) {
                Some(json) => Ok(EncodedAnswer::agent(&json)),
                None => Err(no_terminal(request.target)),
            };
        };
        let Some(mut watch) = core.store().watch(request.target) else {
            return Err(no_terminal(request.target));
        };
        let since = request
            .since_rev
            .unwrap_or_else(|| watch.borrow_and_update().rev);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(wait_secs);
        loop {
            let record = watch.borrow_and_update().clone();
            if record.rev > since {
                return Ok(answer(core, &record));
            }
            tokio::select! {
                changed = watch.changed() => {
                    if changed.is_err() {
                        // Removed: its last record is the answer.
                        let last = watch.borrow().clone();
                        return Ok(answer(core, &last));
                    }
                }
                () = tokio::time::sleep_until(deadline) => return Ok(answer(core, &record)),
            }
        }
    }
}

/// The record's answer: its kept JSON while that is of the same rev (it is
/// unless the agent changed again, or was removed, meanwhile).
fn answer(core: &Core, record: &AgentRecord) -> EncodedAnswer {
    match core.store().json(record.terminal) {
        Some(json) if json.rev() == record.rev => EncodedAnswer::agent(&json),
        _ => EncodedAnswer::agent(&RecordJson::of(record)),
    }
}
