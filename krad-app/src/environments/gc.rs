//! Collecting environments (CollectEnvironments, `krad gc`): the worktree
//! environments that match every selector given — merged (the notion Close
//! refuses by, merged by content included), older than an age — are archived
//! under `refs/krad/archive/` and removed as a forced Close removes them,
//! except what is still in use:
//!
//! * an environment with a live terminal (one whose program has not exited, on
//!   any host) is kept, whatever the selectors, until its terminals are closed;
//! * a local environment in which another program has its working directory
//!   (`/proc/*/cwd`) is kept;
//! * one whose teardown command fails is kept, as Close without force keeps it.
//!
//! Each removal records a Close intent first, so a crash midway is finished
//! at the next start like an interrupted Close.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use krad_bus::protocol::{
    AgentState, ApiError, CollectAction, CollectedEnvironment, CollectedInfo, KeptBecause,
    LiveTerminal, ProcessInside, counted,
};
use krad_bus::request::collect_environments::CollectEnvironments;
use krad_bus::server::CallContext;

use super::removal::{self, Removal};
use super::{CloseTerminals, Environments};
use super::{env_git, host, root_git};
use crate::intents::{self, Plan, Underway};
use crate::records::{EnvironmentRecord, Phase};

/// The longest command line shown for a process inside an environment.
const COMMAND_SHOWN: usize = 200;

/// Runs a CollectEnvironments: see the module's doc.
pub(crate) async fn collect(
    envs: &Environments,
    terminals: &impl CloseTerminals,
    ctx: &CallContext,
    request: &CollectEnvironments,
) -> Result<CollectedInfo, ApiError> {
    let dry_run = request.dry_run.unwrap_or(false);
    let older_than = request.older_than_secs.map(Duration::from_secs);
    let merged = request.merged.unwrap_or(false);
    let mut environments = Vec::new();
    for record in envs.store.environments() {
        let Some(mut entry) = select(envs, &record, merged, older_than).await else {
            continue;
        };
        if entry.action == CollectAction::Kept {
            environments.push(entry);
            continue;
        }
        entry.bytes = match envs.disk.get(&record.name) {
            Some(measured) => Some(measured.bytes),
            None => super::disk::measure(envs, &record).await,
        };
        // Checked right before the removal (which refuses live terminals
        // again, at the last moment).
        if let Some(kept) = in_use(envs, &record).await {
            environments.push(kept_as(entry, kept));
            continue;
        }
        if dry_run {
            entry.action = CollectAction::WouldRemove;
            environments.push(entry);
            continue;
        }
        environments.push(remove(envs, terminals, ctx, &record, entry).await);
    }
    let freed_bytes = environments
        .iter()
        .filter(|e| {
            matches!(
                e.action,
                CollectAction::Removed | CollectAction::WouldRemove
            )
        })
        .filter_map(|e| e.bytes)
        .sum();
    tracing::info!(
        dry_run,
        selected = environments.len(),
        freed_bytes,
        "environments collected"
    );
    Ok(CollectedInfo {
        dry_run,
        environments,
        freed_bytes,
    })
}

/// An environment that matches every selector, with why (or kept, when it
/// is not ready or whether it is merged cannot be told); `None` when it does
/// not match.
async fn select(
    envs: &Environments,
    record: &EnvironmentRecord,
    merged: bool,
    older_than: Option<Duration>,
) -> Option<CollectedEnvironment> {
    let created_at = super::disk::created_at(record);
    let mut reasons = Vec::new();
    if let Some(limit) = older_than {
        // An environment of unknown age is never old enough.
        let age = created_at
            .as_deref()
            .and_then(|at| humantime::parse_rfc3339_weak(at).ok())
            .map(|then| SystemTime::now().duration_since(then).unwrap_or_default())?;
        if age <= limit {
            return None;
        }
        reasons.push(format!(
            "created {} ago (older than {})",
            short(age),
            short(limit)
        ));
    }
    let mut entry = CollectedEnvironment {
        name: record.name.clone(),
        host: record.host.clone(),
        action: CollectAction::WouldRemove,
        kept: None,
        reason: String::new(),
        archive: None,
        bytes: envs.disk.get(&record.name).map(|m| m.bytes),
        created_at,
        terminals: Vec::new(),
        processes: Vec::new(),
    };
    if matches!(record.phase, Phase::Creating | Phase::SettingUp) {
        entry.reason = "it is still being created or set up".to_owned();
        return Some(kept_as(entry, (KeptBecause::NotReady, None)));
    }
    if merged {
        match merged_because(envs, record).await {
            Ok(Some(why)) => reasons.insert(0, format!("merged: {why}")),
            Ok(None) => return None,
            Err(e) => {
                entry.reason = format!("cannot tell whether it is merged: {}", e.message);
                return Some(kept_as(entry, (KeptBecause::Failed, None)));
            }
        }
    }
    entry.reason = reasons.join("; ");
    Some(entry)
}

