//! Variant groups: the same task in N fresh worktrees from one base commit, and
//! picking the one to keep — merged, squashed, or kept as a branch — with the
//! others archived and closed.
//!
//! Picking never leaves a half merge behind: a dirty target is refused before
//! anything runs, conflicts are found with `git merge-tree` before the target is
//! touched, and a merge that fails anyway is aborted. The pick is an intent
//! ([`crate::intents`]): the target's tip is recorded before git touches it, so
//! that after a crash [`recover_pick`] finds whether it landed and finishes it,
//! or puts the target back as it was.

use std::path::{Path, PathBuf};
use std::time::Duration;

use krad_bus::protocol::{ApiError, DryRunInfo, ErrorCode, PickedInfo};
use krad_bus::request::pick_variant::{How, PickVariant};
use krad_bus::server::CallContext;
use serde_json::json;

use super::tree_state::{MergeOf, merge, snapshot};
use super::{CloseTerminals, Environments};
use super::{close, commit_all, conflict, not_found_environment, present_git};
use crate::environments::MAIN;
use crate::git::Git;
use crate::intents::{Merging, PickPlan, Plan, Underway};
use crate::records::{EnvironmentRecord, GroupRecord};

/// git in a target environment, and its checked-out branch. `main` of a group on
/// a host is the host's repository.
async fn target(
    envs: &Environments,
    name: &str,
    host: Option<&str>,
) -> Result<(Git, String), ApiError> {
    if name == MAIN {
        let host = super::host(envs, host)?;
        let git = super::root_git(envs, host.as_ref());
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
    let record = envs
        .store
        .environment(name)
        .ok_or_else(|| not_found_environment(name))?;
    if record.host.as_deref() != host {
        return Err(ApiError::new(
            ErrorCode::Invalid,
            format!("environment {name:?} is on another machine than the variant"),
        ));
    }
    Ok((present_git(envs, &record)?, record.branch))
}

/// PickVariant.
pub(crate) async fn pick(
    envs: &Environments,
    terminals: &impl CloseTerminals,
    ctx: &CallContext,
    request: PickVariant,
) -> Result<PickedInfo, ApiError> {
    let (group, record) = find_variant(envs, &request)?;
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
    // Its directory is there, before anything is recorded or run.
    let variant_git = present_git(envs, &record)?;
    if request.dry_run {
        return dry_run(envs, &group, record, how, &into, request.variant).await;
    }
    let mut underway = Underway::begin(
        envs.store.db(),
        ctx,
        Plan::PickVariant(PickPlan {
            group: group.name.clone(),
            variant: request.variant,
            how,
            into: (how != How::Branch).then(|| into.clone()),
            close_others: request.close_others.unwrap_or(true),
            merging: None,
            landed: None,
        }),
    )?;
    let label = format!("variant {} of {}", request.variant, group.name);
    let commit = if how == How::Branch {
        commit_all(&variant_git, &format!("krad: the work of {label}")).await?
    } else {
        let target = Target {
            name: &into,
            host: group.host.as_deref(),
        };
        let merge = Merge {
            variant_git: &variant_git,
            variant_branch: &record.branch,
            how,
            label: &label,
        };
        merge_into(envs, target, merge, &mut underway).await?
    };
    let picked = PickedInfo {
        group: group.name.clone(),
        variant: request.variant,
        branch: record.branch,
        into: (how != How::Branch).then_some(into),
        commit,
        dry_run: None,
        scores: None,
    };
    landed(envs, &group.name, &picked, &mut underway)?;
    if request.close_others.unwrap_or(true) {
        close_others(envs, terminals, &group, request.variant).await;
    }
    Ok(picked)
}

/// Records the pick: the group's `picked` and the intent's `landed`, together.
fn landed(
    envs: &Environments,
    group: &str,
    picked: &PickedInfo,
    underway: &mut Underway,
) -> Result<(), ApiError> {
    if let Plan::PickVariant(plan) = underway.plan_mut() {
        plan.landed = Some(picked.commit.clone());
    }
    envs.store
        .update_group_with(
            group,
            |g| {
                if let Some(g) = g {
                    g.picked = Some(picked.variant);
                }
            },
            |tx| underway.write(tx),
        )
        .map_err(|e| ApiError::new(ErrorCode::Failed, format!("cannot record the pick: {e}")))
}

/// After a crash: whether an interrupted pick landed. `Some` when it did (and
/// is now finished: recorded, the others closed); `None` when it did not (the
/// target is put back to its tip before the pick); an error when the target
/// cannot be checked now or moved some other way (left as it is).
pub(crate) async fn recover_pick(
    envs: &Environments,
    terminals: &impl CloseTerminals,
    plan: &PickPlan,
) -> Result<Option<PickedInfo>, String> {
    let Some(group) = envs.store.group(&plan.group) else {
        return Ok(None);
    };
    let branch = group
        .variants
        .get(&plan.variant)
        .and_then(|v| envs.store.environment(&v.environment))
        .map(|e| e.branch)
        .unwrap_or_default();
    let commit = match (&plan.landed, &plan.merging, &plan.into) {
        (Some(commit), _, _) => commit.clone(),
        (None, None, _) | (None, _, None) => return Ok(None),
        (None, Some(merging), Some(into)) => {
            let (git, _) = target(envs, into, group.host.as_deref())
                .await
                .map_err(|e| e.message)?;
            match merge_outcome(&git, plan.how, merging).await? {
                Some(commit) => commit,
                None => return Ok(None),
            }
        }
    };
    let picked = PickedInfo {
        group: group.name.clone(),
        variant: plan.variant,
        branch,
        into: plan.into.clone(),
        commit,
        dry_run: None,
        scores: None,
    };
    envs.store
        .update_group(&group.name, |g| {
            if let Some(g) = g {
                g.picked = Some(plan.variant);
            }
        })
        .map_err(|e| format!("cannot record the pick: {e}"))?;
    if plan.close_others {
        close_others(envs, terminals, &group, plan.variant).await;
    }
    Ok(Some(picked))
}

/// Whether an interrupted merge into the target landed: its commit if so (the
/// merge state git may have left is cleared); `None` after putting the target
/// back to its tip before the merge.
async fn merge_outcome(git: &Git, how: How, merging: &Merging) -> Result<Option<String>, String> {
    wait_for_index_lock(git).await;
    let rev = |spec: &'static str| async move {
        git.text(&["rev-parse", "--verify", "-q", spec]).await.ok()
    };
    let head = rev("HEAD").await.ok_or("the target has no HEAD")?;
    if head == merging.before {
        let _ = git.output(&["reset", "--quiet", "--merge"], None).await;
        clear_merge_state(git).await;
        return Ok(None);
    }
    let parent_is_before = rev("HEAD^1").await.as_deref() == Some(merging.before.as_str());
    let landed = match how {
        // A fast-forward, or a merge commit of the two.
        How::Merge | How::Branch => {
            head == merging.tip
                || (parent_is_before
                    && rev("HEAD^2").await.as_deref() == Some(merging.tip.as_str()))
        }
        How::Squash => {
            parent_is_before
                && git
                    .text(&["log", "-1", "--format=%B"])
                    .await
                    .is_ok_and(|m| m.trim() == merging.message.trim())
        }
    };
    if !landed {
        return Err(format!(
            "the target moved since the pick began (now at {head}); it is left as it is"
        ));
    }
    clear_merge_state(git).await;
    Ok(Some(head))
}

