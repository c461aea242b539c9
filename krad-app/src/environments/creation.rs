//! Creation: a worktree environment on its own branch from a base commit, in the
//! worktrees directory (kept out of `git status`), with the untracked files
//! `.worktreeinclude` names copied in; then its setup runs (see [`super::setup`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use krad_bus::protocol::{ApiError, ErrorCode};

use super::Environments;
use super::naming::{branch_for, check_available};
use super::ports;
use super::setup::run_setup;
use super::{root_git, worktrees_dir};
use crate::git::Git;
use crate::hosts::Host;
use crate::profile::shell_quote;
use crate::records::{EnvironmentRecord, Phase};

/// Options of a new worktree.
pub(crate) struct NewWorktree<'a> {
    pub name: &'a str,
    pub branch: Option<&'a str>,
    pub base_commit: String,
    pub base_environment: String,
    pub group: Option<(String, u32)>,
    pub host: Option<Arc<Host>>,
}

/// Creates a worktree environment and runs its setup. The record is persisted
/// before git runs, so a crash at any point leaves something
/// [`super::restore`] finds.
pub(crate) async fn create(
    envs: &Environments,
    new: NewWorktree<'_>,
) -> Result<EnvironmentRecord, ApiError> {
    let host = new.host.as_ref();
    let root = root_git(envs, host);
    let name = new.name;
    let branch = branch_for(name, new.branch);
    let path = worktrees_dir(envs, host).join(name);
    let record = {
        let _serial = envs.lock.lock().await;
        check_available(envs, &root, host, name, &branch, &path).await?;
        prepare_worktrees_dir(envs, host).await?;
        let record = EnvironmentRecord {
            name: name.to_owned(),
            path: path.clone(),
            branch,
            base: new.base_commit,
            base_environment: new.base_environment,
            host: host.map(|h| h.name.clone()),
            group: new.group.as_ref().map(|g| g.0.clone()),
            variant: new.group.as_ref().map(|g| g.1),
            phase: Phase::Creating,
            setup: None,
            created_at: Some(crate::store::now_rfc3339()),
        };
        let block = ports::allocate(envs, host).await?;
        let saved = envs
            .store
            .put_environment_with(record.clone(), |tx| ports::put(tx, name, &block));
        envs.port_blocks.forget(name);
        if let Err(e) = saved {
            ports::give_back(envs, &block).await;
            return Err(ApiError::new(
                ErrorCode::Failed,
                format!("cannot record the environment: {e}"),
            ));
        }
        envs.changed.send_modify(|n| *n += 1);
        if let Err(e) = add_worktree(envs, &root, &record).await {
            ports::release(envs, name).await;
            return Err(e);
        }
        record
    };
    copy_worktree_include(&root, &path).await;
    let record = run_setup(envs, record).await?;
    tracing::info!(environment = name, branch = %record.branch, host = ?record.host, "worktree created");
    Ok(record)
}

/// `git worktree add` for a saved record; the record is forgotten if git fails.
async fn add_worktree(
    envs: &Environments,
    root: &Git,
    record: &EnvironmentRecord,
) -> Result<(), ApiError> {
    let path_arg = record.path.display().to_string();
    let added = root
        .bytes(&[
            "worktree",
            "add",
            "--quiet",
            "-b",
            record.branch.as_str(),
            path_arg.as_str(),
            record.base.as_str(),
        ])
        .await;
    if let Err(e) = added {
        let _ = envs.store.remove_environment(&record.name);
        return Err(e.into());
    }
    Ok(())
}

/// Makes the worktrees directory and keeps it out of `git status` through the
/// repository's own `.git/info/exclude` (never the user's `.gitignore`).
async fn prepare_worktrees_dir(
    envs: &Environments,
    host: Option<&Arc<Host>>,
) -> Result<(), ApiError> {
    let dir = worktrees_dir(envs, host);
    let root_dir = match host {
        Some(host) => PathBuf::from(&host.config.root),
        None => envs.settings.root.clone(),
    };
    let root = root_git(envs, host);
    let exclude = PathBuf::from(
        root.text(&[
            "rev-parse",
            "--path-format=absolute",
            "--git-path",
            "info/exclude",
        ])
        .await?,
    );
    let line = dir
        .strip_prefix(&root_dir)
        .ok()
        .map(|r| format!("/{}/", r.display()));
    match host {
        Some(host) => prepare_remote_dir(host, &dir, &exclude, line.as_deref()).await,
        None => prepare_local_dir(&dir, &exclude, line.as_deref()),
    }
}

