//! Environments: `main` (the repository) and the git worktrees the app creates.
//!
//! This file holds what every part shares — where worktrees go, git in the
//! repository or in an environment, the errors environments answer, and saving a
//! record. Each concept has a file of its own:
//!
//! * [`naming`] — what a new worktree may be called, and the commit a base names.
//! * [`creation`] — a worktree on its own branch from a base commit, with the
//!   files of `.worktreeinclude` copied in.
//! * [`setup`] — the config's setup command, run before any agent starts there.
//! * [`listing`] — what Environments shows of each environment.
//! * [`restore`] — after a restart (or a SIGKILL at any point), the records and
//!   the worktrees on disk are brought back in line, and every difference is
//!   reported rather than lost.
//! * [`removal`] — Close: refuses to drop work that exists nowhere else unless
//!   forced, and always records the tip under `refs/krad/archive/<name>` first.
//! * [`merged`] — work already in its target by content (squash-merged,
//!   cherry-picked) counts as merged.
//! * [`archives`] — Archives and RestoreArchive: the archive refs, and one made
//!   an environment again with its uncommitted work.
//! * [`changes`] and [`variants`] — what an environment did, and variant groups.
//! * [`snapshot`] — an environment's work, uncommitted included, as a tree
//!   (a temporary index, never its own), and merges worked out on objects.
//! * [`conflicts`] — Conflicts: which environments' work would conflict.
//! * [`update`] — UpdateEnvironment: a worktree brought up to its base's tip.
//! * [`ports`] — each environment's block of TCP ports (`[environments] ports`).
//! * [`disk`] — each environment's disk use, measured in the background, and
//!   its age.
//! * [`gc`] — CollectEnvironments: archives and removes what matches, never
//!   what a terminal or another program still uses.

/// The environment every app has: the repository it was started in.
pub(crate) const MAIN: &str = "main";

pub(crate) mod archives;
pub(crate) mod changes;
pub(crate) mod conflicts;
mod creation;
pub(crate) mod disk;
pub(crate) mod gc;
mod listing;
mod merged;
mod naming;
pub(crate) mod ports;
mod removal;
mod restore;
mod setup;
pub(crate) mod tree_state;
pub(crate) mod update;
pub(crate) mod variants;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use krad_bus::protocol::{ApiError, ErrorCode};
use serde_json::json;

pub(crate) use creation::{NewWorktree, create};
pub(crate) use listing::{info, infos, main_info};
pub(crate) use naming::resolve_base;
pub(crate) use removal::{close, commit_all};
pub(crate) use restore::restore;
pub(crate) use setup::{run_setup, run_teardown};
pub(crate) use variants::recover_pick;

use crate::config::Settings;
use crate::git::Git;
use crate::hosts::Host;
use crate::hosts::HostLinks;
use crate::records::{EnvironmentRecord, Phase};
use crate::store::Store;

/// The environments' domain, one per app: the records of worktrees (in the
/// store), the lock that serializes the git work creating and removing them,
/// the signal that one changed, their disk use and port blocks. Built once by
/// the composition root; everything under `environments/` takes it.
pub(crate) struct Environments {
    settings: Arc<Settings>,
    store: Arc<Store>,
    hosts: Arc<HostLinks>,
    /// Serializes the git work that creates and removes worktrees.
    lock: tokio::sync::Mutex<()>,
    /// Bumped whenever an environment changes (Spawn waits on a setup with it).
    changed: tokio::sync::watch::Sender<u64>,
    /// Each environment's disk use, as last measured in the background.
    disk: disk::DiskUse,
    /// The hosts' port registries: their calls in turn, what they said last.
    host_ports: ports::HostPorts,
    /// The environments' port blocks as last read from the store.
    port_blocks: ports::KnownBlocks,
}

impl Environments {
    pub(crate) fn new(settings: Arc<Settings>, store: Arc<Store>, hosts: Arc<HostLinks>) -> Self {
        Environments {
            settings,
            store,
            hosts,
            lock: tokio::sync::Mutex::new(()),
            changed: tokio::sync::watch::channel(0).0,
            disk: Default::default(),
            host_ports: Default::default(),
            port_blocks: Default::default(),
        }
    }

    /// Checks that an environment exists.
    pub(crate) fn check(&self, name: &str) -> Result<(), ApiError> {
        if name == MAIN || self.store.environment(name).is_some() {
            Ok(())
        } else {
            Err(not_found_environment(name))
        }
    }

    /// An environment for an agent: its directory and host — the main
    /// checkout at once, a worktree once its setup is done
    /// ([`setup::ready`]).
    pub(crate) async fn ready(&self, name: &str) -> Result<(PathBuf, Option<String>), ApiError> {
        if name == MAIN {
            return Ok((self.settings.root.clone(), None));
        }
        setup::ready(self, name).await
    }

