//! CreateWorktree: a new environment on its own branch.

use krad_bus::protocol::{ApiError, EnvironmentInfo};
use krad_bus::request::create_worktree::CreateWorktree;
use krad_bus::server::{CallContext, Handle};

use crate::app::EmbeddedApp;
use crate::environments::{self, NewWorktree};
use crate::intents::{Plan, Underway};

impl Handle<CreateWorktree> for EmbeddedApp {
    async fn handle(
        &self,
        ctx: &CallContext,
        request: CreateWorktree,
    ) -> Result<EnvironmentInfo, ApiError> {
        let core = self.core();
        let _underway = Underway::begin(
            core.store().db(),
            ctx,
            Plan::CreateWorktree {
                name: request.name.clone(),
            },
        )?;
        let created = async {
            let host = environments::host(core.environments(), request.host.as_deref())?;
            let (base_commit, base_environment) = environments::resolve_base(
                core.environments(),
                request.base.as_deref(),
                host.as_ref(),
            )
            .await?;
            environments::create(
                core.environments(),
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
        let record = created.await?;
        Ok(environments::info(core.environments(), &record))
    }
}
