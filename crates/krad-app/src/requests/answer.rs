//! Answer: a client (or a lead terminal) decides an open ask. The first decision
//! wins; a later one is `conflict` with the first outcome.

use std::sync::Arc;

use krad_bus::protocol::{DecidedBy, Response};
use krad_bus::request::ask::Answer;
use krad_bus::server::CallContext;

use crate::Core;

pub(crate) async fn handle(core: &Arc<Core>, ctx: &CallContext, request: Answer) -> Response {
    let from = ctx.principal.terminal().map(|t| t.terminal);
    let asker = core.asks.terminal_of(&request.ask);
    match core
        .asks
        .decide(&request.ask, DecidedBy::Client, request.answer, from)
    {
        Ok(_) => {
            if let Some(terminal) = asker {
                super::ask::settle(core, terminal);
            }
            Response::Ok
        }
        Err(e) => e.into(),
    }
}