/// Why an environment's work is merged (Close's notion), or `None` when it has
/// work that exists nowhere else.
async fn merged_because(
    envs: &Environments,
    record: &EnvironmentRecord,
) -> Result<Option<String>, ApiError> {
    let host = host(envs, record.host.as_deref())?;
    let root = root_git(envs, host.as_ref());
    let worktree = env_git(envs, record)?;
    let present = worktree.dir_exists().await;
    let work = removal::unique_work(envs, &root, &worktree, record, present).await?;
    if !work.dirty.is_empty() || work.unmerged > 0 {
        return Ok(None);
    }
    Ok(Some(work.merged.unwrap_or_else(|| {
        "every commit of its branch is in another branch, and it has no uncommitted files"
            .to_owned()
    })))
}

/// What keeps an environment: its live terminals, or (here) the processes
/// with their working directory inside it.
async fn in_use(
    envs: &Environments,
    record: &EnvironmentRecord,
) -> Option<(KeptBecause, Option<InUse>)> {
    let live: Vec<LiveTerminal> = envs
        .store
        .terminals_of(&record.name)
        .into_iter()
        .filter_map(|id| envs.store.record(id))
        .filter(|r| r.state != AgentState::Exited)
        .map(|r| LiveTerminal {
            terminal: r.terminal,
            name: r.name,
            profile: r.profile,
        })
        .collect();
    if !live.is_empty() {
        return Some((KeptBecause::LiveTerminals, Some(InUse::Terminals(live))));
    }
    if record.host.is_some() {
        return None;
    }
    let dir = record.path.clone();
    let inside = tokio::task::spawn_blocking(move || processes_inside(&dir))
        .await
        .unwrap_or_default();
    (!inside.is_empty()).then_some((KeptBecause::ProcessInside, Some(InUse::Processes(inside))))
}

/// What uses an environment.
enum InUse {
    Terminals(Vec<LiveTerminal>),
    Processes(Vec<ProcessInside>),
}

/// The entry marked kept, with the reason in words.
fn kept_as(
    mut entry: CollectedEnvironment,
    (why, what): (KeptBecause, Option<InUse>),
) -> CollectedEnvironment {
    entry.action = CollectAction::Kept;
    entry.kept = Some(why);
    match what {
        Some(InUse::Terminals(terminals)) => {
            let named: Vec<String> = terminals
                .iter()
                .map(|t| match &t.name {
                    Some(name) => format!("{} ({name}, {})", t.terminal, t.profile),
                    None => format!("{} ({})", t.terminal, t.profile),
                })
                .collect();
            entry.reason = format!(
                "it has {}: {}; close {} first (krad close ID)",
                counted(terminals.len(), "live terminal"),
                named.join(", "),
                if terminals.len() == 1 { "it" } else { "them" },
            );
            entry.terminals = terminals;
        }
        Some(InUse::Processes(processes)) => {
            let named: Vec<String> = processes
                .iter()
                .map(|p| format!("pid {} ({})", p.pid, p.command))
                .collect();
            entry.reason = format!(
                "another program is working in it: {}; end it or leave the directory first",
                named.join(", ")
            );
            entry.processes = processes;
        }
        None => {}
    }
    entry
}

