//! Answer: a client (or a lead terminal) decides an open ask. The first decision
//! wins; a later one is `conflict` with the first outcome.

use krad_bus::protocol::{ApiError, DecidedBy};
use krad_bus::request::ask::Answer;
use krad_bus::server::{CallContext, Handle};

use crate::EmbeddedApp;

impl Handle<Answer> for EmbeddedApp {
    async fn handle(&self, ctx: &CallContext, request: Answer) -> Result<(), ApiError> {
        let core = &self.core;
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
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}
