//! Changes: what an environment did since the commit it was created from.

use std::sync::Arc;

use krad_bus::protocol::{ApiError, ErrorCode, Response};
use krad_bus::request::changes::Changes;
use krad_bus::server::CallContext;

use crate::environments::{changes, env_git, not_found_environment};
use crate::git::Git;
use crate::{Core, MAIN};

pub(crate) async fn handle(core: &Arc<Core>, _ctx: &CallContext, request: Changes) -> Response {
    let answer = async {
        let name = request.environment.as_str();
        let (git, base) = if name == MAIN {
            // main was not created from anything: its changes are its uncommitted work.
            let git = Git::new(&core.settings.root);
            let head = git
                .commit_of("HEAD")
                .await?
                .ok_or_else(|| ApiError::new(ErrorCode::Conflict, "main has no commit yet"))?;
            (git, head)
        } else {
            let record = core
                .store
                .environment(name)
                .ok_or_else(|| not_found_environment(name))?;
            (env_git(core, &record)?, record.base)
        };
        changes::changes(name, &git, &base, request.patch.unwrap_or(false)).await
    };
    match answer.await {
        Ok(info) => Response::Changes(Box::new(info)),
        Err(e) => e.into(),
    }
}
