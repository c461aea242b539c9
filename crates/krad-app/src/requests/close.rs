//! Close: ends a terminal (SIGHUP, SIGKILL after 5 s), waits for its exit and
//! removes it; or closes a worktree environment (see [`crate::environments`]).

use std::time::Duration;

use krad_bus::protocol::{AgentState, ApiError, ErrorCode};
use krad_bus::request::close::Close;
use krad_bus::server::{CallContext, Handle};
use krad_bus::token::Principal;

use super::may_act_on;
use crate::EmbeddedApp;
use crate::{CLOSE_GRACE, Core, environments};

impl Handle<Close> for EmbeddedApp {
    async fn handle(&self, ctx: &CallContext, request: Close) -> Result<(), ApiError> {
        let core = &self.core;
        if let Some(environment) = request.environment {
            if let Principal::Terminal(me) = &ctx.principal {
                return Err(ApiError::new(
                    ErrorCode::Forbidden,
                    format!(
                        "terminal {} is not a lead terminal and cannot close environments",
                        me.terminal
                    ),
                ));
            }
            return match environments::close(core, &environment, request.force.unwrap_or(false))
                .await
            {
                Ok(_) => Ok(()),
                Err(e) => Err(e),
            };
        }
        let Some(id) = request.target else {
            return Err(ApiError::bad_request("Close: field \"target\" is missing"));
        };
        let Some(record) = core.store.record(id) else {
            return Err(Core::no_terminal(id));
        };
        may_act_on(&ctx.principal, "Close", &record)?;
        match close_terminal(core, id).await {
            Ok(()) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// Ends a terminal's program and removes the terminal from the records.
pub(crate) async fn close_terminal(core: &Core, id: u64) -> Result<(), ApiError> {
    let Some(mut watch) = core.store.watch(id) else {
        return Err(Core::no_terminal(id));
    };
    if watch.borrow_and_update().state != AgentState::Exited {
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
            return Err(ApiError::new(
                ErrorCode::Failed,
                format!("terminal {id} did not exit after SIGKILL; it is left in the records"),
            ));
        }
    }
    if let Some(entry) = core.store.remove(id)
        && let Some(path) = entry.token_file
    {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}
