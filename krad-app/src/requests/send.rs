//! Send: types text and keys into a terminal, now or once the agent is idle
//! (see [`crate::sending`]), or — sent with `queue` when `[limits]` leave
//! no room — once its turn in the queue comes ([`crate::queue`]). Rights as
//! [`super::may_act_on`] says.

use krad_bus::protocol::{AgentState, ApiError, ErrorCode, SentInfo};
use krad_bus::request::RequestKind;
use krad_bus::request::send::Send;
use krad_bus::server::{CallContext, Handle};

use super::may_act_on;
use crate::app::EmbeddedApp;
use crate::records::no_terminal;
use crate::sending;

impl Handle<Send> for EmbeddedApp {
    async fn handle(&self, ctx: &CallContext, request: Send) -> Result<SentInfo, ApiError> {
        let core = self.core();
        let id = request.target;
        let Some(mut watch) = core.store().watch(id) else {
            return Err(no_terminal(id));
        };
        let record = watch.borrow_and_update().clone();
        may_act_on(&ctx.principal, RequestKind::Send, &record)?;
        // Sending to an agent its cost limit stopped is going on past it.
        core.budgets().answered(id);
        if record.state == AgentState::Queued {
            // Nothing runs there yet: the text waits for its Spawn, in line.
            if request.queue == Some(true) {
                return crate::queue::send_later(core.spawner(), request);
            }
            return Err(ApiError::new(
                ErrorCode::Busy,
                format!(
                    "terminal {id} waits in the queue (place {}): nothing runs there yet; \
                     send with queue (krad send --queue) to have it typed once it starts",
                    record.queue_place.unwrap_or_default()
                ),
            )
            .with_detail(serde_json::json!({
                "terminal": id,
                "queue_place": record.queue_place,
                "retry_after_secs": crate::limits::RETRY_AFTER_SECS,
            })));
        }
        match core.limits().may_send(record.state) {
            Ok(()) => {}
            Err(e) if request.queue == Some(true) && e.code == ErrorCode::Busy => {
                return crate::queue::send_later(core.spawner(), request);
            }
            Err(e) => return Err(e),
        }
        sending::send(core.store(), ctx, request, watch).await
    }
}
