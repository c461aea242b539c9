//! What an app that died (SIGKILL, a crash) left behind on this machine, cleaned
//! by the next app once it has taken its terminals back:
//!
//! * the token folders of its terminals (`terminals-<pid>` beside api.json,
//!   shared by the apps of every repository: each folder names its own in a
//!   file, [`mark_token_folder`]) — only this repository's, and not those that
//!   terminals taken back still read their token from (those go when this app
//!   closes its terminals at its stop: [`token_folders_at_stop`]);
//! * its SSH control masters, asked to exit (each still holds the old reverse
//!   forward on its host), and their control sockets;
//! * the temp files of its atomic writes (`.<name>.<pid>.<n>.tmp`, see
//!   [`krad_bus::private_file`]) in the state directory;
//! * the private homes of its sandboxed terminals that were not taken back
//!   (`<state dir>/sandbox/<id>`, with the CLIs' credentials copied in), and
//!   their sockets (`<id>.in`, `<id>.net`) — and the bubblewrap
//!   processes still naming them (one killed as it set its sandbox up
//!   leaves its child waiting forever).
//!
//! Only what names a process that is gone, never this app's or a live one's.
//! (The control masters go before the terminals on SSH hosts are taken back,
//! see [`end_dead_masters`].)
//! (Token folders on SSH hosts go when the link comes up: [`crate::hosts`].)

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use krad_bus::api_json::pid_alive;

use crate::config::Settings;
use crate::hosts::{control_dir, control_owner};
use crate::store::Store;

/// How long a dead app's control master has to exit when asked.
const MASTER_EXIT: Duration = Duration::from_secs(3);

/// Cleans what dead apps left; call after the terminals were taken back.
pub(crate) async fn clean(settings: &Settings, store: &Store) {
    token_folders(settings, store);
    sandbox_homes(settings, store);
    temp_files(&settings.state_dir, 3);
    control_masters(&control_dir()).await;
}

/// Removes dead apps' temp files under `dir`, `depth` levels down.
fn temp_files(dir: &Path, depth: u32) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() && depth > 0 {
            temp_files(&path, depth - 1);
            continue;
        }
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(temp_owner) else {
            continue;
        };
        if pid != std::process::id() && !pid_alive(pid) && std::fs::remove_file(&path).is_ok() {
            tracing::info!(
                pid,
                "removed a temp file of an app that is gone: {}",
                path.display()
            );
        }
    }
}

/// The pid in a temp file's name, `.<name>.<pid>.<n>.tmp`.
fn temp_owner(name: &str) -> Option<u32> {
    let stem = name.strip_prefix('.')?.strip_suffix(".tmp")?;
    let mut parts = stem.rsplitn(3, '.');
    parts.next()?.parse::<u64>().ok()?;
    let pid = parts.next()?.parse().ok()?;
    parts.next().filter(|n| !n.is_empty())?;
    Some(pid)
}

/// The pid in `prefix<pid>`, when it names a process that is gone (not us).
fn dead_owner(name: &str, prefix: &str) -> Option<u32> {
    let pid: u32 = name.strip_prefix(prefix)?.parse().ok()?;
    (pid != std::process::id() && !pid_alive(pid)).then_some(pid)
}

/// The file in a token folder that names the repository of its app (its
/// state directory): the folders of every repository's apps are side by side.
const REPOSITORY_MARK: &str = "repository";