/// Waits (up to 10 s) for a git still running in the target — a child of the
/// app that died, finishing its work (it outlives the app: see
/// [`crate::git`]) — to end, and for the index to be free. Between its steps
/// (while a hook runs, say) a git holds no lock: the process is what tells.
pub(super) async fn wait_for_index_lock(git: &Git) {
    if git.host().is_some() {
        return;
    }
    let Ok(lock) = git.text(&["rev-parse", "--git-path", "index.lock"]).await else {
        return;
    };
    let lock = git.dir().join(PathBuf::from(lock));
    let dir = git
        .dir()
        .canonicalize()
        .unwrap_or_else(|_| git.dir().to_path_buf());
    for _ in 0..200 {
        if !lock.exists() && !git_running_in(&dir) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tracing::warn!(dir = %dir.display(), "a git still runs in the target, or its index is locked");
}

/// Whether a `git` process (not ours: we run none now) works in `dir`.
fn git_running_in(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        let proc_dir = entry.path();
        let is_git = std::fs::read_to_string(proc_dir.join("comm"))
            .is_ok_and(|comm| comm.trim_end() == "git");
        is_git && std::fs::read_link(proc_dir.join("cwd")).is_ok_and(|cwd| cwd == dir)
    })
}

/// Removes the files of a merge or squash in progress (after it landed, or
/// after the target was reset): `MERGE_HEAD`, `MERGE_MSG`, `MERGE_MODE`,
/// `SQUASH_MSG`.
async fn clear_merge_state(git: &Git) {
    for name in ["MERGE_HEAD", "MERGE_MSG", "MERGE_MODE", "SQUASH_MSG"] {
        if let Ok(path) = git.text(&["rev-parse", "--git-path", name]).await {
            git.remove_file(&git.dir().join(path)).await;
        }
    }
}