/// Archives and removes one environment, its Close intent recorded first.
async fn remove(
    envs: &Environments,
    terminals: &impl CloseTerminals,
    ctx: &CallContext,
    record: &EnvironmentRecord,
    mut entry: CollectedEnvironment,
) -> CollectedEnvironment {
    let name = &record.name;
    // Its own intent, not keyed by the request id: a crash midway finishes it
    // as an interrupted Close (it was archived before anything was removed).
    let underway = Underway::begin(
        envs.store.db(),
        &intents::inner(ctx),
        Plan::CloseEnvironment {
            name: name.clone(),
            force: true,
        },
    );
    let removed = match underway {
        Ok(_underway) => {
            removal::remove(
                envs,
                terminals,
                name,
                Removal {
                    refuse_unique_work: false,
                    despite_teardown: false,
                    refuse_live_terminals: true,
                },
            )
            .await
        }
        Err(e) => Err(e),
    };
    match removed {
        Ok(archive) => {
            entry.action = CollectAction::Removed;
            entry.archive = (!archive.is_empty()).then_some(archive);
            tracing::info!(environment = %name, reason = %entry.reason, archive = ?entry.archive, bytes = ?entry.bytes, "environment collected");
            entry
        }
        Err(e) if removal::is_live_terminals(&e) => {
            // A terminal started since the check: named as the check names it.
            tracing::info!(environment = %name, "environment not collected: {}", e.message);
            match in_use(envs, record).await {
                Some(kept) => kept_as(entry, kept),
                None => {
                    entry.reason = e.message;
                    kept_as(entry, (KeptBecause::LiveTerminals, None))
                }
            }
        }
        Err(e) => {
            let why = if removal::is_teardown_failure(&e) {
                KeptBecause::TeardownFailed
            } else {
                KeptBecause::Failed
            };
            tracing::warn!(environment = %name, "environment not collected: {}", e.message);
            entry.reason = e.message;
            kept_as(entry, (why, None))
        }
    }
}

/// The processes whose working directory is `dir` or inside it (those whose
/// `/proc/PID/cwd` can be read: a user's own), except the app and what it runs
/// itself (its git commands, its terminals' programs: a live terminal is
/// answered as such).
fn processes_inside(dir: &Path) -> Vec<ProcessInside> {
    let Ok(dir) = std::fs::canonicalize(dir) else {
        return Vec::new();
    };
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut inside: Vec<ProcessInside> = entries
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            if pid == me || parent_of(&entry.path()) == Some(me) {
                return None;
            }
            let cwd: PathBuf = std::fs::read_link(entry.path().join("cwd")).ok()?;
            cwd.starts_with(&dir).then(|| ProcessInside {
                pid,
                command: command_of(&entry.path()),
            })
        })
        .collect();
    inside.sort_by_key(|p| p.pid);
    inside
}

/// A process's parent, from `/proc/PID/stat` (`pid (comm) state ppid …`; the
/// name may hold spaces and parentheses, so read after its last `)`).
fn parent_of(proc_dir: &Path) -> Option<u32> {
    let stat = std::fs::read_to_string(proc_dir.join("stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// A process's command line (its name when that cannot be read), on one line.
fn command_of(proc_dir: &Path) -> String {
    let line = std::fs::read(proc_dir.join("cmdline"))
        .ok()
        .map(|raw| {
            raw.split(|&b| b == 0)
                .filter(|arg| !arg.is_empty())
                .map(|arg| String::from_utf8_lossy(arg).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .filter(|line| !line.is_empty())
        .or_else(|| {
            std::fs::read_to_string(proc_dir.join("comm"))
                .ok()
                .map(|c| c.trim().to_owned())
        })
        .unwrap_or_else(|| "?".to_owned());
    let line: String = line
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match line.char_indices().nth(COMMAND_SHOWN) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
    }
}

/// A duration in its largest whole unit: `40s`, `12m`, `5h`, `3d`, `2w`.
fn short(duration: Duration) -> String {
    let secs = duration.as_secs();
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86_400 => format!("{}h", secs / 3600),
        86_400..1_209_600 => format!("{}d", secs / 86_400),
        _ => format!("{}w", secs / 604_800),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_with_its_cwd_inside_is_found_with_its_command() {
        let dir = tempfile::tempdir().unwrap();
        let inner = dir.path().join("deep");
        std::fs::create_dir(&inner).unwrap();
        // A grandchild: this process's own children count as the app's.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30; true"])
            .current_dir(&inner)
            .spawn()
            .unwrap();
        // Until `sleep` runs: between sh's fork and the exec, the grandchild is
        // a copy of `sh` (seen once under a CPU hog).
        let mut found = Vec::new();
        for _ in 0..500 {
            found = processes_inside(dir.path());
            if found.iter().any(|p| p.command == "sleep 30") {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        for p in &found {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(p.pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].command, "sleep 30");
        assert_ne!(found[0].pid, child.id());
        assert!(processes_inside(&dir.path().join("missing")).is_empty());
        let me = std::path::PathBuf::from(format!("/proc/{}", std::process::id()));
        assert_eq!(parent_of(&me), Some(nix::unistd::getppid().as_raw() as u32));
    }

    #[test]
    fn durations_in_their_largest_unit() {
        assert_eq!(short(Duration::from_secs(59)), "59s");
        assert_eq!(short(Duration::from_secs(3 * 86_400)), "3d");
        assert_eq!(short(Duration::from_secs(15 * 86_400)), "2w");
    }
}
