//! Archives: the work Close kept under `refs/krad/archive/<name>` — in this
//! machine's repository, or an SSH host's for the environments that lived
//! there — listed, and made an environment again where it was kept: a new
//! worktree on a new branch at the archived commit, with krad's commit of the
//! uncommitted work undone into uncommitted files (`reset --mixed` to its
//! parent, in the new worktree only).

use std::sync::Arc;

use krad_bus::protocol::{ApiError, ArchiveInfo, ErrorCode};
use serde_json::json;

use super::Environments;
use super::{NewWorktree, create, env_git, root_git, save};
use crate::environments::MAIN;
use crate::hosts::Host;
use crate::records::EnvironmentRecord;

/// Where archives are kept.
const PREFIX: &str = "refs/krad/archive/";

/// The subject of the commit [`super::removal`] makes of uncommitted work.
pub(crate) const UNCOMMITTED_SUBJECT: &str = "krad: archive the uncommitted work of ";

/// Every archive of this machine's repository, then of each configured
/// host's (each newest first). A host that cannot be reached is `unavailable`.
pub(crate) async fn list_all(envs: &Environments) -> Result<Vec<ArchiveInfo>, ApiError> {
    let mut all = list(envs, None).await?;
    for host in envs.hosts.all() {
        all.extend(list(envs, Some(&host)).await?);
    }
    Ok(all)
}

/// Every archive of the repository here or on `host`, newest first.
pub(crate) async fn list(
    envs: &Environments,
    host: Option<&Arc<Host>>,
) -> Result<Vec<ArchiveInfo>, ApiError> {
    if let Some(host) = host {
        // One line when it is down or cannot be reached, before git runs.
        host.connect().await?;
    }
    let root = root_git(envs, host);
    let out = root
        .text(&[
            "for-each-ref",
            "--sort=-committerdate",
            "--format=%(refname)%00%(objectname)%00%(committerdate:iso-strict)%00%(contents:subject)",
            PREFIX,
        ])
        .await?;
    Ok(out
        .lines()
        .filter_map(|line| {
            let mut fields = line.splitn(4, '\0');
            let name = fields.next()?.strip_prefix(PREFIX)?.to_owned();
            let commit = fields.next()?.to_owned();
            let date = fields.next()?.to_owned();
            let subject = fields.next().unwrap_or_default().to_owned();
            Some(ArchiveInfo {
                uncommitted: subject.starts_with(UNCOMMITTED_SUBJECT),
                name,
                commit,
                date,
                subject,
                host: host.map(|h| h.name.clone()),
            })
        })
        .collect())
}

/// Makes the archive `name` (of the repository here or on `host`) the
/// environment `as_name` there: see the module's doc.
pub(crate) async fn restore(
    envs: &Environments,
    name: &str,
    as_name: &str,
    host: Option<Arc<Host>>,
) -> Result<EnvironmentRecord, ApiError> {
    if let Some(host) = &host {
        host.connect().await?;
    }
    let root = root_git(envs, host.as_ref());
    let reference = format!("{PREFIX}{name}");
    let Some(commit) = root.commit_of(&reference).await? else {
        let (place, list) = match &host {
            Some(host) => (
                format!(" on host {:?}", host.name),
                format!("krad archive ls --host {}", host.name),
            ),
            None => (String::new(), "krad archive ls".to_owned()),
        };
        return Err(ApiError::new(
            ErrorCode::NotFound,
            format!("no archive {name:?}{place} ({list} lists them)"),
        )
        .with_detail(json!({ "archive": name, "host": host.as_ref().map(|h| &h.name) })));
    };
    let subject = root
        .text(&["log", "-1", "--format=%s", commit.as_str()])
        .await?;
    let parent = root.commit_of(&format!("{commit}^")).await?;
    let uncommitted = subject.starts_with(UNCOMMITTED_SUBJECT) && parent.is_some();
    let mut record = create(
        envs,
        NewWorktree {
            name: as_name,
            branch: None,
            base_commit: commit.clone(),
            base_environment: MAIN.to_owned(),
            group: None,
            host,
        },
    )
    .await?;
    let git = env_git(envs, &record)?;
    if uncommitted {
        git.bytes(&["reset", "--quiet", "--mixed", "HEAD~1"])
            .await?;
    }
    let head = git.text(&["rev-parse", "HEAD"]).await?;
    let main_head = root.text(&["rev-parse", "HEAD"]).await?;
    record.base = root
        .text(&["merge-base", main_head.as_str(), head.as_str()])
        .await
        .unwrap_or(head);
    save(envs, record.clone())?;
    tracing::info!(archive = name, environment = as_name, commit = %commit, uncommitted, host = ?record.host, "archive restored");
    Ok(record)
}
