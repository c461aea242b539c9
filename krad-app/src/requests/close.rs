//! Close: ends a terminal (SIGHUP, SIGKILL after 5 s), waits for its exit and
//! removes it (see [`crate::closing`]); or closes a worktree environment (see
//! [`crate::environments`]).

use std::sync::Arc;

use krad_bus::protocol::{ApiError, ErrorCode};
use krad_bus::request::RequestKind;
use krad_bus::request::close::Close;
use krad_bus::server::{CallContext, Handle};
use krad_bus::token::Principal;

use super::may_act_on;
use crate::app::Core;
use crate::app::EmbeddedApp;
use crate::intents::{Plan, Underway};
use crate::records::no_terminal;
use crate::{closing, environments};

impl Handle<Close> for EmbeddedApp {
    async fn handle(&self, ctx: &CallContext, request: Close) -> Result<(), ApiError> {
        close(self.core(), ctx, request).await
    }
}

/// Close: an environment when the request names one, else a terminal.
async fn close(core: &Arc<Core>, ctx: &CallContext, request: Close) -> Result<(), ApiError> {
    if let Some(environment) = request.environment {
        return close_environment(core, ctx, &environment, request.force.unwrap_or(false)).await;
    }
    let Some(id) = request.target else {
        return Err(ApiError::bad_request(format!(
            "{}: field \"target\" is missing",
            RequestKind::Close.name()
        )));
    };
    let Some(record) = core.store().record(id) else {
        return Err(no_terminal(id));
    };
    may_act_on(&ctx.principal, RequestKind::Close, &record)?;
    let plan = Plan::CloseTerminal { terminal: id };
    let _underway = (ctx.once.is_some())
        .then(|| Underway::begin(core.store().db(), ctx, plan))
        .transpose()?;
    closing::close_terminal(&core.closer(), id).await
}

/// Closes a worktree environment; plain terminals may not.
async fn close_environment(
    core: &Arc<Core>,
    ctx: &CallContext,
    environment: &str,
    force: bool,
) -> Result<(), ApiError> {
    if let Principal::Terminal(me) = &ctx.principal {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            format!(
                "terminal {} is not a lead terminal and cannot close environments",
                me.terminal
            ),
        ));
    }
    core.environments().check(environment)?;
    let _underway = Underway::begin(
        core.store().db(),
        ctx,
        Plan::CloseEnvironment {
            name: environment.to_owned(),
            force,
        },
    )?;
    environments::close(core.environments(), &core.closer(), environment, force).await?;
    Ok(())
}
