//! Disk use: each environment's directory measured off the request path, by a
//! background task — every `[environments] disk_refresh_secs` (default 60) and
//! soon after an environment changes (created, closed, updated) — into a table
//! Environments reads without waiting. Also an environment's age: the creation
//! time in its record, or for older records the worktree's `.git` file.
//!
//! A local directory is walked without following symlinks, without crossing
//! into another file system or into another worktree or repository inside it
//! (a directory holding a `.git` entry), counting each hard-linked file once:
//! the blocks allocated, as `du` counts them. A directory on an SSH host is
//! measured there with `du -skx` while the host's link is up.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use krad_bus::protocol::LinkState;

use super::Environments;
use crate::environments::MAIN;
use crate::profile::shell_quote;
use crate::records::EnvironmentRecord;

/// How often the disk use is measured again when nothing changes.
const DEFAULT_REFRESH: Duration = Duration::from_secs(60);

/// How long after a change the measurement waits for more changes to settle.
const SETTLE: Duration = Duration::from_millis(500);

/// One measurement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Measured {
    /// Bytes allocated on disk.
    pub bytes: u64,
    /// When it was measured (RFC 3339).
    pub at: String,
}

/// The last measurement of each environment, by name.
#[derive(Debug, Default)]
pub(crate) struct DiskUse {
    measured: Mutex<HashMap<String, Measured>>,
}

impl DiskUse {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Measured>> {
        self.measured.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The last measurement of an environment, if any.
    pub(crate) fn get(&self, name: &str) -> Option<Measured> {
        self.lock().get(name).cloned()
    }

    fn set(&self, name: &str, measured: Measured) {
        self.lock().insert(name.to_owned(), measured);
    }

    /// Forgets the environments not in `names` (closed ones).
    fn keep_only(&self, names: &HashSet<String>) {
        self.lock().retain(|name, _| names.contains(name));
    }
}

/// Starts the background measurement; call once the records are restored.
pub(crate) fn start(envs: &Arc<Environments>) {
    let envs = envs.clone();
    tokio::spawn(async move { run(envs).await });
}

async fn run(envs: Arc<Environments>) {
    let every = envs
        .settings
        .config
        .environments
        .disk_refresh_secs
        .map_or(DEFAULT_REFRESH, |secs| Duration::from_secs(secs.max(1)));
    let mut changed = envs.changed.subscribe();
    loop {
        refresh_all(&envs).await;
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            seen = changed.changed() => {
                if seen.is_err() {
                    return;
                }
                // A burst of changes (a RunVariants) is measured once.
                tokio::time::sleep(SETTLE).await;
                changed.borrow_and_update();
            }
        }
    }
}

/// Measures main and every environment once, one after the other.
async fn refresh_all(envs: &Arc<Environments>) {
    let records = envs.store.environments();
    let names: HashSet<String> = records
        .iter()
        .map(|r| r.name.clone())
        .chain([MAIN.to_owned()])
        .collect();
    envs.disk.keep_only(&names);
    let started = std::time::Instant::now();
    if let Some(bytes) = measure_local(envs.settings.root.clone()).await {
        envs.disk.set(MAIN, now(bytes));
    }
    for record in &records {
        if let Some(bytes) = measure(envs, record).await {
            envs.disk.set(&record.name, now(bytes));
        }
    }
    tracing::debug!(
        environments = records.len() + 1,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "disk use measured"
    );
}

fn now(bytes: u64) -> Measured {
    Measured {
        bytes,
        at: crate::store::now_rfc3339(),
    }
}

/// Measures one environment now (here, or on its host while its link is up);
/// `None` when it cannot be measured (its directory is gone, its host down).
pub(crate) async fn measure(envs: &Environments, record: &EnvironmentRecord) -> Option<u64> {
    let Some(host) = record.host.as_deref() else {
        return measure_local(record.path.clone()).await;
    };
    let host = envs.hosts.get(host).ok()?;
    // Never opens a link of its own: a host that is down stays quiet.
    if host.status().state != LinkState::Up {
        return None;
    }
    let script = format!(
        "du -skx -- {} 2>/dev/null",
        shell_quote(&record.path.display().to_string())
    );
    let (_, out, _) = host.run(&script, None).await.ok()?;
    let kib: u64 = String::from_utf8_lossy(&out)
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib.saturating_mul(1024))
}

