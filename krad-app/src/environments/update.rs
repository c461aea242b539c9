//! UpdateEnvironment: a worktree brought up to its base environment's current
//! tip, by a merge or a rebase.
//!
//! Nothing is half done: uncommitted work is refused before anything runs, and
//! the whole merge or rebase is worked out on objects first (`git merge-tree`,
//! `git commit-tree`: no worktree, index or ref touched), so a conflict is
//! answered with its files and the environment exactly as it was. Only once the
//! new tip exists is the worktree moved to it, in one git command that refuses
//! rather than half-moves (`merge --ff-only`, `reset --keep`). The environment's
//! `base` then becomes the tip it was brought up to, so Changes shows its own
//! work only.
//!
//! Interrupted by a crash before the worktree moved, nothing changed (the
//! objects made are unreferenced); after, running it again finds the
//! environment up to date and records its base. Its intent makes the next app
//! run it again ([`recover`]), so the base is right even without a retry.

use krad_bus::protocol::{ApiError, ErrorCode, UpdatedInfo};
use krad_bus::request::update_environment::UpdateHow;
use serde_json::json;

use super::Environments;
use super::tree_state::{MergeOf, merge};
use super::{conflict, env_git, gone, host, not_found_environment, root_git, save};
use crate::environments::MAIN;
use crate::git::Git;

/// After a crash: runs an interrupted update again, once a git the dead app
/// left running in the environment is done.
pub(crate) async fn recover(
    envs: &Environments,
    name: &str,
    how: UpdateHow,
) -> Result<UpdatedInfo, ApiError> {
    let record = envs
        .store
        .environment(name)
        .ok_or_else(|| not_found_environment(name))?;
    super::variants::wait_for_index_lock(&env_git(envs, &record)?).await;
    update(envs, name, how).await
}

/// Brings environment `name` up to its base environment's tip.
pub(crate) async fn update(
    envs: &Environments,
    name: &str,
    how: UpdateHow,
) -> Result<UpdatedInfo, ApiError> {
    if name == MAIN {
        return Err(ApiError::new(
            ErrorCode::Invalid,
            "main has no base environment to be brought up to",
        )
        .with_detail(json!({ "environment": MAIN })));
    }
    let mut record = envs
        .store
        .environment(name)
        .ok_or_else(|| not_found_environment(name))?;
    let git = env_git(envs, &record)?;
    if !git.dir_exists().await {
        return Err(gone(name, &record));
    }
    let base_environment = record.base_environment.clone();
    let tip = base_tip(envs, record.host.as_deref(), &base_environment).await?;
    if git
        .text(&["symbolic-ref", "--short", "-q", "HEAD"])
        .await
        .is_err()
    {
        return Err(conflict(
            format!(
                "environment {name:?} is not on a branch (detached HEAD); check its branch out first"
            ),
            json!({ "environment": name }),
        ));
    }
    let dirty = git.dirty_files(true).await?;
    if !dirty.is_empty() {
        return Err(conflict(
            format!(
                "environment {name:?} has uncommitted changes ({}); commit or stash them, then update again; nothing was changed",
                some_files(&dirty)
            ),
            json!({ "environment": name, "files": dirty }),
        ));
    }
    let before = git.text(&["rev-parse", "HEAD"]).await?;
    let (head, fast_forward) = if is_ancestor(&git, &tip, &before).await? {
        (before.clone(), false)
    } else if is_ancestor(&git, &before, &tip).await? {
        git.bytes(&["merge", "--ff-only", "--quiet", tip.as_str()])
            .await?;
        (tip.clone(), true)
    } else {
        let label = format!("{name} from {base_environment}");
        let bringing = Bringing {
            git: &git,
            head: &before,
            tip: &tip,
            name,
            label: &label,
        };
        let new = match how {
            UpdateHow::Merge => bringing.merged().await?,
            UpdateHow::Rebase => bringing.rebased().await?,
        };
        let moved = match how {
            UpdateHow::Merge => {
                git.bytes(&["merge", "--ff-only", "--quiet", new.as_str()])
                    .await
            }
            UpdateHow::Rebase => {
                git.bytes(&["reset", "--keep", "--quiet", new.as_str()])
                    .await
            }
        };
        moved?;
        (new, false)
    };
    let now = git.text(&["rev-parse", "HEAD"]).await?;
    if now != head {
        return Err(ApiError::new(
            ErrorCode::Failed,
            format!("environment {name:?} moved while it was updated (now at {now})"),
        ));
    }
    // Its base moves forward only (a base environment reset backwards leaves it).
    if record.base != tip && is_ancestor(&git, &record.base, &tip).await? {
        record.base = tip.clone();
        save(envs, record)?;
    }
    tracing::info!(environment = name, %before, %head, "environment updated");
    Ok(UpdatedInfo {
        environment: name.to_owned(),
        base_environment,
        base: tip,
        before,
        head,
        fast_forward,
    })
}

