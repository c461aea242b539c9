//! Listing: what Environments (and CreateWorktree) shows of `main` and of each
//! worktree — where it is, its branch and base, its terminals and its status,
//! its age and its last disk measurement (never measured here: see [`super::disk`]).

use std::path::PathBuf;

use krad_bus::protocol::{EnvironmentInfo, EnvironmentKind, EnvironmentStatus, PortInUse, Tokens};

use super::Environments;
use super::directory_gone;
use crate::environments::MAIN;
use crate::git::Git;
use crate::port_registry;
use crate::records::{EnvironmentRecord, Phase};

/// What Environments shows of `main`.
pub(crate) async fn main_info(envs: &Environments) -> EnvironmentInfo {
    let branch = Git::new(&envs.settings.root)
        .text(&["symbolic-ref", "--short", "-q", "HEAD"])
        .await
        .ok()
        .filter(|b| !b.is_empty());
    let disk = envs.disk.get(MAIN);
    EnvironmentInfo {
        name: MAIN.to_owned(),
        path: envs.settings.root.display().to_string(),
        branch,
        base: None,
        host: None,
        kind: EnvironmentKind::Main,
        group: None,
        variant: None,
        group_picked: None,
        terminals: envs.store.terminals_of(MAIN),
        status: EnvironmentStatus::Ready,
        setup: None,
        ports: Vec::new(),
        ports_in_use: Vec::new(),
        created_at: None,
        disk_bytes: disk.as_ref().map(|d| d.bytes),
        disk_measured_at: disk.map(|d| d.at),
        tokens: tokens_of(envs, MAIN),
    }
}

/// The tokens of an environment's terminals together.
fn tokens_of(envs: &Environments, environment: &str) -> Option<Tokens> {
    let records = envs.store.list(Some(environment));
    Tokens::sum(records.iter().filter_map(|r| r.tokens.as_ref()))
}

/// What Environments shows of a worktree.
pub(crate) fn info(envs: &Environments, record: &EnvironmentRecord) -> EnvironmentInfo {
    let ports = super::ports::block(envs, &record.name);
    let ports_in_use = super::ports::in_use_of(envs, record, &ports);
    info_with(envs, record, ports, ports_in_use)
}

/// What Environments shows of every worktree. The ports in use of all local
/// ones are looked for together (one read of the socket tables, one pass over
/// the processes), on a blocking thread: on a busy machine the socket tables
/// list thousands of closed connections, and the request's deadline must be
/// able to end the request while the look runs.
pub(crate) async fn infos(
    envs: &Environments,
    records: &[EnvironmentRecord],
) -> Vec<EnvironmentInfo> {
    let blocks: Vec<Vec<u16>> = records
        .iter()
        .map(|record| super::ports::block(envs, &record.name))
        .collect();
    let local: Vec<(Vec<u16>, PathBuf)> = records
        .iter()
        .zip(&blocks)
        .filter(|(record, _)| record.host.is_none())
        .map(|(record, block)| (block.clone(), record.path.clone()))
        .collect();
    let local_in_use = tokio::task::spawn_blocking(move || port_registry::in_use_each(&local))
        .await
        .unwrap_or_else(|error| {
            tracing::warn!(%error, "cannot look for the environments' ports in use");
            Vec::new()
        });
    let mut local_in_use = local_in_use.into_iter();
    records
        .iter()
        .zip(blocks)
        .map(|(record, ports)| {
            let ports_in_use = match record.host {
                None => super::ports::not_the_app(local_in_use.next().unwrap_or_default()),
                Some(_) => super::ports::in_use_of(envs, record, &ports),
            };
            info_with(envs, record, ports, ports_in_use)
        })
        .collect()
}

fn info_with(
    envs: &Environments,
    record: &EnvironmentRecord,
    ports: Vec<u16>,
    ports_in_use: Vec<PortInUse>,
) -> EnvironmentInfo {
    let status = if directory_gone(record) {
        EnvironmentStatus::Missing
    } else {
        match record.phase {
            Phase::Creating | Phase::SettingUp => EnvironmentStatus::SettingUp,
            Phase::Ready => EnvironmentStatus::Ready,
            Phase::SetupFailed => EnvironmentStatus::SetupFailed,
        }
    };
    let disk = envs.disk.get(&record.name);
    EnvironmentInfo {
        name: record.name.clone(),
        path: record.path.display().to_string(),
        branch: Some(record.branch.clone()),
        base: Some(record.base.clone()),
        host: record.host.clone(),
        kind: if record.host.is_some() {
            EnvironmentKind::Ssh
        } else {
            EnvironmentKind::Worktree
        },
        group: record.group.clone(),
        variant: record.variant,
        group_picked: record
            .group
            .as_deref()
            .and_then(|g| envs.store.group(g))
            .and_then(|g| g.picked),
        terminals: envs.store.terminals_of(&record.name),
        status,
        setup: record.setup.clone(),
        ports_in_use,
        ports,
        created_at: super::disk::created_at(record),
        disk_bytes: disk.as_ref().map(|d| d.bytes),
        disk_measured_at: disk.map(|d| d.at),
        tokens: tokens_of(envs, &record.name),
    }
}
