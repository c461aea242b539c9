//! Environments: `main` (the repository) and the git worktrees the app creates.
//!
//! * [`create`] — a worktree on its own branch from a base commit, with the
//!   files of `.worktreeinclude` copied in and the config's setup command run
//!   before any agent starts there.
//! * [`restore`] — after a restart (or a SIGKILL at any point), the records and
//!   the worktrees on disk are brought back in line, and every difference is
//!   reported rather than lost.
//! * [`close`] — refuses to drop work that exists nowhere else unless forced,
//!   and always records the tip under `refs/krad/archive/<name>` first.
//! * [`changes`] and [`variants`] — what an environment did, and variant groups.

pub mod changes;
pub mod variants;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use krad_bus::protocol::{
    ApiError, EnvironmentInfo, EnvironmentKind, EnvironmentStatus, ErrorCode, SetupInfo,
};
use serde_json::json;

use crate::git::Git;
use crate::hosts::Host;
use crate::profile::shell_quote;
use crate::state_file::{EnvironmentRecord, Phase};
use crate::{Core, MAIN};

/// How much of the setup command's output is kept.
const SETUP_OUTPUT_TAIL: usize = 4096;
/// The setup command's default time limit.
const SETUP_TIMEOUT: Duration = Duration::from_secs(600);

/// Where new worktrees go: `[worktrees] dir` (or `<repo>/.krad/worktrees`) here,
/// `<root>/.krad/worktrees` on a host.
pub(crate) fn worktrees_dir(core: &Core, host: Option<&Arc<Host>>) -> PathBuf {
    if let Some(host) = host {
        return Path::new(&host.config.root).join(".krad").join("worktrees");
    }
    match &core.settings.config.worktrees.dir {
        Some(dir) if dir.is_absolute() => dir.clone(),
        Some(dir) => core.settings.root.join(dir),
        None => core.settings.root.join(".krad").join("worktrees"),
    }
}

/// The host a record or a request names, from the config.
pub(crate) fn host(core: &Core, name: Option<&str>) -> Result<Option<Arc<Host>>, ApiError> {
    name.map(|n| core.hosts.get(n)).transpose()
}

/// git in the repository: main here, or the host's root.
pub(crate) fn root_git(core: &Core, host: Option<&Arc<Host>>) -> Git {
    match host {
        Some(host) => Git::on(Some(host), Path::new(&host.config.root)),
        None => Git::new(&core.settings.root),
    }
}

