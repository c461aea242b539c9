//! Restore: after a start (or a crash at any point), the records and the
//! worktrees on disk are brought back in line — work interrupted is finished or
//! reported, and a worktree of ours that no record names is adopted, so that
//! none is ever orphaned silently.

use std::path::PathBuf;

use super::Environments;
use super::{save, worktrees_dir};
use crate::environments::MAIN;
use crate::git::Git;
use crate::records::{EnvironmentRecord, Phase};

/// Brings the records and the worktrees on disk back in line after a start;
/// see the module's doc.
pub(crate) async fn restore(envs: &Environments) {
    for mut record in envs.store.environments() {
        match record.phase {
            Phase::Creating if record.host.is_none() && !record.path.is_dir() => {
                tracing::warn!(environment = %record.name, "worktree creation was interrupted before git ran; forgetting it");
                let _ = envs.store.remove_environment(&record.name);
            }
            Phase::Creating => {
                tracing::warn!(environment = %record.name, "worktree creation was interrupted; adopting it");
                record.phase = Phase::Ready;
                let _ = save(envs, record);
            }
            Phase::SettingUp => {
                tracing::warn!(environment = %record.name, "its setup was interrupted by a restart");
                record.phase = Phase::SetupFailed;
                if let Some(setup) = &mut record.setup {
                    setup
                        .output
                        .push_str("\n[interrupted: the app stopped while the setup ran]");
                }
                let _ = save(envs, record);
            }
            Phase::Ready | Phase::SetupFailed => {
                if record.host.is_none() && !record.path.is_dir() {
                    tracing::warn!(environment = %record.name, path = %record.path.display(), "worktree directory is missing");
                }
            }
        }
    }
    adopt_orphans(envs).await;
}

/// Adopts worktrees under our directory that no record names.
async fn adopt_orphans(envs: &Environments) {
    let root = Git::new(&envs.settings.root);
    let Ok(list) = root.text(&["worktree", "list", "--porcelain"]).await else {
        return;
    };
    let dir = worktrees_dir(envs, None);
    let known: Vec<PathBuf> = envs
        .store
        .environments()
        .into_iter()
        .map(|r| r.path)
        .collect();
    let Ok(main_head) = root.text(&["rev-parse", "HEAD"]).await else {
        return;
    };
    for (path, branch) in worktrees(&list) {
        if path.parent() != Some(dir.as_path()) || known.contains(&path) {
            continue;
        }
        let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
            continue;
        };
        if envs.store.environment(&name).is_some() || name == MAIN {
            continue;
        }
        let base = root
            .text(&["merge-base", main_head.as_str(), branch.as_str()])
            .await
            .unwrap_or_else(|_| main_head.clone());
        tracing::warn!(environment = %name, "adopting a worktree no record named");
        let _ = save(envs, orphan_record(name, path, branch, base));
    }
}

/// The worktrees on a branch that `git worktree list --porcelain` shows: path
/// and branch of each.
fn worktrees(list: &str) -> impl Iterator<Item = (PathBuf, String)> + '_ {
    list.split("\n\n").filter_map(|block| {
        let mut path = None;
        let mut branch = None;
        for line in block.lines() {
            if let Some(p) = line.strip_prefix("worktree ") {
                path = Some(PathBuf::from(p));
            } else if let Some(b) = line.strip_prefix("branch refs/heads/") {
                branch = Some(b.to_owned());
            }
        }
        Some((path?, branch?))
    })
}

/// The record of an adopted worktree: ready, based on `main`.
fn orphan_record(name: String, path: PathBuf, branch: String, base: String) -> EnvironmentRecord {
    EnvironmentRecord {
        name,
        path,
        branch,
        base,
        base_environment: MAIN.to_owned(),
        host: None,
        group: None,
        variant: None,
        phase: Phase::Ready,
        setup: None,
        created_at: None,
    }
}
