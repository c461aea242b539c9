//! Changes: what an environment did since the commit it was created from.

use krad_bus::protocol::{ApiError, ChangesInfo, ErrorCode};
use krad_bus::request::changes::Changes;
use krad_bus::server::{CallContext, Handle};

use crate::app::EmbeddedApp;
use crate::environments::MAIN;
use crate::environments::{changes, env_git, not_found_environment};
use crate::git::Git;
use crate::records::Phase;

impl Handle<Changes> for EmbeddedApp {
    async fn handle(&self, _ctx: &CallContext, request: Changes) -> Result<ChangesInfo, ApiError> {
        let core = self.core();
        let answer = async {
            let name = request.environment.as_str();
            let (git, base) = if name == MAIN {
                // main was not created from anything: its changes are its uncommitted work.
                let git = Git::new(&core.settings().root);
                let head = git
                    .commit_of("HEAD")
                    .await?
                    .ok_or_else(|| ApiError::new(ErrorCode::Conflict, "main has no commit yet"))?;
                (git, head)
            } else {
                let record = core
                    .store()
                    .environment(name)
                    .ok_or_else(|| not_found_environment(name))?;
                if record.phase == Phase::Creating {
                    return Err(ApiError::new(
                        ErrorCode::Unavailable,
                        format!(
                            "environment {name:?} is being created (git worktree add runs): \
                             ask again in a moment"
                        ),
                    ));
                }
                (env_git(core.environments(), &record)?, record.base)
            };
            changes::changes(name, &git, &base, request.patch.unwrap_or(false)).await
        };
        match answer.await {
            Ok(info) => Ok(info),
            Err(e) => Err(e),
        }
    }
}