/// [`prepare_worktrees_dir`] on an SSH host, in one shell command.
async fn prepare_remote_dir(
    host: &Arc<Host>,
    dir: &Path,
    exclude: &Path,
    line: Option<&str>,
) -> Result<(), ApiError> {
    let mut script = format!("mkdir -p {}", shell_quote(&dir.display().to_string()));
    if let Some(line) = line {
        let (file, line) = (
            shell_quote(&exclude.display().to_string()),
            shell_quote(line),
        );
        script.push_str(&format!(
            " && {{ grep -qxF {line} {file} 2>/dev/null || {{ mkdir -p \"$(dirname {file})\"; printf '# krad worktrees\\n%s\\n' {line} >> {file}; }}; }}"
        ));
    }
    let (code, _, err) = host.run(&script, None).await?;
    if code != Some(0) {
        return Err(ApiError::new(
            ErrorCode::Failed,
            format!(
                "cannot prepare {} on host {:?}: {}",
                dir.display(),
                host.name,
                String::from_utf8_lossy(&err).trim()
            ),
        ));
    }
    Ok(())
}

/// [`prepare_worktrees_dir`] on this machine.
fn prepare_local_dir(dir: &Path, exclude: &Path, line: Option<&str>) -> Result<(), ApiError> {
    std::fs::create_dir_all(dir).map_err(|e| {
        ApiError::new(
            ErrorCode::Failed,
            format!("cannot create {}: {e}", dir.display()),
        )
    })?;
    let Some(line) = line else {
        return Ok(());
    };
    let current = std::fs::read_to_string(exclude).unwrap_or_default();
    if !current.lines().any(|l| l.trim() == line) {
        if let Some(parent) = exclude.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        let mut text = current;
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!("# krad worktrees\n{line}\n"));
        std::fs::write(exclude, text).map_err(|e| {
            ApiError::new(
                ErrorCode::Failed,
                format!("cannot update {}: {e}", exclude.display()),
            )
        })?;
    }
    Ok(())
}

/// Copies the untracked files `.worktreeinclude` names (gitignore patterns, such
/// as `.env`) from the repository into the new worktree.
async fn copy_worktree_include(root: &Git, worktree: &Path) {
    let listed = root
        .bytes(&[
            "ls-files",
            "--others",
            "--ignored",
            "--exclude-from=.worktreeinclude",
            "-z",
        ])
        .await;
    let files = match listed {
        Ok(files) => files,
        // No .worktreeinclude (git says so), or it cannot be read: nothing to copy.
        Err(_) => return,
    };
    let files: Vec<String> = files
        .split(|&b| b == 0)
        .filter(|f| !f.is_empty())
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect();
    if files.is_empty() {
        return;
    }
    match root.host() {
        Some(host) => copy_on_host(host, &files, worktree).await,
        None => copy_here(root.dir(), &files, worktree),
    }
}

/// Copies `files` (relative to the host's repository) into a worktree there.
async fn copy_on_host(host: &Arc<Host>, files: &[String], worktree: &Path) {
    let mut script = format!("cd {}", shell_quote(&host.config.root));
    for file in files {
        script.push_str(&format!(
            " && cp --parents -p -- {} {}",
            shell_quote(file),
            shell_quote(&worktree.display().to_string())
        ));
    }
    if let Err(e) = host.run(&script, None).await {
        tracing::warn!(
            "cannot copy the files of .worktreeinclude on host {}: {e}",
            host.name
        );
    }
}

/// Copies `files` (relative to `root_dir`) into a worktree on this machine.
fn copy_here(root_dir: &Path, files: &[String], worktree: &Path) {
    for relative in files {
        let target = worktree.join(relative);
        if let Some(parent) = target.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        if let Err(e) = std::fs::copy(root_dir.join(relative), &target) {
            tracing::warn!("cannot copy {relative} into the worktree: {e}");
        }
    }
}
