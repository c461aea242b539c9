//! Variant groups: the same task in N fresh worktrees from one base commit, and
//! picking the one to keep — merged, squashed, or kept as a branch — with the
//! others archived and closed.
//!
//! Picking never leaves a half merge behind: a dirty target is refused before
//! anything runs, conflicts are found with `git merge-tree` before the target is
//! touched, and a merge that fails anyway is aborted.

use std::sync::Arc;

use krad_bus::protocol::{ApiError, ErrorCode, PickedInfo};
use krad_bus::request::pick_variant::{How, PickVariant};
use serde_json::json;

use super::{close, commit_all, conflict, env_git, not_found_environment};
use crate::git::Git;
use crate::state_file::{EnvironmentRecord, GroupRecord};
use crate::{Core, MAIN};

/// git in a target environment, and its checked-out branch. `main` of a group on
/// a host is the host's repository.
async fn target(core: &Core, name: &str, host: Option<&str>) -> Result<(Git, String), ApiError> {
    if name == MAIN {
        let host = super::host(core, host)?;
        let git = super::root_git(core, host.as_ref());
        let branch = git
            .text(&["symbolic-ref", "--short", "-q", "HEAD"])
            .await
            .ok()
            .filter(|b| !b.is_empty())
            .ok_or_else(|| {
                conflict(
                    "the target is not on a branch (detached HEAD); check a branch out first"
                        .into(),
                    json!({ "environment": MAIN }),
                )
            })?;
        return Ok((git, branch));
    }
    let record = core
        .store
        .environment(name)
        .ok_or_else(|| not_found_environment(name))?;
    if record.host.as_deref() != host {
        return Err(ApiError::new(
            ErrorCode::Invalid,
            format!("environment {name:?} is on another machine than the variant"),
        ));
    }
    Ok((env_git(core, &record)?, record.branch))
}

/// PickVariant.
pub(crate) async fn pick(core: &Arc<Core>, request: PickVariant) -> Result<PickedInfo, ApiError> {
    let (group, record) = find_variant(core, &request)?;
    let how = request.how.unwrap_or_default();
    let into = request
        .into
        .clone()
        .unwrap_or_else(|| group.base_environment.clone());
    if into == record.name {
        return Err(ApiError::new(
            ErrorCode::Invalid,
            "a variant cannot be merged into itself",
        ));
    }
    let label = format!("variant {} of {}", request.variant, group.name);
    let variant_git = env_git(core, &record)?;
    let (into_name, commit) = if how == How::Branch {
        let tip = commit_all(&variant_git, &format!("krad: the work of {label}")).await?;
        (None, tip)
    } else {
        let target = Target {
            name: &into,
            host: group.host.as_deref(),
        };
        let commit = merge_into(core, target, &variant_git, &record.branch, how, &label).await?;
        (Some(into.clone()), commit)
    };
    core.store
        .update_group(&group.name, |g| {
            if let Some(g) = g {
                g.picked = Some(request.variant);
            }
        })
        .map_err(|e| ApiError::new(ErrorCode::Failed, format!("cannot record the pick: {e}")))?;
    if request.close_others.unwrap_or(true) {
        close_others(core, &group, request.variant).await;
    }
    Ok(PickedInfo {
        group: group.name,
        variant: request.variant,
        branch: record.branch,
        into: into_name,
        commit,
    })
}

/// The group and the environment of the variant a PickVariant names.
fn find_variant(
    core: &Core,
    request: &PickVariant,
) -> Result<(GroupRecord, EnvironmentRecord), ApiError> {
    let group = core.store.group(&request.group).ok_or_else(|| {
        ApiError::new(
            ErrorCode::NotFound,
            format!("no variant group {:?}", request.group),
        )
        .with_detail(json!({ "group": request.group }))
    })?;
    let variant = group.variants.get(&request.variant).ok_or_else(|| {
        ApiError::new(
            ErrorCode::NotFound,
            format!(
                "group {:?} has no variant {} (it has 1 to {})",
                group.name, request.variant, group.count
            ),
        )
        .with_detail(json!({ "group": group.name, "variant": request.variant }))
    })?;
    let record = core
        .store
        .environment(&variant.environment)
        .ok_or_else(|| not_found_environment(&variant.environment))?;
    Ok((group, record))
}

/// The environment a variant is merged into, and the host of its group.
struct Target<'a> {
    name: &'a str,
    host: Option<&'a str>,
}

