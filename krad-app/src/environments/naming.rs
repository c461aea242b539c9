//! Naming: what a new worktree may be called — a free environment name, a
//! valid branch that does not exist yet, a directory that is not there — and the
//! commit (and environment) a base names.

use std::path::Path;
use std::sync::Arc;

use krad_bus::protocol::{ApiError, ErrorCode};
use serde_json::json;

use super::Environments;
use super::{conflict, present_git, root_git};
use crate::environments::MAIN;
use crate::git::Git;
use crate::hosts::Host;

/// The branch of a new worktree: the one asked for, or `krad/<name>`.
pub(super) fn branch_for(name: &str, branch: Option<&str>) -> String {
    branch.map_or_else(|| format!("krad/{name}"), str::to_owned)
}

/// Checks that a new worktree can take `name`, `branch` and `path`: `conflict`
/// when one is taken, `invalid` when the branch is not a valid name. Call it
/// under the environments lock.
pub(super) async fn check_available(
    envs: &Environments,
    root: &Git,
    host: Option<&Arc<Host>>,
    name: &str,
    branch: &str,
    path: &Path,
) -> Result<(), ApiError> {
    if name == MAIN {
        return Err(conflict(
            format!("environment {name:?} is the repository's own checkout; choose another name"),
            json!({ "environment": name }),
        ));
    }
    if envs.store.environment(name).is_some() {
        return Err(conflict(
            format!(
                "environment {name:?} exists; choose another name, or close it first \
                 (`krad close --env {name}`)"
            ),
            json!({ "environment": name }),
        ));
    }
    if !root
        .succeeds(&["check-ref-format", "--branch", branch])
        .await?
    {
        return Err(ApiError::new(
            ErrorCode::Invalid,
            format!("{branch:?} is not a valid branch name"),
        )
        .with_detail(json!({ "branch": branch })));
    }
    let reference = format!("refs/heads/{branch}");
    if root
        .succeeds(&["show-ref", "--verify", "--quiet", reference.as_str()])
        .await?
    {
        return Err(conflict(
            format!("branch {branch:?} exists; choose another name, or another branch"),
            json!({ "branch": branch }),
        ));
    }
    if Git::on(host, path).dir_exists().await {
        return Err(conflict(
            format!(
                "{} exists; remove it or choose another name",
                path.display()
            ),
            json!({ "path": path }),
        ));
    }
    Ok(())
}

/// The commit `base` names — an environment's HEAD, or a git ref — and the
/// environment it came from (main when it is a plain ref). On a host, refs are
/// the host repository's and environments must be on the same host.
pub(crate) async fn resolve_base(
    envs: &Environments,
    base: Option<&str>,
    host: Option<&Arc<Host>>,
) -> Result<(String, String), ApiError> {
    let root = root_git(envs, host);
    let base = base.unwrap_or(MAIN);
    if base == MAIN {
        let commit = root.commit_of("HEAD").await?.ok_or_else(|| {
            ApiError::new(
                ErrorCode::Conflict,
                "the repository has no commit yet: commit something first",
            )
        })?;
        return Ok((commit, MAIN.to_owned()));
    }
    if let Some(env) = envs.store.environment(base) {
        if env.host.as_deref() != host.map(|h| h.name.as_str()) {
            return Err(ApiError::new(
                ErrorCode::Invalid,
                format!("environment {base:?} is on another machine than the new worktree"),
            )
            .with_detail(json!({ "base": base })));
        }
        let commit = present_git(envs, &env)?
            .commit_of("HEAD")
            .await?
            .ok_or_else(|| {
                ApiError::new(
                    ErrorCode::Failed,
                    format!("environment {base:?} has no HEAD"),
                )
            })?;
        return Ok((commit, base.to_owned()));
    }
    match root.commit_of(base).await? {
        Some(commit) => Ok((commit, MAIN.to_owned())),
        None => Err(ApiError::new(
            ErrorCode::NotFound,
            format!("{base:?} is neither an environment nor a git ref of the repository"),
        )
        .with_detail(json!({ "base": base }))),
    }
}
