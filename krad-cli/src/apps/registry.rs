//! The per-user directory of running apps: `$XDG_RUNTIME_DIR/krad-ade/apps/`
//! (or `~/.krad-ade/apps/`), one `<pid>.json` per app (0600 in a 0700
//! folder), written by `krad serve` once it serves and removed when it
//! stops. An entry says where an app serves and which repository; it holds
//! no token (the repository's discovery file does). An entry is believed only
//! while its repository's lock is held by its pid; [`live`] removes the
//! others, so a SIGKILLed app drops out of `krad apps` at the next look, and
//! its entry is gone once another app starts (`krad serve` looks first).
//!
//! Knows nothing of the bus or of the CLI's order of lookups.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::lock::{self, Probe};
use super::repository::krad_dir;
use krad_bus::private_file;

/// One running app.
///
/// # Format
///
/// ```json
/// {"pid":48211,"root":"/src/app","git_dir":"/src/app/.git",
///  "endpoint":"127.0.0.1:41234","ui":"http://127.0.0.1:41235/",
///  "build":"0.1.0","started_at":"2026-12-07T02:00:00Z"}
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Entry {
    /// The app's process id (also the entry's file name).
    pub pid: u32,
    /// The repository's top folder, as the app serves it.
    pub root: PathBuf,
    /// The repository's identity: its canonical git common directory, where
    /// its lock and discovery file are.
    pub git_dir: PathBuf,
    /// The bus.
    pub endpoint: String,
    /// The page, when the app serves one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ui: Option<String>,
    /// The app's build.
    pub build: String,
    /// When it started, RFC 3339 UTC.
    pub started_at: String,
}

/// The directory of running apps for this process's environment.
pub(crate) fn dir() -> Option<PathBuf> {
    let non_empty = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(runtime) = non_empty("XDG_RUNTIME_DIR") {
        return Some(PathBuf::from(runtime).join("krad-ade").join("apps"));
    }
    non_empty("HOME").map(|home| PathBuf::from(home).join(".krad-ade").join("apps"))
}

/// Writes this app's entry; the path to remove at the end.
pub(crate) fn register(entry: &Entry) -> std::io::Result<PathBuf> {
    let dir = dir().ok_or_else(|| {
        std::io::Error::other("cannot tell where running apps are listed: set HOME")
    })?;
    if let Some(parent) = dir.parent() {
        private_file::ensure_dir(parent)?;
    }
    private_file::ensure_dir(&dir)?;
    let path = dir.join(format!("{}.json", entry.pid));
    let mut bytes = serde_json::to_vec_pretty(entry).map_err(std::io::Error::other)?;
    bytes.push(b'\n');
    private_file::write(&path, &bytes)?;
    Ok(path)
}

/// The running apps, oldest first; the entries of apps that are gone are
/// removed.
pub(crate) fn live() -> Vec<Entry> {
    let Some(dir) = dir() else {
        return Vec::new();
    };
    let Ok(files) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut apps = Vec::new();
    for file in files.flatten() {
        let path = file.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let entry = std::fs::read(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Entry>(&bytes).ok());
        match entry {
            Some(entry) if alive(&entry) => apps.push(entry),
            Some(entry) if std::fs::remove_file(&path).is_ok() => {
                tracing::info!(
                    "removed {}: its app (pid {}) is gone",
                    path.display(),
                    entry.pid
                );
            }
            Some(_) => {}
            // Not an entry of ours (they are renamed in whole): left alone.
            None => {}
        }
    }
    apps.sort_by(|a, b| (&a.started_at, a.pid).cmp(&(&b.started_at, b.pid)));
    apps
}

/// Whether the entry's app still holds its repository's lock.
fn alive(entry: &Entry) -> bool {
    match lock::probe(&krad_dir(&entry.git_dir)) {
        Probe::Held(Some(holder)) => holder.pid == entry.pid,
        Probe::Held(None) => krad_bus::api_json::pid_alive(entry.pid),
        Probe::Free(_) => false,
    }
}

/// Removes an entry written by [`register`].
pub(crate) fn unregister(path: &Path) {
    let _ = std::fs::remove_file(path);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_whose_lock_is_free_is_removed() {
        // The directory comes from the environment: a test of its own would
        // race the others; `dir()`'s order is checked by the suite.
        let tmp = tempfile::tempdir().unwrap();
        let entry = Entry {
            pid: u32::MAX - 1,
            root: tmp.path().into(),
            git_dir: tmp.path().join("gone"),
            endpoint: "127.0.0.1:1".into(),
            ui: None,
            build: "0.1.0".into(),
            started_at: String::new(),
        };
        assert!(!alive(&entry));
    }
}
