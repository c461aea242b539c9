//! CreateWorktree: a new environment on its own branch.

use std::sync::Arc;

use krad_bus::protocol::Response;
use krad_bus::request::create_worktree::CreateWorktree;
use krad_bus::server::CallContext;

use super::not_for_plain_terminals;
use crate::Core;
use crate::environments::{self, NewWorktree};

pub(crate) async fn handle(
    core: &Arc<Core>,
    ctx: &CallContext,
    request: CreateWorktree,
) -> Response {
    if let Err(e) = not_for_plain_terminals(&ctx.principal, "CreateWorktree") {
        return e.into();
    }
    let created = async {
        let host = environments::host(core, request.host.as_deref())?;
        let (base_commit, base_environment) =
            environments::resolve_base(core, request.base.as_deref(), host.as_ref()).await?;
        environments::create(
            core,
            NewWorktree {
                name: &request.name,
                branch: request.branch.as_deref(),
                base_commit,
                base_environment,
                group: None,
                host,
            },
        )
        .await
    };
    match created.await {
        Ok(record) => Response::Environment(Box::new(environments::info(core, &record))),
        Err(e) => e.into(),
    }
}
