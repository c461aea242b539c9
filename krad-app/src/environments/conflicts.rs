//! Conflicts, foreseen: for every pair of environments (main and the worktrees,
//! or the ones asked for), and each against its base environment's current tip,
//! whether their work — committed and uncommitted — merges cleanly, and the files
//! that conflict.
//!
//! Each environment is snapshotted (see [`super::snapshot`]: a temporary index,
//! never its own), a few at a time; then all the merges of one repository are
//! worked out by a single `git merge-tree --stdin` in it. Environments on an SSH
//! host are snapshotted and merged there; environments in different repositories
//! (this machine's and a host's) are never paired.

use std::collections::BTreeMap;
use std::time::Instant;

use krad_bus::protocol::{
    ApiError, BaseConflicts, ConflictPair, ConflictsEnvironment, ConflictsInfo,
};

use super::Environments;
use super::tree_state::{MergeOf, Merged, TreeState, merge_all, snapshot};
use super::{directory_gone, env_git, host, not_found_environment, root_git};
use crate::environments::MAIN;
use crate::git::Git;
use crate::records::{EnvironmentRecord, Phase};

/// How many environments are snapshotted at once.
const AT_ONCE: usize = 4;

/// One environment to compare: main, or a worktree's record.
struct Member {
    name: String,
    record: Option<EnvironmentRecord>,
}

impl Member {
    fn host(&self) -> Option<&str> {
        self.record.as_ref().and_then(|r| r.host.as_deref())
    }
}

/// An environment as read: its snapshot and a commit of it.
struct Read {
    snapshot: TreeState,
    commit: String,
}

/// Conflicts: the environments named (default: main and every worktree).
pub(crate) async fn conflicts(
    envs: &Environments,
    names: Option<&[String]>,
) -> Result<ConflictsInfo, ApiError> {
    let started = Instant::now();
    let members = members(envs, names)?;
    let at_once = tokio::sync::Semaphore::new(AT_ONCE);
    let reads: Vec<Result<Read, String>> =
        futures_util::future::join_all(members.iter().map(|member| async {
            let _turn = at_once.acquire().await;
            read(envs, member).await
        }))
        .await;
    let tips = base_tips(envs, &members, &reads).await;
    let mut environments: Vec<ConflictsEnvironment> = members
        .iter()
        .zip(&reads)
        .map(|(member, read)| ConflictsEnvironment {
            name: member.name.clone(),
            host: member.host().map(str::to_owned),
            head: read.as_ref().ok().map(|r| r.snapshot.head.clone()),
            tree: read.as_ref().ok().map(|r| r.snapshot.tree.clone()),
            uncommitted: read.as_ref().is_ok_and(|r| r.snapshot.uncommitted()),
            base: None,
            error: read.as_ref().err().cloned(),
        })
        .collect();
    let mut pairs = Vec::new();
    // One repository at a time: this machine's, then each host's.
    let mut repositories: BTreeMap<Option<&str>, Vec<usize>> = BTreeMap::new();
    for (i, member) in members.iter().enumerate() {
        if reads[i].is_ok() {
            repositories.entry(member.host()).or_default().push(i);
        }
    }
    for (host_name, indexes) in repositories {
        let root = match host(envs, host_name) {
            Ok(host) => root_git(envs, host.as_ref()),
            Err(e) => {
                for &i in &indexes {
                    environments[i].error = Some(e.message.clone());
                }
                continue;
            }
        };
        let commit = |i: usize| reads[i].as_ref().map(|r| r.commit.as_str()).unwrap_or("");
        let mut merges = Vec::new();
        let mut what = Vec::new();
        for (n, &i) in indexes.iter().enumerate() {
            for &j in &indexes[n + 1..] {
                merges.push(MergeOf::new(commit(i), commit(j)));
                what.push((i, Some(j)));
            }
            if let Some((_, tip)) = &tips[i] {
                merges.push(MergeOf::new(commit(i), tip));
                what.push((i, None));
            }
        }
        let merged = match merge_all(&root, &merges).await {
            Ok(merged) => merged,
            Err(e) => {
                for &i in &indexes {
                    environments[i].error = Some(e.message.clone());
                }
                continue;
            }
        };
        for ((i, other), Merged { conflicts, .. }) in what.into_iter().zip(merged) {
            match other {
                Some(j) => pairs.push(ConflictPair {
                    a: members[i].name.clone(),
                    b: members[j].name.clone(),
                    clean: conflicts.is_empty(),
                    files: conflicts,
                }),
                None => {
                    if let Some((environment, tip)) = tips[i].clone() {
                        environments[i].base = Some(BaseConflicts {
                            environment,
                            tip,
                            clean: conflicts.is_empty(),
                            files: conflicts,
                        });
                    }
                }
            }
        }
    }
    let order: BTreeMap<&str, usize> = members
        .iter()
        .enumerate()
        .map(|(i, m)| (m.name.as_str(), i))
        .collect();
    pairs.sort_by_key(|p| (order[p.a.as_str()], order[p.b.as_str()]));
    tracing::debug!(
        environments = members.len(),
        pairs = pairs.len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "conflicts computed"
    );
    Ok(ConflictsInfo {
        environments,
        pairs,
    })
}

