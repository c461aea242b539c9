//! Ask: a terminal asks the user a question and waits for the decision (see
//! [`crate::asking`]).

use krad_bus::protocol::{AnsweredInfo, ApiError, ErrorCode};
use krad_bus::request::ask::Ask;
use krad_bus::server::{CallContext, Handle};

use crate::app::EmbeddedApp;
use crate::asking;

impl Handle<Ask> for EmbeddedApp {
    async fn handle(&self, ctx: &CallContext, request: Ask) -> Result<AnsweredInfo, ApiError> {
        let Some(me) = ctx.principal.terminal() else {
            return Err(ApiError::new(
                ErrorCode::Forbidden,
                "only a terminal asks, about itself",
            ));
        };
        asking::ask(self.core().asks(), self.core().store(), me, request).await
    }
}
