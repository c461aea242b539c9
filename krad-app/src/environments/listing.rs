//! Listing: what Environments (and CreateWorktree) shows of `main` and of each
//! worktree — where it is, its branch and base, its terminals and its status,
//! its age and its last disk measurement (never measured here: see [`super::disk`]).

use krad_bus::protocol::{EnvironmentInfo, EnvironmentKind, EnvironmentStatus};

use super::directory_gone;
use crate::git::Git;
use crate::state_file::{EnvironmentRecord, Phase};
use crate::{Core, MAIN};

/// What Environments shows of `main`.
pub(crate) async fn main_info(core: &Core) -> EnvironmentInfo {
    let branch = Git::new(&core.settings.root)
        .text(&["symbolic-ref", "--short", "-q", "HEAD"])
        .await
        .ok()
        .filter(|b| !b.is_empty());
    let disk = core.disk.get(MAIN);
    EnvironmentInfo {
        name: MAIN.to_owned(),
        path: core.settings.root.display().to_string(),
        branch,
        base: None,
        host: None,
        kind: EnvironmentKind::Main,
        group: None,
        variant: None,
        terminals: core.store.terminals_of(MAIN),
        status: EnvironmentStatus::Ready,
        setup: None,
        ports: Vec::new(),
        ports_in_use: Vec::new(),
        created_at: None,
        disk_bytes: disk.as_ref().map(|d| d.bytes),
        disk_measured_at: disk.map(|d| d.at),
    }
}

/// What Environments shows of a worktree.
pub(crate) fn info(core: &Core, record: &EnvironmentRecord) -> EnvironmentInfo {
    let status = if directory_gone(record) {
        EnvironmentStatus::Missing
    } else {
        match record.phase {
            Phase::Creating | Phase::SettingUp => EnvironmentStatus::SettingUp,
            Phase::Ready => EnvironmentStatus::Ready,
            Phase::SetupFailed => EnvironmentStatus::SetupFailed,
        }
    };
    let ports = super::ports::block(core, &record.name);
    let disk = core.disk.get(&record.name);
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
        terminals: core.store.terminals_of(&record.name),
        status,
        setup: record.setup.clone(),
        ports_in_use: super::ports::in_use_of(core, record, &ports),
        ports,
        created_at: super::disk::created_at(record),
        disk_bytes: disk.as_ref().map(|d| d.bytes),
        disk_measured_at: disk.map(|d| d.at),
    }
}