/// Merges or squashes a variant's work (committed first) into the target;
/// refuses a dirty target, and a conflict before anything is touched. Returns
/// the target's new tip.
async fn merge_into(
    core: &Core,
    into: Target<'_>,
    variant_git: &Git,
    variant_branch: &str,
    how: How,
    label: &str,
) -> Result<String, ApiError> {
    let (target_git, target_branch) = target(core, into.name, into.host).await?;
    let into = into.name;
    let dirty = target_git.dirty_files(false).await?;
    if !dirty.is_empty() {
        return Err(conflict(
            format!(
                "environment {into:?} has uncommitted changes; commit or stash them, then pick again"
            ),
            json!({ "environment": into, "files": dirty }),
        ));
    }
    let tip = commit_all(variant_git, &format!("krad: the work of {label}")).await?;
    let conflicted = merge_conflicts(&target_git, &target_branch, &tip).await?;
    if !conflicted.is_empty() {
        return Err(conflict(
            format!("{label} conflicts with {into:?}; nothing was changed"),
            json!({ "environment": into, "files": conflicted }),
        ));
    }
    merge(&target_git, variant_branch, how, label)
        .await
        .map_err(|files| {
            conflict(
                format!(
                    "merging {label} into {into:?} failed and was aborted; nothing was changed"
                ),
                json!({ "environment": into, "files": files }),
            )
        })
}

/// Closes (forced, archived first) the variants of a group other than the
/// picked one; a failure is logged, not returned.
async fn close_others(core: &Arc<Core>, group: &GroupRecord, picked: u32) {
    for (number, other) in &group.variants {
        if *number == picked || core.store.environment(&other.environment).is_none() {
            continue;
        }
        if let Err(e) = close(core, &other.environment, true).await {
            tracing::warn!(environment = %other.environment, "could not close a losing variant: {e}");
        }
    }
}

/// The files a merge of `tip` into `branch` would conflict on, found without
/// touching any worktree.
async fn merge_conflicts(git: &Git, branch: &str, tip: &str) -> Result<Vec<String>, ApiError> {
    let (code, out, err) = git
        .output(
            &[
                "merge-tree",
                "--write-tree",
                "--name-only",
                "--no-messages",
                branch,
                tip,
            ],
            None,
        )
        .await?;
    match code {
        Some(0) => Ok(Vec::new()),
        Some(1) => Ok(String::from_utf8_lossy(&out)
            .lines()
            .skip(1)
            .take_while(|l| !l.is_empty())
            .map(str::to_owned)
            .collect()),
        _ => Err(ApiError::new(
            ErrorCode::Failed,
            format!(
                "git merge-tree failed: {}",
                String::from_utf8_lossy(&err).trim()
            ),
        )),
    }
}

/// Merges or squashes `branch` into the target's checked-out branch. On failure
/// the target is put back exactly as it was and the conflicting files returned.
async fn merge(git: &Git, branch: &str, how: How, label: &str) -> Result<String, Vec<String>> {
    let identity = git.identity_args().await;
    let message = match how {
        How::Squash => format!("krad: {label} (squashed from {branch})"),
        How::Merge | How::Branch => format!("krad: merge {label} ({branch})"),
    };
    let mut args = identity.clone();
    match how {
        How::Squash => args.extend(["merge".into(), "--squash".into(), branch.to_owned()]),
        How::Merge | How::Branch => args.extend([
            "merge".into(),
            "--no-edit".into(),
            "-m".into(),
            message.clone(),
            branch.to_owned(),
        ]),
    }
    let (code, _, _) = git.output(&args, None).await.map_err(|_| Vec::new())?;
    if code != Some(0) {
        let files = git
            .text(&["diff", "--name-only", "--diff-filter=U"])
            .await
            .map(|t| t.lines().map(str::to_owned).collect())
            .unwrap_or_default();
        let _ = git.output(&["merge", "--abort"], None).await;
        let _ = git.output(&["reset", "--merge"], None).await;
        return Err(files);
    }
    if how == How::Squash {
        let staged = git
            .succeeds(&["diff", "--cached", "--quiet"])
            .await
            .unwrap_or(true);
        if !staged {
            let mut commit = identity;
            commit.extend([
                "commit".into(),
                "--quiet".into(),
                "--no-verify".into(),
                "-m".into(),
                message,
            ]);
            if git.bytes(&commit).await.is_err() {
                let _ = git.output(&["reset", "--merge"], None).await;
                return Err(Vec::new());
            }
        }
    }
    git.text(&["rev-parse", "HEAD"])
        .await
        .map_err(|_| Vec::new())
}
