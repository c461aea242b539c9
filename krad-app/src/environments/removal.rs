//! Removal: Close of a worktree environment (and CollectEnvironments' removals).
//! Work that exists nowhere else (uncommitted files, commits no other branch
//! has) is refused unless forced;
//! the environment's terminals are closed (see [`crate::closing`]), its tip is
//! always recorded under `refs/krad/archive/<name>` first, then its worktree and
//! branch are removed.

use krad_bus::protocol::{AgentState, ApiError, ErrorCode, counted};
use serde_json::json;

use super::Environments;
use super::archives::UNCOMMITTED_SUBJECT;
use super::merged::merged_by_content;
use super::{CloseTerminals, conflict, env_git, host, not_found_environment, root_git};
use crate::environments::MAIN;
use crate::git::Git;
use crate::records::EnvironmentRecord;

/// Closes a worktree environment: its terminals, then — after recording its tip
/// under `refs/krad/archive/` — its worktree and branch. Work that exists
/// nowhere else is refused with `conflict` unless `force`. Returns the archive
/// ref (empty when there was no tip to keep).
pub(crate) async fn close(
    envs: &Environments,
    terminals: &impl CloseTerminals,
    name: &str,
    force: bool,
) -> Result<String, ApiError> {
    let how = if force {
        Removal {
            refuse_unique_work: false,
            despite_teardown: true,
            refuse_live_terminals: false,
        }
    } else {
        Removal {
            refuse_unique_work: true,
            despite_teardown: false,
            refuse_live_terminals: false,
        }
    };
    remove(envs, terminals, name, how).await
}

/// What a removal refuses.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Removal {
    /// Refuse (`conflict`) work that exists nowhere else (Close without force);
    /// otherwise it is archived and removed all the same.
    pub refuse_unique_work: bool,
    /// Remove even when the teardown command failed (Close with force).
    pub despite_teardown: bool,
    /// Refuse (`conflict`, detail `live_terminals`) while a terminal of the
    /// environment has not exited, instead of closing it (CollectEnvironments:
    /// what is in use is never collected).
    pub refuse_live_terminals: bool,
}

/// Whether an error of [`remove`] is its refusal of live terminals.
pub(crate) fn is_live_terminals(error: &ApiError) -> bool {
    error
        .detail
        .as_ref()
        .is_some_and(|d| d.get("live_terminals").is_some())
}

/// Whether an error of [`remove`] is its teardown command failing (the
/// terminals closed, nothing else changed).
pub(crate) fn is_teardown_failure(error: &ApiError) -> bool {
    error
        .detail
        .as_ref()
        .is_some_and(|d| d.get("teardown").and_then(|t| t.as_bool()) == Some(true))
}