/// The environments to compare: main first, then the worktrees by name. A name
/// that is no environment is `not_found`.
fn members(envs: &Environments, names: Option<&[String]>) -> Result<Vec<Member>, ApiError> {
    let records = envs.store.environments();
    let mut members = Vec::new();
    let wanted = |name: &str| names.is_none_or(|names| names.iter().any(|n| n == name));
    if let Some(names) = names {
        for name in names {
            if name != MAIN && !records.iter().any(|r| &r.name == name) {
                return Err(not_found_environment(name));
            }
        }
    }
    if wanted(MAIN) {
        members.push(Member {
            name: MAIN.to_owned(),
            record: None,
        });
    }
    let mut records: Vec<EnvironmentRecord> =
        records.into_iter().filter(|r| wanted(&r.name)).collect();
    records.sort_by(|a, b| a.name.cmp(&b.name));
    members.extend(records.into_iter().map(|record| Member {
        name: record.name.clone(),
        record: Some(record),
    }));
    Ok(members)
}

/// Snapshots one environment; why it cannot be, as text.
async fn read(envs: &Environments, member: &Member) -> Result<Read, String> {
    let git = match &member.record {
        None => Git::new(&envs.settings.root),
        Some(record) if record.phase == Phase::Creating => {
            return Err("it is still being created".into());
        }
        Some(record) if directory_gone(record) => {
            return Err(format!("its directory {} is gone", record.path.display()));
        }
        Some(record) => env_git(envs, record).map_err(|e| e.message)?,
    };
    let snapshot = snapshot(&git).await.map_err(|e| e.message)?;
    let commit = snapshot.commit(&git).await.map_err(|e| e.message)?;
    Ok(Read { snapshot, commit })
}

/// Each worktree's base environment and that environment's tip now (its HEAD's
/// commit); `None` for main, and when the base is gone or cannot be read.
async fn base_tips(
    envs: &Environments,
    members: &[Member],
    reads: &[Result<Read, String>],
) -> Vec<Option<(String, String)>> {
    // Tips already known: the HEADs just read, by machine and name.
    let mut known: BTreeMap<(Option<String>, String), Option<String>> = members
        .iter()
        .zip(reads)
        .filter_map(|(m, r)| {
            let head = r.as_ref().ok()?.snapshot.head.clone();
            Some(((m.host().map(str::to_owned), m.name.clone()), Some(head)))
        })
        .collect();
    let mut tips = Vec::with_capacity(members.len());
    for (member, read) in members.iter().zip(reads) {
        let Some(record) = member.record.as_ref().filter(|_| read.is_ok()) else {
            tips.push(None);
            continue;
        };
        let base = record.base_environment.clone();
        let key = (record.host.clone(), base.clone());
        let tip = match known.get(&key) {
            Some(tip) => tip.clone(),
            None => {
                let tip = tip_of(envs, record.host.as_deref(), &base).await;
                known.insert(key, tip.clone());
                tip
            }
        };
        tips.push(tip.map(|tip| (base, tip)));
    }
    tips
}

/// The commit an environment's HEAD is at (main on a host: the host's
/// repository), or `None`.
async fn tip_of(envs: &Environments, host_name: Option<&str>, name: &str) -> Option<String> {
    let git = if name == MAIN {
        let host = host(envs, host_name).ok()?;
        root_git(envs, host.as_ref())
    } else {
        let record = envs.store.environment(name)?;
        if record.host.as_deref() != host_name {
            return None;
        }
        env_git(envs, &record).ok()?
    };
    git.commit_of("HEAD").await.ok().flatten()
}