/// Writes, in this app's token folder, which repository it serves.
pub(crate) fn mark_token_folder(settings: &Settings) -> Result<(), String> {
    let mark = settings.token_dir.join(REPOSITORY_MARK);
    let state_dir = settings.state_dir.display().to_string();
    krad_bus::private_file::write(&mark, state_dir.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", mark.display()))
}

/// Whether a token folder is one of this repository's apps'. A folder
/// without a mark was left by an app older than the marks: taken as ours,
/// as it was then.
fn of_this_repository(folder: &Path, settings: &Settings) -> bool {
    match std::fs::read(folder.join(REPOSITORY_MARK)) {
        Ok(named) => named == settings.state_dir.display().to_string().as_bytes(),
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

fn token_folders(settings: &Settings, store: &Store) {
    // Terminals taken back keep the token file they were started with.
    let in_use: BTreeSet<PathBuf> = store
        .token_files()
        .iter()
        .filter_map(|file| file.parent().map(Path::to_path_buf))
        .collect();
    dead_token_folders(settings, &in_use);
}

/// Removes the token folders of this repository's dead apps that terminals
/// taken back were reading: called once this app closed its terminals.
pub(crate) fn token_folders_at_stop(settings: &Settings) {
    dead_token_folders(settings, &BTreeSet::new());
}

/// Removes the token folders of this repository's dead apps, but those in
/// `in_use`.
fn dead_token_folders(settings: &Settings, in_use: &BTreeSet<PathBuf>) {
    let Some(parent) = settings.token_dir.parent() else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| dead_owner(n, "terminals-")) else {
            continue;
        };
        if in_use.contains(&path) || !of_this_repository(&path, settings) {
            continue;
        }
        match std::fs::remove_dir_all(&path) {
            Ok(()) => tracing::info!(pid, "removed the token folder of an app that is gone"),
            Err(e) => tracing::warn!(pid, "cannot remove {}: {e}", path.display()),
        }
    }
}

/// Removes the sandboxes' private homes of terminals the store does not
/// have (a closed terminal's goes at its Close; these are a dead app's).
fn sandbox_homes(settings: &Settings, store: &Store) {
    let Ok(entries) = std::fs::read_dir(settings.state_dir.join("sandbox")) else {
        return;
    };
    for entry in entries.flatten() {
        // `<id>` (the home), `<id>.in` (the inbound socket's folder),
        // `<id>.net` (the allowlist's socket and list), `<id>.host` (it runs
        // contained on an SSH host), `<id>.check` (its variant's checks'
        // homes).
        let Some(id) = entry.file_name().to_str().and_then(|n| {
            let id = n
                .strip_suffix(".in")
                .or_else(|| n.strip_suffix(".net"))
                .or_else(|| n.strip_suffix(".host"))
                .or_else(|| n.strip_suffix(".check"))
                .unwrap_or(n);
            id.parse::<u64>().ok()
        }) else {
            continue;
        };
        if store.record(id).is_none() {
            crate::sandbox::end_leftover_processes(&settings.state_dir, id);
            let path = entry.path();
            let _ = std::fs::remove_dir_all(&path).or_else(|_| std::fs::remove_file(&path));
        }
    }
}

/// Asks the control masters dead apps left to exit now, before this app opens
/// its own links: each holds its old reverse forward, whose port on the host
/// the terminals that outlived the app were told.
pub(crate) async fn end_dead_masters() {
    control_masters(&control_dir()).await;
}

async fn control_masters(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let socket = entry.path();
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(control_owner) else {
            continue;
        };
        if pid == std::process::id() || pid_alive(pid) {
            continue;
        }
        // The destination is a placeholder: with -S, ssh talks to the master only.
        let asked = tokio::process::Command::new("ssh")
            .arg("-S")
            .arg(&socket)
            .args(["-O", "exit", "krad-leftover"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .status();
        let exited = matches!(
            tokio::time::timeout(MASTER_EXIT, asked).await,
            Ok(Ok(status)) if status.success()
        );
        let _ = std::fs::remove_file(&socket);
        tracing::info!(
            pid,
            master_exited = exited,
            "cleaned the ssh control connection of an app that is gone"
        );
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_dead_app_s_temp_files_go_and_nothing_else() {
        assert_eq!(temp_owner(".state.json.4242.7.tmp"), Some(4242));
        assert_eq!(temp_owner("state.json.4242.7.tmp"), None);
        assert_eq!(temp_owner(".x.tmp"), None);
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("hooks/12");
        std::fs::create_dir_all(&nested).unwrap();
        // No process has pid 4194304 (above Linux's largest).
        let dead = nested.join(".claude-settings.json.4194304.0.tmp");
        let ours = nested.join(format!(
            ".claude-settings.json.{}.0.tmp",
            std::process::id()
        ));
        let other = nested.join("claude-settings.json");
        for file in [&dead, &ours, &other] {
            std::fs::write(file, "x").unwrap();
        }
        temp_files(dir.path(), 3);
        assert!(!dead.exists());
        assert!(ours.exists() && other.exists());
    }
}
