//! Send: types text and keys into a terminal, now or once the agent is idle
//! (see [`crate::sending`]). Rights as [`super::may_act_on`] says.

use krad_bus::protocol::{ApiError, SentInfo};
use krad_bus::request::RequestKind;
use krad_bus::request::send::Send;
use krad_bus::server::{CallContext, Handle};

use super::may_act_on;
use crate::{Core, EmbeddedApp, sending};

impl Handle<Send> for EmbeddedApp {
    async fn handle(&self, ctx: &CallContext, request: Send) -> Result<SentInfo, ApiError> {
        let core = &self.core;
        let id = request.target;
        let Some(mut watch) = core.store.watch(id) else {
            return Err(Core::no_terminal(id));
        };
        let record = watch.borrow_and_update().clone();
        may_act_on(&ctx.principal, RequestKind::Send, &record)?;
        // Sending to an agent its cost limit stopped is going on past it.
        crate::budget::answered(core, id);
        crate::limits::may_send(core, record.state)?;
        sending::send(core, ctx, request, watch).await
    }
}