/// The group and the environment of the variant a PickVariant names.
fn find_variant(
    envs: &Environments,
    request: &PickVariant,
) -> Result<(GroupRecord, EnvironmentRecord), ApiError> {
    let group = envs.store.group(&request.group).ok_or_else(|| {
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
    let record = envs
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

/// The variant's side of a merge.
struct Merge<'a> {
    variant_git: &'a Git,
    variant_branch: &'a str,
    how: How,
    label: &'a str,
}

/// Merges or squashes a variant's work (committed first) into the target;
/// refuses a dirty target, and a conflict before anything is touched. Returns
/// the target's new tip. The target's tip before is recorded in the intent
/// before git touches it.
async fn merge_into(
    envs: &Environments,
    into: Target<'_>,
    merge: Merge<'_>,
    underway: &mut Underway,
) -> Result<String, ApiError> {
    let (target_git, target_branch) = target(envs, into.name, into.host).await?;
    let into = into.name;
    let label = merge.label;
    refuse_dirty_target(&target_git, into).await?;
    let tip = commit_all(merge.variant_git, &format!("krad: the work of {label}")).await?;
    let conflicted = merge_conflicts(&target_git, &target_branch, &tip).await?;
    if !conflicted.is_empty() {
        return Err(conflict(
            format!("{label} conflicts with {into:?}; nothing was changed"),
            json!({ "environment": into, "files": conflicted }),
        ));
    }
    let before = target_git.text(&["rev-parse", "HEAD"]).await?;
    let message = merge_message(merge.how, label, merge.variant_branch);
    if let Plan::PickVariant(plan) = underway.plan_mut() {
        plan.merging = Some(Merging {
            before,
            tip,
            message: message.clone(),
        });
    }
    underway.save()?;
    run_merge(&target_git, merge.variant_branch, merge.how, &message)
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

/// `conflict` when the target has uncommitted changes (untracked files aside).
async fn refuse_dirty_target(target_git: &Git, into: &str) -> Result<(), ApiError> {
    let dirty = target_git.dirty_files(false).await?;
    if !dirty.is_empty() {
        return Err(conflict(
            format!(
                "environment {into:?} has uncommitted changes; commit or stash them, then pick again"
            ),
            json!({ "environment": into, "files": dirty }),
        ));
    }
    Ok(())
}

/// A dry run: what the pick would land — the tree, the commit message, the
/// files, the conflicts — with nothing changed: the variant's uncommitted work
/// is snapshotted through a temporary index (not committed), the merge worked
/// out by `git merge-tree`, and no intent recorded. What the pick would refuse
/// before merging (a dirty target, a detached one) is refused the same way.
async fn dry_run(
    envs: &Environments,
    group: &GroupRecord,
    record: EnvironmentRecord,
    how: How,
    into: &str,
    variant: u32,
) -> Result<PickedInfo, ApiError> {
    let label = format!("variant {variant} of {}", group.name);
    let variant_git = present_git(envs, &record)?;
    let snapshot = snapshot(&variant_git).await?;
    let uncommitted = if snapshot.uncommitted() {
        changed_files(&variant_git, &snapshot.head, &snapshot.tree).await?
    } else {
        Vec::new()
    };
    let work_message = format!("krad: the work of {label}");
    let (commit, dry_run) = if how == How::Branch {
        let files = changed_files(&variant_git, &record.base, &snapshot.tree).await?;
        let dry_run = DryRunInfo {
            tree: snapshot.tree.clone(),
            message: snapshot.uncommitted().then_some(work_message),
            fast_forward: false,
            files,
            uncommitted,
            conflicts: Vec::new(),
        };
        (snapshot.head.clone(), dry_run)
    } else {
        let (target_git, _) = target(envs, into, group.host.as_deref()).await?;
        refuse_dirty_target(&target_git, into).await?;
        let head = target_git.text(&["rev-parse", "HEAD"]).await?;
        let head_tree = target_git
            .text(&["rev-parse", &format!("{head}^{{tree}}")])
            .await?;
        let work = snapshot.commit(&variant_git).await?;
        let merged = merge(&target_git, &MergeOf::new(&head, &work)).await?;
        let message = merge_message(how, &label, &record.branch);
        let dry_run = if !merged.conflicts.is_empty() {
            DryRunInfo {
                tree: String::new(),
                message: Some(message),
                fast_forward: false,
                files: Vec::new(),
                uncommitted,
                conflicts: merged.conflicts,
            }
        } else {
            let ancestor = |a: &str, b: &str| {
                let (a, b) = (a.to_owned(), b.to_owned());
                let git = target_git.clone();
                async move {
                    git.succeeds(&["merge-base", "--is-ancestor", a.as_str(), b.as_str()])
                        .await
                }
            };
            let (tree, message, fast_forward) = match how {
                How::Merge if ancestor(&work, &head).await? => (head_tree.clone(), None, false),
                How::Merge if ancestor(&head, &work).await? => (snapshot.tree.clone(), None, true),
                How::Squash if merged.tree == head_tree => (head_tree.clone(), None, false),
                _ => (merged.tree, Some(message), false),
            };
            DryRunInfo {
                files: changed_files(&target_git, &head, &tree).await?,
                tree,
                message,
                fast_forward,
                uncommitted,
                conflicts: Vec::new(),
            }
        };
        (head, dry_run)
    };
    Ok(PickedInfo {
        group: group.name.clone(),
        variant,
        branch: record.branch,
        into: (how != How::Branch).then(|| into.to_owned()),
        commit,
        dry_run: Some(Box::new(dry_run)),
        scores: None,
    })
}

/// The paths that differ between two commits or trees (both sides of a rename).
async fn changed_files(git: &Git, from: &str, to: &str) -> Result<Vec<String>, ApiError> {
    let out = git
        .bytes(&["diff", "--name-only", "-z", "--no-renames", from, to])
        .await?;
    Ok(out
        .split(|&b| b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect())
}

/// The commit message of a merge or squash of `branch`.
fn merge_message(how: How, label: &str, branch: &str) -> String {
    match how {
        How::Squash => format!("krad: {label} (squashed from {branch})"),
        How::Merge | How::Branch => format!("krad: merge {label} ({branch})"),
    }
}

/// Closes (forced, archived first) the variants of a group other than the
/// picked one; a failure is logged, not returned.
async fn close_others(
    envs: &Environments,
    terminals: &impl CloseTerminals,
    group: &GroupRecord,
    picked: u32,
) {
    for (number, other) in &group.variants {
        if *number == picked || envs.store.environment(&other.environment).is_none() {
            continue;
        }
        if let Err(e) = close(envs, terminals, &other.environment, true).await {
            tracing::warn!(environment = %other.environment, "could not close a losing variant: {e}");
        }
    }
}

/// The files a merge of `tip` into `branch` would conflict on, found without
/// touching any worktree.
async fn merge_conflicts(git: &Git, branch: &str, tip: &str) -> Result<Vec<String>, ApiError> {
    Ok(merge(git, &MergeOf::new(branch, tip)).await?.conflicts)
}

/// Merges or squashes `branch` into the target's checked-out branch. On failure
/// the target is put back exactly as it was and the conflicting files returned.
async fn run_merge(
    git: &Git,
    branch: &str,
    how: How,
    message: &str,
) -> Result<String, Vec<String>> {
    let identity = git.identity_args().await;
    let mut args = identity.clone();
    match how {
        How::Squash => args.extend(["merge".into(), "--squash".into(), branch.to_owned()]),
        How::Merge | How::Branch => args.extend([
            "merge".into(),
            "--no-edit".into(),
            "-m".into(),
            message.to_owned(),
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
        clear_merge_state(git).await;
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
                message.to_owned(),
            ]);
            if git.bytes(&commit).await.is_err() {
                let _ = git.output(&["reset", "--merge"], None).await;
                clear_merge_state(git).await;
                return Err(Vec::new());
            }
        }
        // Nothing to commit (the work is already there): git left its message.
        clear_merge_state(git).await;
    }
    git.text(&["rev-parse", "HEAD"])
        .await
        .map_err(|_| Vec::new())
}
