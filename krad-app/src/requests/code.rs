//! Code: runs a program to completion in an environment, without a terminal
//! (see [`crate::program`] for how it runs). A plain terminal may run Code only in
//! its own environment.

use krad_bus::protocol::{ApiError, CodeResultInfo, ErrorCode};
use krad_bus::request::RequestKind;
use krad_bus::request::code::Code;
use krad_bus::server::{CallContext, Handle};
use krad_bus::token::Principal;
use serde_json::json;

use crate::app::EmbeddedApp;
use crate::program;

impl Handle<Code> for EmbeddedApp {
    async fn handle(&self, ctx: &CallContext, request: Code) -> Result<CodeResultInfo, ApiError> {
        let core = self.core();
        if let Principal::Terminal(me) = &ctx.principal
            && request.environment != me.environment
        {
            return Err(ApiError::new(
                ErrorCode::Forbidden,
                format!(
                    "terminal {} may run Code only in its own environment {:?}, not {:?}",
                    me.terminal, me.environment, request.environment
                ),
            )
            .with_detail(
                json!({ "request": RequestKind::Code.name(), "environment": request.environment }),
            ));
        }
        program::run_code(core.environments(), request).await
    }
}