    /// An environment's ports: none for the main checkout (blocks go to new
    /// worktrees), else its block, empty without one ([`ports::block`]).
    pub(crate) fn ports(&self, name: &str) -> Vec<u16> {
        if name == MAIN {
            return Vec::new();
        }
        ports::block(self, name)
    }

    /// The SSH host an environment lives on (`None`: this machine).
    pub(crate) fn host_of(&self, name: &str) -> Result<Option<Arc<Host>>, ApiError> {
        let record = self.store.environment(name);
        host(self, record.and_then(|r| r.host).as_deref())
    }

    /// The repository (the `main` environment's directory).
    pub(crate) fn root(&self) -> &Path {
        &self.settings.root
    }

    /// The working directory of an environment, or `not_found`.
    pub(crate) fn path(&self, name: &str) -> Result<PathBuf, ApiError> {
        if name == MAIN {
            return Ok(self.settings.root.clone());
        }
        self.store
            .environment(name)
            .map(|record| record.path)
            .ok_or_else(|| not_found_environment(name))
    }
}

/// What the environments need of the terminals, handed in by the caller:
/// closing an environment's terminals before it goes (Close,
/// CollectEnvironments, a pick's losing variants). So environments import
/// nothing of the terminals.
pub(crate) trait CloseTerminals: Sync {
    /// Closes every terminal of `environment`; stops at the first that does
    /// not exit.
    fn close_terminals_of(
        &self,
        environment: &str,
    ) -> impl std::future::Future<Output = Result<(), ApiError>> + Send;
}

/// Where new worktrees go on a host: `<root>/.krad/worktrees`.
pub(crate) fn worktrees_dir_on(host: &Host) -> PathBuf {
    Path::new(&host.config.root).join(".krad").join("worktrees")
}

/// Where new worktrees go: `[worktrees] dir` (or `<repo>/.krad/worktrees`) here,
/// `<root>/.krad/worktrees` on a host.
pub(crate) fn worktrees_dir(envs: &Environments, host: Option<&Arc<Host>>) -> PathBuf {
    if let Some(host) = host {
        return worktrees_dir_on(host);
    }
    match &envs.settings.config.worktrees.dir {
        Some(dir) if dir.is_absolute() => dir.clone(),
        Some(dir) => envs.settings.root.join(dir),
        None => envs.settings.root.join(".krad").join("worktrees"),
    }
}

/// The host a record or a request names, from the config.
pub(crate) fn host(envs: &Environments, name: Option<&str>) -> Result<Option<Arc<Host>>, ApiError> {
    name.map(|n| envs.hosts.get(n)).transpose()
}

/// git in the repository: main here, or the host's root.
pub(crate) fn root_git(envs: &Environments, host: Option<&Arc<Host>>) -> Git {
    match host {
        Some(host) => Git::on(Some(host), Path::new(&host.config.root)),
        None => Git::new(&envs.settings.root),
    }
}

/// git in an environment's directory, which must be there: a local one whose
/// directory is gone is refused ([`gone`]) before git is run.
pub(crate) fn present_git(
    envs: &Environments,
    record: &EnvironmentRecord,
) -> Result<Git, ApiError> {
    if directory_gone(record) {
        return Err(gone(&record.name, record));
    }
    env_git(envs, record)
}

/// git in an environment's directory, where it lives.
pub(crate) fn env_git(envs: &Environments, record: &EnvironmentRecord) -> Result<Git, ApiError> {
    Ok(Git::on(
        host(envs, record.host.as_deref())?.as_ref(),
        &record.path,
    ))
}

pub(crate) fn conflict(message: String, detail: serde_json::Value) -> ApiError {
    ApiError::new(ErrorCode::Conflict, message).with_detail(detail)
}

pub(crate) fn not_found_environment(name: &str) -> ApiError {
    ApiError::new(ErrorCode::NotFound, format!("no environment {name:?}"))
        .with_detail(json!({ "environment": name }))
}

/// Whether a local environment's directory is gone (a host's is not checked,
/// nor one still being created).
fn directory_gone(record: &EnvironmentRecord) -> bool {
    record.host.is_none() && !record.path.is_dir() && record.phase != Phase::Creating
}

/// `conflict`: the environment's directory is gone, and what to do.
fn gone(name: &str, record: &EnvironmentRecord) -> ApiError {
    conflict(
        format!(
            "the directory of environment {name:?} is gone ({}); `krad close --env {name}` \
             forgets it (its branch is archived under refs/krad/archive/ first)",
            record.path.display()
        ),
        json!({ "environment": name }),
    )
}

/// Persists an environment's record and tells whoever waits on environments.
fn save(envs: &Environments, record: EnvironmentRecord) -> Result<(), ApiError> {
    envs.store.put_environment(record).map_err(|e| {
        ApiError::new(
            ErrorCode::Failed,
            format!("cannot record the environment: {e}"),
        )
    })?;
    envs.changed.send_modify(|n| *n += 1);
    Ok(())
}