/// Measures a local directory on a blocking thread.
async fn measure_local(dir: PathBuf) -> Option<u64> {
    tokio::task::spawn_blocking(move || walk(&dir).ok())
        .await
        .ok()
        .flatten()
}

/// The bytes allocated under `root`: see the module's doc.
fn walk(root: &Path) -> std::io::Result<u64> {
    let top = std::fs::symlink_metadata(root)?;
    if !top.is_dir() {
        return Err(std::io::Error::other("not a directory"));
    }
    let device = top.dev();
    let mut total = allocated(&top);
    let mut linked: HashSet<(u64, u64)> = HashSet::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        // A directory that vanished or cannot be read counts as empty.
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            if meta.dev() != device {
                continue;
            }
            if meta.nlink() > 1 && !meta.is_dir() && !linked.insert((meta.dev(), meta.ino())) {
                continue;
            }
            if meta.is_dir() {
                let path = entry.path();
                // Another worktree or repository inside (main holds the
                // worktrees): its own environment, not this one's bytes.
                if std::fs::symlink_metadata(path.join(".git")).is_ok() {
                    continue;
                }
                pending.push(path);
            }
            total = total.saturating_add(allocated(&meta));
        }
    }
    Ok(total)
}

fn allocated(meta: &std::fs::Metadata) -> u64 {
    meta.blocks().saturating_mul(512)
}

/// When an environment was created: its record's time, else (a record from
/// before krad kept it) the modification time of its worktree's `.git` file,
/// which `git worktree add` writes once; `None` on a host or when unknown.
pub(crate) fn created_at(record: &EnvironmentRecord) -> Option<String> {
    if let Some(at) = &record.created_at {
        return Some(at.clone());
    }
    if record.host.is_some() {
        return None;
    }
    let modified = std::fs::symlink_metadata(record.path.join(".git"))
        .ok()?
        .modified()
        .ok()?;
    Some(humantime::format_rfc3339_millis(modified).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_files_once_and_skips_symlinks_and_nested_worktrees() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let empty = walk(root).unwrap();
        std::fs::write(root.join("a"), vec![7u8; 64 * 1024]).unwrap();
        let one = walk(root).unwrap();
        assert!(one >= empty + 64 * 1024, "{empty} → {one}");
        std::fs::hard_link(root.join("a"), root.join("b")).unwrap();
        assert_eq!(walk(root).unwrap(), one, "a hard link counts once");
        // A symlink to a big tree is not followed.
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::write(elsewhere.path().join("big"), vec![1u8; 256 * 1024]).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), root.join("link")).unwrap();
        assert!(walk(root).unwrap() < one + 64 * 1024);
        // Another worktree inside is left out.
        let nested = root.join("nested");
        std::fs::create_dir(&nested).unwrap();
        std::fs::write(nested.join(".git"), "gitdir: /elsewhere\n").unwrap();
        std::fs::write(nested.join("big"), vec![1u8; 256 * 1024]).unwrap();
        assert!(walk(root).unwrap() < one + 64 * 1024);
        assert!(walk(&root.join("missing")).is_err());
    }

    #[test]
    fn age_comes_from_the_record_else_from_the_worktrees_git_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut record = EnvironmentRecord {
            name: "old".into(),
            path: dir.path().to_path_buf(),
            branch: "krad/old".into(),
            base: "0".repeat(40),
            base_environment: MAIN.into(),
            host: None,
            group: None,
            variant: None,
            phase: crate::records::Phase::Ready,
            setup: None,
            created_at: None,
        };
        assert_eq!(created_at(&record), None, "no .git file, no record time");
        let git_file = std::fs::File::create(dir.path().join(".git")).unwrap();
        let then = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        git_file.set_modified(then).unwrap();
        assert_eq!(
            created_at(&record).as_deref(),
            Some("2023-11-14T22:13:20.000Z")
        );
        record.created_at = Some("2026-12-01T00:00:00.000Z".into());
        assert_eq!(
            created_at(&record).as_deref(),
            Some("2026-12-01T00:00:00.000Z")
        );
        record.created_at = None;
        record.host = Some("far".into());
        assert_eq!(created_at(&record), None, "a host's is not looked at");
    }
}
