//! Code: runs a program to completion in an environment, without a terminal
//! (see [`crate::program`] for how it runs). A plain terminal may run Code only in
//! its own environment.

use std::sync::Arc;
use std::time::Duration;

use krad_bus::protocol::{ApiError, ErrorCode, Response};
use krad_bus::request::code::Code;
use krad_bus::server::CallContext;
use krad_bus::token::Principal;
use serde_json::json;

use crate::Core;
use crate::program::{self, Program};

pub(crate) async fn handle(core: &Arc<Core>, ctx: &CallContext, request: Code) -> Response {
    if let Principal::Terminal(me) = &ctx.principal
        && request.environment != me.environment
    {
        return ApiError::new(
            ErrorCode::Forbidden,
            format!(
                "terminal {} may run Code only in its own environment {:?}, not {:?}",
                me.terminal, me.environment, request.environment
            ),
        )
        .with_detail(json!({ "request": "Code", "environment": request.environment }))
        .into();
    }
    let cwd = match core.environment_path(&request.environment) {
        Ok(cwd) => cwd,
        Err(e) => return e.into(),
    };
    let job = Program {
        argv: request.command.clone(),
        cwd,
        stdin: request.stdin.clone(),
        timeout: Duration::from_secs(request.timeout_secs()),
    };
    match program::run(job).await {
        Ok(result) => Response::CodeResult(Box::new(result)),
        Err(e) => ApiError::new(
            ErrorCode::Failed,
            format!(
                "cannot start {:?} in environment {:?}: {e}",
                request
                    .command
                    .first()
                    .map(String::as_str)
                    .unwrap_or_default(),
                request.environment
            ),
        )
        .with_detail(json!({
            "environment": request.environment,
            "command": request.command.first(),
        }))
        .into(),
    }
}
