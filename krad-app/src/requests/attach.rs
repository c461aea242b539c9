//! Attach: a terminal's screen and output, live, and the client's keystrokes
//! back (see [`crate::attacher`]). Rights as Send's ([`super::may_act_on`]).

use krad_bus::protocol::ApiError;
use krad_bus::request::RequestKind;
use krad_bus::request::attach::Attach;
use krad_bus::server::{CallContext, Open};

use super::may_act_on;
use crate::app::EmbeddedApp;
use crate::attacher::{self, Attacher};
use crate::records::no_terminal;

impl Open<Attach> for EmbeddedApp {
    type Stream = Attacher;

    async fn open(&self, ctx: &CallContext, request: Attach) -> Result<Attacher, ApiError> {
        let id = request.target;
        let Some(record) = self.core().store().watch(id) else {
            return Err(no_terminal(id));
        };
        may_act_on(&ctx.principal, RequestKind::Attach, &record.borrow())?;
        let attacher = attacher::open(self.core().store(), id, record)?;
        tracing::debug!(terminal = id, caller = ?ctx.principal, "attached");
        Ok(attacher)
    }
}