/// Removes a worktree environment as `how` says: see [`close`].
pub(crate) async fn remove(
    envs: &Environments,
    terminals: &impl CloseTerminals,
    name: &str,
    how: Removal,
) -> Result<String, ApiError> {
    let force = !how.refuse_unique_work;
    if name == MAIN {
        return Err(
            ApiError::new(ErrorCode::Invalid, "the main environment cannot be closed")
                .with_detail(json!({ "environment": MAIN })),
        );
    }
    let record = envs
        .store
        .environment(name)
        .ok_or_else(|| not_found_environment(name))?;
    let host = host(envs, record.host.as_deref())?;
    let root = root_git(envs, host.as_ref());
    let worktree = env_git(envs, &record)?;
    let present = worktree.dir_exists().await;
    let merged = if present && !force {
        refuse_unique_work(envs, &root, &worktree, &record).await?
    } else {
        None
    };
    if how.refuse_live_terminals {
        let live: Vec<u64> = envs
            .store
            .terminals_of(name)
            .into_iter()
            .filter(|&id| {
                envs.store
                    .record(id)
                    .is_some_and(|r| r.state != AgentState::Exited)
            })
            .collect();
        if !live.is_empty() {
            return Err(conflict(
                format!(
                    "environment {name:?} has live terminals ({}); close them first",
                    live.iter()
                        .map(u64::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                json!({ "environment": name, "live_terminals": live }),
            ));
        }
    }
    terminals.close_terminals_of(name).await?;
    if let Some((exit_code, output)) = super::run_teardown(envs, &record).await? {
        if exit_code != Some(0) && !how.despite_teardown {
            return Err(conflict(
                format!(
                    "the teardown command failed in environment {name:?} (its terminals are \
                     closed; nothing else changed); fix it, or close with force: {}",
                    output.trim()
                ),
                json!({ "environment": name, "exit_code": exit_code, "output": output, "teardown": true }),
            ));
        }
        tracing::info!(environment = name, ?exit_code, "teardown ran");
    }
    let archive = archive(&root, &worktree, &record, present).await?;
    {
        // git's worktree commands read every worktree's metadata: a removal
        // beside an add in progress fails on its half-written files.
        let _serial = envs.lock.lock().await;
        remove_worktree(&root, &record, present).await?;
    }
    envs.store
        .remove_environment(name)
        .map_err(|e| ApiError::new(ErrorCode::Failed, format!("cannot record the closing: {e}")))?;
    envs.changed.send_modify(|n| *n += 1);
    // However it was closed (Close, a pick closing the others, recovery).
    super::ports::release(envs, name).await;
    match &merged {
        Some(why) => tracing::info!(
            environment = name,
            archive = %archive,
            merged = %why,
            "environment closed: its commits no other branch has are merged by content"
        ),
        None => tracing::info!(environment = name, archive = %archive, "environment closed"),
    }
    Ok(archive)
}

/// `conflict` when an environment has uncommitted files or unmerged commits —
/// commits no other branch has whose changes are not in its target (its base
/// environment's branch) by content either. `Some(why)` when it has such
/// commits but they are merged by content (squash-merged, cherry-picked).
async fn refuse_unique_work(
    envs: &Environments,
    root: &Git,
    worktree: &Git,
    record: &EnvironmentRecord,
) -> Result<Option<String>, ApiError> {
    let name = &record.name;
    let UniqueWork {
        dirty,
        unmerged,
        merged,
    } = unique_work(envs, root, worktree, record, true).await?;
    if !dirty.is_empty() || unmerged > 0 {
        return Err(conflict(
            format!(
                "environment {name:?} has work that exists nowhere else ({}, {}); \
                 merge it, or close with force (it is archived under refs/krad/archive/ first)",
                counted(dirty.len(), "uncommitted file"),
                counted(unmerged as usize, "unmerged commit"),
            ),
            json!({ "environment": name, "files": dirty, "commits": unmerged }),
        ));
    }
    Ok(merged)
}

/// The work of an environment that exists nowhere else.
pub(crate) struct UniqueWork {
    /// Its uncommitted files (untracked included).
    pub dirty: Vec<String>,
    /// Its commits no other branch has whose changes are not in its target by
    /// content either.
    pub unmerged: u64,
    /// Why its commits no other branch has count as merged, when they do.
    pub merged: Option<String>,
}

/// What of an environment's work exists nowhere else — the notion Close
/// refuses by. `present`: whether its directory exists (a gone one has no
/// uncommitted files).
pub(crate) async fn unique_work(
    envs: &Environments,
    root: &Git,
    worktree: &Git,
    record: &EnvironmentRecord,
    present: bool,
) -> Result<UniqueWork, ApiError> {
    let dirty = if present {
        worktree.dirty_files(true).await?
    } else {
        Vec::new()
    };
    let mut unmerged = unmerged_commits(root, &record.branch).await?;
    let mut merged = None;
    if dirty.is_empty() && unmerged > 0 {
        let tip = format!("refs/heads/{}", record.branch);
        for target in targets(envs, record) {
            if let Some(why) = merged_by_content(root, &tip, &target).await {
                merged = Some(why);
                unmerged = 0;
                break;
            }
        }
    }
    Ok(UniqueWork {
        dirty,
        unmerged,
        merged,
    })
}

/// Where an environment's work lands: its base environment's branch (main's
/// HEAD for main, or when the base environment is gone), then main's HEAD.
fn targets(envs: &Environments, record: &EnvironmentRecord) -> Vec<String> {
    let mut targets = Vec::new();
    if record.base_environment != MAIN
        && let Some(base) = envs.store.environment(&record.base_environment)
        && base.host == record.host
    {
        targets.push(format!("refs/heads/{}", base.branch));
    }
    targets.push("HEAD".to_owned());
    targets
}

/// Removes an environment's worktree (or prunes it when its directory is gone)
/// and its branch.
async fn remove_worktree(
    root: &Git,
    record: &EnvironmentRecord,
    present: bool,
) -> Result<(), ApiError> {
    if present {
        let path = record.path.display().to_string();
        root.bytes(&["worktree", "remove", "--force", path.as_str()])
            .await?;
    } else {
        let _ = root.bytes(&["worktree", "prune"]).await;
    }
    let reference = format!("refs/heads/{}", record.branch);
    if root
        .succeeds(&["show-ref", "--verify", "--quiet", reference.as_str()])
        .await?
    {
        root.bytes(&["branch", "-D", record.branch.as_str()])
            .await?;
    }
    Ok(())
}

/// Commits on `branch` that no other branch has.
async fn unmerged_commits(root: &Git, branch: &str) -> Result<u64, ApiError> {
    let exclude = format!("--exclude={branch}");
    let tip = format!("refs/heads/{branch}");
    if !root
        .succeeds(&["show-ref", "--verify", "--quiet", tip.as_str()])
        .await?
    {
        return Ok(0);
    }
    let count = root
        .text(&[
            "rev-list",
            "--count",
            tip.as_str(),
            "--not",
            exclude.as_str(),
            "--branches",
        ])
        .await?;
    Ok(count.trim().parse().unwrap_or(0))
}

/// Commits whatever is uncommitted in an environment (so nothing is lost), and
/// returns its tip.
pub(crate) async fn commit_all(git: &Git, message: &str) -> Result<String, ApiError> {
    if !git.dirty_files(true).await?.is_empty() {
        git.bytes(&["add", "-A"]).await?;
        let mut args = git.identity_args().await;
        args.extend([
            "commit".into(),
            "--quiet".into(),
            "--no-verify".into(),
            "-m".into(),
            message.to_owned(),
        ]);
        git.bytes(&args).await?;
    }
    Ok(git.text(&["rev-parse", "HEAD"]).await?)
}

/// Records an environment's tip (uncommitted work committed first) under
/// `refs/krad/archive/<name>` (or `<name>-2`, … when taken). Returns the ref.
async fn archive(
    root: &Git,
    worktree: &Git,
    record: &EnvironmentRecord,
    present: bool,
) -> Result<String, ApiError> {
    let tip = if present {
        commit_all(worktree, &format!("{UNCOMMITTED_SUBJECT}{}", record.name)).await?
    } else {
        match root
            .commit_of(&format!("refs/heads/{}", record.branch))
            .await?
        {
            Some(tip) => tip,
            None => return Ok(String::new()),
        }
    };
    let mut reference = format!("refs/krad/archive/{}", record.name);
    let mut n = 2;
    while root
        .succeeds(&["show-ref", "--verify", "--quiet", reference.as_str()])
        .await?
    {
        reference = format!("refs/krad/archive/{}-{n}", record.name);
        n += 1;
    }
    root.bytes(&["update-ref", reference.as_str(), tip.as_str()])
        .await?;
    Ok(reference)
}