/// git in an environment's directory, where it lives.
pub(crate) fn env_git(core: &Core, record: &EnvironmentRecord) -> Result<Git, ApiError> {
    Ok(Git::on(
        host(core, record.host.as_deref())?.as_ref(),
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

/// The commit `base` names — an environment's HEAD, or a git ref — and the
/// environment it came from (main when it is a plain ref). On a host, refs are
/// the host repository's and environments must be on the same host.
pub(crate) async fn resolve_base(
    core: &Core,
    base: Option<&str>,
    host: Option<&Arc<Host>>,
) -> Result<(String, String), ApiError> {
    let root = root_git(core, host);
    let base = base.unwrap_or(MAIN);
    if base == MAIN {
        let commit = root.commit_of("HEAD").await?.ok_or_else(|| {
            ApiError::new(
                ErrorCode::Conflict,
                "the repository has no commit yet: commit something first",
            )
        })?;
        return Ok((commit, MAIN.to_owned()));
    }
    if let Some(env) = core.store.environment(base) {
        if env.host.as_deref() != host.map(|h| h.name.as_str()) {
            return Err(ApiError::new(
                ErrorCode::Invalid,
                format!("environment {base:?} is on another machine than the new worktree"),
            )
            .with_detail(json!({ "base": base })));
        }
        let commit = env_git(core, &env)?
            .commit_of("HEAD")
            .await?
            .ok_or_else(|| {
                ApiError::new(
                    ErrorCode::Failed,
                    format!("environment {base:?} has no HEAD"),
                )
            })?;
        return Ok((commit, base.to_owned()));
    }
    match root.commit_of(base).await? {
        Some(commit) => Ok((commit, MAIN.to_owned())),
        None => Err(ApiError::new(
            ErrorCode::NotFound,
            format!("{base:?} is neither an environment nor a git ref of the repository"),
        )
        .with_detail(json!({ "base": base }))),
    }
}

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
/// before git runs, so a crash at any point leaves something [`restore`] finds.
pub(crate) async fn create(
    core: &Arc<Core>,
    new: NewWorktree<'_>,
) -> Result<EnvironmentRecord, ApiError> {
    let host = new.host.as_ref();
    let root = root_git(core, host);
    let name = new.name;
    let branch = new
        .branch
        .map_or_else(|| format!("krad/{name}"), str::to_owned);
    let path = worktrees_dir(core, host).join(name);
    let record = {
        let _serial = core.environments_lock.lock().await;
        if name == MAIN || core.store.environment(name).is_some() {
            return Err(conflict(
                format!("environment {name:?} exists"),
                json!({ "environment": name }),
            ));
        }
        if !root
            .succeeds(&["check-ref-format", "--branch", branch.as_str()])
            .await?
        {
            return Err(ApiError::new(
                ErrorCode::Invalid,
                format!("{branch:?} is not a valid branch name"),
            )
            .with_detail(json!({ "branch": branch })));
        }
        let reference = format!("refs/heads/{branch}");
        if root
            .succeeds(&["show-ref", "--verify", "--quiet", reference.as_str()])
            .await?
        {
            return Err(conflict(
                format!("branch {branch:?} exists"),
                json!({ "branch": branch }),
            ));
        }
        if Git::on(host, &path).dir_exists().await {
            return Err(conflict(
                format!(
                    "{} exists; remove it or choose another name",
                    path.display()
                ),
                json!({ "path": path }),
            ));
        }
        prepare_worktrees_dir(core, host).await?;
        let record = EnvironmentRecord {
            name: name.to_owned(),
            path: path.clone(),
            branch: branch.clone(),
            base: new.base_commit.clone(),
            base_environment: new.base_environment,
            host: host.map(|h| h.name.clone()),
            group: new.group.as_ref().map(|g| g.0.clone()),
            variant: new.group.as_ref().map(|g| g.1),
            phase: Phase::Creating,
            setup: None,
        };
        save(core, record.clone())?;
        let path_arg = path.display().to_string();
        let added = root
            .bytes(&[
                "worktree",
                "add",
                "--quiet",
                "-b",
                branch.as_str(),
                path_arg.as_str(),
                new.base_commit.as_str(),
            ])
            .await;
        if let Err(e) = added {
            let _ = core.store.remove_environment(name);
            return Err(e.into());
        }
        record
    };
    copy_worktree_include(&root, &path).await;
    let record = run_setup(core, record).await?;
    tracing::info!(environment = name, branch = %record.branch, host = ?record.host, "worktree created");
    Ok(record)
}

fn save(core: &Core, record: EnvironmentRecord) -> Result<(), ApiError> {
    core.store.put_environment(record).map_err(|e| {
        ApiError::new(
            ErrorCode::Failed,
            format!("cannot record the environment: {e}"),
        )
    })?;
    core.environments_changed.send_modify(|n| *n += 1);
    Ok(())
}

/// Makes the worktrees directory and keeps it out of `git status` through the
/// repository's own `.git/info/exclude` (never the user's `.gitignore`).
async fn prepare_worktrees_dir(core: &Core, host: Option<&Arc<Host>>) -> Result<(), ApiError> {
    let dir = worktrees_dir(core, host);
    let root_dir = match host {
        Some(host) => PathBuf::from(&host.config.root),
        None => core.settings.root.clone(),
    };
    let root = root_git(core, host);
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
    if let Some(host) = host {
        let mut script = format!("mkdir -p {}", shell_quote(&dir.display().to_string()));
        if let Some(line) = &line {
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
        return Ok(());
    }
    std::fs::create_dir_all(&dir).map_err(|e| {
        ApiError::new(
            ErrorCode::Failed,
            format!("cannot create {}: {e}", dir.display()),
        )
    })?;
    let Some(line) = line else {
        return Ok(());
    };
    let current = std::fs::read_to_string(&exclude).unwrap_or_default();
    if !current.lines().any(|l| l.trim() == line) {
        if let Some(parent) = exclude.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        let mut text = current;
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!("# krad worktrees\n{line}\n"));
        std::fs::write(&exclude, text).map_err(|e| {
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
    if let Some(host) = root.host() {
        let mut script = format!("cd {}", shell_quote(&host.config.root));
        for file in &files {
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
        return;
    }
    let root_dir = root.dir().to_path_buf();
    for relative in files {
        let target = worktree.join(&relative);
        if let Some(parent) = target.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        if let Err(e) = std::fs::copy(root_dir.join(&relative), &target) {
            tracing::warn!("cannot copy {relative} into the worktree: {e}");
        }
    }
}

/// Runs the config's setup command in a new worktree, recording its outcome.
async fn run_setup(
    core: &Arc<Core>,
    mut record: EnvironmentRecord,
) -> Result<EnvironmentRecord, ApiError> {
    let Some(command) = core.settings.config.worktrees.setup.clone() else {
        record.phase = Phase::Ready;
        save(core, record.clone())?;
        return Ok(record);
    };
    record.phase = Phase::SettingUp;
    record.setup = Some(SetupInfo {
        command: command.clone(),
        exit_code: None,
        output: String::new(),
    });
    save(core, record.clone())?;
    let limit = core
        .settings
        .config
        .worktrees
        .setup_timeout_secs
        .map_or(SETUP_TIMEOUT, Duration::from_secs);
    let host = host(core, record.host.as_deref())?;
    let (exit_code, output) = match &host {
        Some(host) => {
            let script = format!(
                "cd {} && KRAD_ADE_ENVIRONMENT={} sh -c {} 2>&1",
                shell_quote(&record.path.display().to_string()),
                shell_quote(&record.name),
                shell_quote(&command)
            );
            match tokio::time::timeout(limit, host.run(&script, None)).await {
                Ok(Ok((code, out, _))) => (code, String::from_utf8_lossy(&out).into_owned()),
                Ok(Err(e)) => (None, e.message),
                Err(_) => (
                    None,
                    format!(
                        "the setup command did not finish within {} s",
                        limit.as_secs()
                    ),
                ),
            }
        }
        None => run_local_setup(&record, &command, limit).await,
    };
    record.phase = if exit_code == Some(0) {
        Phase::Ready
    } else {
        Phase::SetupFailed
    };
    record.setup = Some(SetupInfo {
        command,
        exit_code,
        output: tail(&output, SETUP_OUTPUT_TAIL),
    });
    save(core, record.clone())?;
    Ok(record)
}

async fn run_local_setup(
    record: &EnvironmentRecord,
    command: &str,
    limit: Duration,
) -> (Option<i32>, String) {
    let child = tokio::process::Command::new("sh")
        .args(["-c", command])
        .current_dir(&record.path)
        .env("KRAD_ADE_ENVIRONMENT", &record.name)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    match child {
        Err(e) => (None, format!("cannot run the setup command: {e}")),
        Ok(child) => match tokio::time::timeout(limit, child.wait_with_output()).await {
            Ok(Ok(out)) => {
                let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
                text.push_str(&String::from_utf8_lossy(&out.stderr));
                (out.status.code(), text)
            }
            Ok(Err(e)) => (None, format!("the setup command failed to run: {e}")),
            Err(_) => (
                None,
                format!(
                    "the setup command did not finish within {} s",
                    limit.as_secs()
                ),
            ),
        },
    }
}

fn tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}

/// An environment for an agent: its directory and host. Waits while its setup
/// runs; refuses one whose setup failed or whose directory is gone.
pub(crate) async fn ready(core: &Core, name: &str) -> Result<(PathBuf, Option<String>), ApiError> {
    if name == MAIN {
        return Ok((core.settings.root.clone(), None));
    }
    let mut changes = core.environments_changed.subscribe();
    loop {
        changes.borrow_and_update();
        let record = core
            .store
            .environment(name)
            .ok_or_else(|| not_found_environment(name))?;
        if record.host.is_none() && !record.path.is_dir() && record.phase != Phase::Creating {
            return Err(conflict(
                format!(
                    "the directory of environment {name:?} is gone ({})",
                    record.path.display()
                ),
                json!({ "environment": name }),
            ));
        }
        match record.phase {
            Phase::Ready => return Ok((record.path, record.host)),
            Phase::SetupFailed => {
                let output = record.setup.map(|s| s.output).unwrap_or_default();
                return Err(conflict(
                    format!(
                        "the setup command failed in environment {name:?}: {}",
                        output.trim()
                    ),
                    json!({ "environment": name }),
                ));
            }
            Phase::Creating | Phase::SettingUp => {
                if changes.changed().await.is_err() {
                    return Err(not_found_environment(name));
                }
            }
        }
    }
}

/// What Environments shows of `main`.
pub(crate) async fn main_info(core: &Core) -> EnvironmentInfo {
    let branch = Git::new(&core.settings.root)
        .text(&["symbolic-ref", "--short", "-q", "HEAD"])
        .await
        .ok()
        .filter(|b| !b.is_empty());
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
    }
}

/// What Environments shows of a worktree.
pub(crate) fn info(core: &Core, record: &EnvironmentRecord) -> EnvironmentInfo {
    let gone = record.host.is_none() && !record.path.is_dir() && record.phase != Phase::Creating;
    let status = if gone {
        EnvironmentStatus::Missing
    } else {
        match record.phase {
            Phase::Creating | Phase::SettingUp => EnvironmentStatus::SettingUp,
            Phase::Ready => EnvironmentStatus::Ready,
            Phase::SetupFailed => EnvironmentStatus::SetupFailed,
        }
    };
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
    }
}

/// Brings the records and the worktrees on disk back in line after a start:
/// work interrupted by a crash is finished or reported, and a worktree of ours
/// that no record names is adopted, so that none is ever orphaned silently.
pub(crate) async fn restore(core: &Arc<Core>) {
    for mut record in core.store.environments() {
        match record.phase {
            Phase::Creating if record.host.is_none() && !record.path.is_dir() => {
                tracing::warn!(environment = %record.name, "worktree creation was interrupted before git ran; forgetting it");
                let _ = core.store.remove_environment(&record.name);
            }
            Phase::Creating => {
                tracing::warn!(environment = %record.name, "worktree creation was interrupted; adopting it");
                record.phase = Phase::Ready;
                let _ = save(core, record);
            }
            Phase::SettingUp => {
                tracing::warn!(environment = %record.name, "its setup was interrupted by a restart");
                record.phase = Phase::SetupFailed;
                if let Some(setup) = &mut record.setup {
                    setup
                        .output
                        .push_str("\n[interrupted: the app stopped while the setup ran]");
                }
                let _ = save(core, record);
            }
            Phase::Ready | Phase::SetupFailed => {
                if record.host.is_none() && !record.path.is_dir() {
                    tracing::warn!(environment = %record.name, path = %record.path.display(), "worktree directory is missing");
                }
            }
        }
    }
    adopt_orphans(core).await;
}

/// Adopts worktrees under our directory that no record names.
async fn adopt_orphans(core: &Arc<Core>) {
    let root = Git::new(&core.settings.root);
    let Ok(list) = root.text(&["worktree", "list", "--porcelain"]).await else {
        return;
    };
    let dir = worktrees_dir(core, None);
    let known: Vec<PathBuf> = core
        .store
        .environments()
        .into_iter()
        .map(|r| r.path)
        .collect();
    let Ok(main_head) = root.text(&["rev-parse", "HEAD"]).await else {
        return;
    };
    for block in list.split("\n\n") {
        let mut path = None;
        let mut branch = None;
        for line in block.lines() {
            if let Some(p) = line.strip_prefix("worktree ") {
                path = Some(PathBuf::from(p));
            } else if let Some(b) = line.strip_prefix("branch refs/heads/") {
                branch = Some(b.to_owned());
            }
        }
        let (Some(path), Some(branch)) = (path, branch) else {
            continue;
        };
        if path.parent() != Some(dir.as_path()) || known.contains(&path) {
            continue;
        }
        let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
            continue;
        };
        if core.store.environment(&name).is_some() || name == MAIN {
            continue;
        }
        let base = root
            .text(&["merge-base", main_head.as_str(), branch.as_str()])
            .await
            .unwrap_or_else(|_| main_head.clone());
        tracing::warn!(environment = %name, "adopting a worktree no record named");
        let _ = save(
            core,
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
            },
        );
    }
}

/// Closes a worktree environment: its terminals, then — after recording its tip
/// under `refs/krad/archive/` — its worktree and branch. Work that exists
/// nowhere else is refused with `conflict` unless `force`.
pub(crate) async fn close(core: &Arc<Core>, name: &str, force: bool) -> Result<String, ApiError> {
    if name == MAIN {
        return Err(
            ApiError::new(ErrorCode::Invalid, "the main environment cannot be closed")
                .with_detail(json!({ "environment": MAIN })),
        );
    }
    let record = core
        .store
        .environment(name)
        .ok_or_else(|| not_found_environment(name))?;
    let host = host(core, record.host.as_deref())?;
    let root = root_git(core, host.as_ref());
    let worktree = env_git(core, &record)?;
    let present = worktree.dir_exists().await;
    if present && !force {
        let dirty = worktree.dirty_files(true).await?;
        let unmerged = unmerged_commits(&root, &record.branch).await?;
        if !dirty.is_empty() || unmerged > 0 {
            return Err(conflict(
                format!(
                    "environment {name:?} has work that exists nowhere else ({} uncommitted file(s), {unmerged} unmerged commit(s)); \
                     merge it, or close with force (it is archived under refs/krad/archive/ first)",
                    dirty.len()
                ),
                json!({ "environment": name, "files": dirty, "commits": unmerged }),
            ));
        }
    }
    for terminal in core.store.terminals_of(name) {
        crate::requests::close::close_terminal(core, terminal).await?;
    }
    let archive = archive(&root, &worktree, &record, present).await?;
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
    core.store
        .remove_environment(name)
        .map_err(|e| ApiError::new(ErrorCode::Failed, format!("cannot record the closing: {e}")))?;
    core.environments_changed.send_modify(|n| *n += 1);
    tracing::info!(environment = name, archive = %archive, "environment closed");
    Ok(archive)
}

/// Commits on `branch` that no other branch has.
pub(crate) async fn unmerged_commits(root: &Git, branch: &str) -> Result<u64, ApiError> {
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
        commit_all(
            worktree,
            &format!("krad: archive the uncommitted work of {}", record.name),
        )
        .await?
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
