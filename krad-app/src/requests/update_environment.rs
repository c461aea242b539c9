//! UpdateEnvironment: brings a worktree environment up to its base
//! environment's current tip. A plain terminal may update only its own
//! environment.

use krad_bus::protocol::{ApiError, ErrorCode, UpdatedInfo};
use krad_bus::request::RequestKind;
use krad_bus::request::update_environment::UpdateEnvironment;
use krad_bus::server::{CallContext, Handle};
use krad_bus::token::Principal;

use crate::app::EmbeddedApp;
use crate::environments::update;
use crate::intents::{Plan, Underway};

impl Handle<UpdateEnvironment> for EmbeddedApp {
    async fn handle(
        &self,
        ctx: &CallContext,
        request: UpdateEnvironment,
    ) -> Result<UpdatedInfo, ApiError> {
        if let Principal::Terminal(me) = &ctx.principal
            && me.environment != request.environment
        {
            return Err(RequestKind::UpdateEnvironment.error(
                ErrorCode::Forbidden,
                format!(
                    "terminal {} is not a lead terminal: it may update only its own environment ({:?})",
                    me.terminal, me.environment
                ),
            ));
        }
        let how = request.how.unwrap_or_default();
        let _underway = Underway::begin(
            self.core().store().db(),
            ctx,
            Plan::UpdateEnvironment {
                name: request.environment.clone(),
                how,
            },
        )?;
        update::update(self.core().environments(), &request.environment, how).await
    }
}
