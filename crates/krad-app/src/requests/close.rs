//! Close: ends a terminal (SIGHUP, SIGKILL after 5 s), waits for its exit, and
//! removes it from the records.

use std::time::Duration;

use krad_bus::protocol::{AgentState, ApiError, ErrorCode, Response};
use krad_bus::request::close::Close;
use krad_bus::server::CallContext;

use super::may_act_on;
use crate::{CLOSE_GRACE, Core, MAIN};

pub(crate) async fn handle(core: &Core, ctx: &CallContext, request: Close) -> Response {
    if let Some(environment) = request.environment {
        if environment == MAIN {
            return ApiError::new(ErrorCode::Invalid, "the main environment cannot be closed")
                .with_detail(serde_json::json!({ "environment": MAIN }))
                .into();
        }
        // Worktree environments (and closing them) come with CreateWorktree; until
        // then every other name is unknown.
        return Core::check_environment(&environment)
            .err()
            .unwrap_or_else(|| {
                ApiError::new(
                    ErrorCode::Invalid,
                    format!("environment {environment:?} cannot be closed"),
                )
            })
            .into();
    }
    let Some(id) = request.target else {
        return ApiError::bad_request("Close: field \"target\" is missing").into();
    };
    let Some(mut watch) = core.store.watch(id) else {
        return Core::no_terminal(id).into();
    };
    let record = watch.borrow_and_update().clone();
    if let Err(e) = may_act_on(&ctx.principal, "Close", &record) {
        return e.into();
    }
    if record.state != AgentState::Exited {
        if let Some(terminal) = core.store.with(id, |e| e.terminal.clone()) {
            terminal.close(CLOSE_GRACE);
        }
        let exited = async {
            while watch.borrow_and_update().state != AgentState::Exited {
                if watch.changed().await.is_err() {
                    return;
                }
            }
        };
        if tokio::time::timeout(CLOSE_GRACE + Duration::from_secs(5), exited)
            .await
            .is_err()
        {
            return ApiError::new(
                ErrorCode::Failed,
                format!("terminal {id} did not exit after SIGKILL; it is left in the records"),
            )
            .into();
        }
    }
    if let Some(entry) = core.store.remove(id)
        && let Some(path) = entry.token_file
    {
        let _ = std::fs::remove_file(path);
    }
    Response::Ok
}
