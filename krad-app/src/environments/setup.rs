//! Setup: the config's `[worktrees] setup` command, run in a new worktree (here
//! or on its host) before any agent starts there, with its outcome recorded; and
//! [`ready`], where a Spawn waits for it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use krad_bus::protocol::{ApiError, SetupInfo};
use serde_json::json;

use super::Environments;
use super::{conflict, directory_gone, gone, host, not_found_environment, save};
use crate::hosts::Host;
use crate::profile::shell_quote;
use crate::records::{EnvironmentRecord, Phase};

/// How much of the setup command's output is kept.
const SETUP_OUTPUT_TAIL: usize = 4096;
/// The setup command's default time limit.
const SETUP_TIMEOUT: Duration = Duration::from_secs(600);

/// Runs the config's setup command in a new worktree, recording its outcome.
pub(crate) async fn run_setup(
    envs: &Environments,
    mut record: EnvironmentRecord,
) -> Result<EnvironmentRecord, ApiError> {
    let Some(command) = envs.settings.config.worktrees.setup.clone() else {
        record.phase = Phase::Ready;
        save(envs, record.clone())?;
        return Ok(record);
    };
    record.phase = Phase::SettingUp;
    record.setup = Some(SetupInfo {
        command: command.clone(),
        exit_code: None,
        output: String::new(),
    });
    save(envs, record.clone())?;
    let (exit_code, output) = run_in(envs, &record, &command, "setup").await?;
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
    save(envs, record.clone())?;
    Ok(record)
}

/// The config's teardown command, run in a worktree before it is removed (its
/// services stopped, say), with the setup's time limit: its exit code and the
/// tail of its output, or `None` when there is none or the worktree is gone.
pub(crate) async fn run_teardown(
    envs: &Environments,
    record: &EnvironmentRecord,
) -> Result<Option<(Option<i32>, String)>, ApiError> {
    let Some(command) = envs.settings.config.worktrees.teardown.clone() else {
        return Ok(None);
    };
    if record.host.is_none() && !record.path.is_dir() {
        return Ok(None);
    }
    let (exit_code, output) = run_in(envs, record, &command, "teardown").await?;
    Ok(Some((exit_code, tail(&output, SETUP_OUTPUT_TAIL))))
}

/// Runs a setup or teardown command (`what`) in a worktree, here or on its
/// host, within `setup_timeout_secs`: its exit code and output.
async fn run_in(
    envs: &Environments,
    record: &EnvironmentRecord,
    command: &str,
    what: &str,
) -> Result<(Option<i32>, String), ApiError> {
    let limit = envs
        .settings
        .config
        .worktrees
        .setup_timeout_secs
        .map_or(SETUP_TIMEOUT, Duration::from_secs);
    Ok(match host(envs, record.host.as_deref())? {
        Some(host) => {
            let ports = super::ports::block(envs, &record.name);
            run_remote(&host, record, command, &ports, limit, what).await
        }
        None => {
            let mut env = Vec::new();
            super::ports::add_env(&mut env, &super::ports::block(envs, &record.name));
            run_local(record, command, &env, limit, what).await
        }
    })
}

/// A setup or teardown command (`what`) on the worktree's SSH host: its exit
/// code and output.
async fn run_remote(
    host: &Arc<Host>,
    record: &EnvironmentRecord,
    command: &str,
    ports: &[u16],
    limit: Duration,
    what: &str,
) -> (Option<i32>, String) {
    let script = format!(
        "cd {} && {}KRAD_ADE_ENVIRONMENT={} sh -c {} 2>&1",
        shell_quote(&record.path.display().to_string()),
        super::ports::shell_exports(ports),
        shell_quote(&record.name),
        shell_quote(command)
    );
    match tokio::time::timeout(limit, host.run(&script, None)).await {
        Ok(Ok((code, out, _))) => (code, String::from_utf8_lossy(&out).into_owned()),
        Ok(Err(e)) => (None, e.message),
        Err(_) => (None, timed_out(what, limit)),
    }
}

/// A setup or teardown command (`what`) on this machine: its exit code and output.
async fn run_local(
    record: &EnvironmentRecord,
    command: &str,
    env: &[(String, String)],
    limit: Duration,
    what: &str,
) -> (Option<i32>, String) {
    let child = tokio::process::Command::new("sh")
        .args(["-c", command])
        .current_dir(&record.path)
        .env("KRAD_ADE_ENVIRONMENT", &record.name)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    match child {
        Err(e) => (None, format!("cannot run the {what} command: {e}")),
        Ok(child) => match tokio::time::timeout(limit, child.wait_with_output()).await {
            Ok(Ok(out)) => {
                let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
                text.push_str(&String::from_utf8_lossy(&out.stderr));
                (out.status.code(), text)
            }
            Ok(Err(e)) => (None, format!("the {what} command failed to run: {e}")),
            Err(_) => (None, timed_out(what, limit)),
        },
    }
}

fn timed_out(what: &str, limit: Duration) -> String {
    format!(
        "the {what} command did not finish within {} s",
        limit.as_secs()
    )
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

/// A worktree environment for an agent: its directory and host. Waits while
/// its setup runs; refuses one whose setup failed or whose directory is gone.
pub(super) async fn ready(
    envs: &Environments,
    name: &str,
) -> Result<(PathBuf, Option<String>), ApiError> {
    let mut changes = envs.changed.subscribe();
    loop {
        changes.borrow_and_update();
        let record = envs
            .store
            .environment(name)
            .ok_or_else(|| not_found_environment(name))?;
        if directory_gone(&record) {
            return Err(gone(name, &record));
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