/// The tip (HEAD's commit) of an environment's base environment: main (on a
/// host, the host's repository) or another worktree on the same machine.
async fn base_tip(
    envs: &Environments,
    host_name: Option<&str>,
    base: &str,
) -> Result<String, ApiError> {
    let git = if base == MAIN {
        root_git(envs, host(envs, host_name)?.as_ref())
    } else {
        let record = envs.store.environment(base).ok_or_else(|| {
            ApiError::new(
                ErrorCode::NotFound,
                format!("its base environment {base:?} is gone (closed); there is nothing to update from"),
            )
            .with_detail(json!({ "environment": base }))
        })?;
        if record.host.as_deref() != host_name {
            return Err(ApiError::new(
                ErrorCode::Invalid,
                format!("its base environment {base:?} is on another machine"),
            ));
        }
        env_git(envs, &record)?
    };
    git.commit_of("HEAD").await?.ok_or_else(|| {
        ApiError::new(
            ErrorCode::Failed,
            format!("the base environment {base:?} has no commit"),
        )
    })
}

/// Whether `ancestor` is an ancestor of (or is) `of`.
async fn is_ancestor(git: &Git, ancestor: &str, of: &str) -> Result<bool, ApiError> {
    let (code, _, err) = git
        .output(&["merge-base", "--is-ancestor", ancestor, of], None)
        .await?;
    match code {
        Some(0) => Ok(true),
        Some(1) => Ok(false),
        _ => Err(ApiError::new(
            ErrorCode::Failed,
            format!(
                "git merge-base --is-ancestor failed: {}",
                String::from_utf8_lossy(&err).trim()
            ),
        )),
    }
}

fn conflicts(name: &str, label: &str, files: Vec<String>, commit: Option<&str>) -> ApiError {
    let at = commit.map_or(String::new(), |c| format!(" at its commit {c}"));
    let message = format!(
        "updating {label} conflicts{at} ({}); nothing was changed",
        some_files(&files)
    );
    let mut detail = json!({ "environment": name, "files": files });
    if let Some(commit) = commit {
        detail["commit"] = json!(commit);
    }
    ApiError::new(ErrorCode::Conflict, message).with_detail(detail)
}

/// The first files of a list, for a message (all of them are in `detail`).
fn some_files(files: &[String]) -> String {
    const SHOWN: usize = 10;
    let mut text = files
        .iter()
        .take(SHOWN)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if files.len() > SHOWN {
        text.push_str(&format!(" and {} more", files.len() - SHOWN));
    }
    text
}

/// Bringing `tip` into environment `name`'s `head` (`label` names both in
/// commit messages and conflicts), made on objects only: the worktree moves
/// after, by a fast-forward.
struct Bringing<'a> {
    git: &'a Git,
    head: &'a str,
    tip: &'a str,
    name: &'a str,
    label: &'a str,
}

impl Bringing<'_> {
    /// A merge commit of `head` and `tip`.
    async fn merged(&self) -> Result<String, ApiError> {
        let (git, head, tip) = (self.git, self.head, self.tip);
        let result = merge(git, &MergeOf::new(head, tip)).await?;
        if !result.conflicts.is_empty() {
            return Err(conflicts(self.name, self.label, result.conflicts, None));
        }
        let mut args = git.identity_args().await;
        let message = format!("krad: update {}", self.label);
        args.extend(
            [
                "commit-tree",
                result.tree.as_str(),
                "-p",
                head,
                "-p",
                tip,
                "-m",
                message.as_str(),
            ]
            .map(str::to_owned),
        );
        Ok(git.text(&args).await?)
    }

    /// `head`'s own commits (those not in `tip`, none whose change `tip` already
    /// has, no merges) replayed on `tip` one by one, as `git rebase` would.
    /// Commits that become empty are dropped.
    async fn rebased(&self) -> Result<String, ApiError> {
        let (git, head, tip, label) = (self.git, self.head, self.tip, self.label);
        let range = format!("{tip}...{head}");
        let list = git
            .text(&[
                "rev-list",
                "--reverse",
                "--topo-order",
                "--no-merges",
                "--right-only",
                "--cherry-pick",
                range.as_str(),
            ])
            .await?;
        let identity = git.identity_args().await;
        let mut onto = tip.to_owned();
        let mut onto_tree = git.text(&["rev-parse", &format!("{tip}^{{tree}}")]).await?;
        for commit in list.lines().filter(|l| !l.is_empty()) {
            let parent = format!("{commit}^");
            let step = merge(
                git,
                &MergeOf {
                    ours: onto.clone(),
                    theirs: commit.to_owned(),
                    base: Some(parent),
                },
            )
            .await?;
            if !step.conflicts.is_empty() {
                return Err(conflicts(self.name, label, step.conflicts, Some(commit)));
            }
            if step.tree == onto_tree {
                continue;
            }
            let facts = git
                .bytes(&[
                    "show",
                    "-s",
                    "--date=raw",
                    "--format=%an%x00%ae%x00%ad%x00%B",
                    commit,
                ])
                .await?;
            let mut parts = facts.splitn(4, |&b| b == 0);
            let mut field =
                || String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
            let (name, email, date, message) = (field(), field(), field(), field());
            let message = message.trim_end().to_owned();
            let author = git
                .clone()
                .with_env("GIT_AUTHOR_NAME", &name)
                .with_env("GIT_AUTHOR_EMAIL", &email)
                .with_env("GIT_AUTHOR_DATE", &date);
            let mut args = identity.clone();
            args.extend(
                [
                    "commit-tree",
                    step.tree.as_str(),
                    "-p",
                    onto.as_str(),
                    "-m",
                    message.as_str(),
                ]
                .map(str::to_owned),
            );
            onto = author.text(&args).await?;
            onto_tree = step.tree;
        }
        Ok(onto)
    }
}
