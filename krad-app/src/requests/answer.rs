//! Answer: a client (or a lead terminal) decides an open ask. The first decision
//! wins; a later one is `conflict` with the first outcome.
//!
//! With a request id, the Answer records its intent first, and its step
//! "decided" in the transaction that keeps the decision: a retry after a crash
//! gets `"Ok"` when the decision was its own, and runs afresh when it was not
//! made (never `conflict` against itself).

use krad_bus::protocol::{ApiError, DecidedBy};
use krad_bus::request::answer::Answer;
use krad_bus::server::{CallContext, Handle};

use crate::app::EmbeddedApp;
use crate::asking;
use crate::intents::{Plan, Underway};

impl Handle<Answer> for EmbeddedApp {
    async fn handle(&self, ctx: &CallContext, request: Answer) -> Result<(), ApiError> {
        let core = self.core();
        let from = ctx.principal.terminal().map(|t| t.terminal);
        let asker = core.asks().terminal_of(&request.ask);
        let plan = |decided| Plan::Answer {
            ask: request.ask.clone(),
            decided,
        };
        let mut underway = match ctx.once {
            Some(_) => Some(Underway::begin(core.store().db(), ctx, plan(false))?),
            None => None,
        };
        if let Some(underway) = &mut underway {
            *underway.plan_mut() = plan(true);
        }
        let also = |tx: &krad_store::Tx<'_>| match &underway {
            Some(underway) => underway.write(tx),
            None => Ok(()),
        };
        let decided =
            (core.asks()).decide_with(&request.ask, DecidedBy::Client, request.answer, from, &also);
        match decided {
            Ok(_) => {
                if let Some(terminal) = asker {
                    asking::settle(core.asks(), core.store(), terminal);
                }
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}
