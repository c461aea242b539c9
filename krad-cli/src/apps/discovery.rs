//! The discovery file of a repository: `.git/krad/api.json` in its git
//! common directory, what api.json is for a user (the endpoint, the client
//! token, the pid; 0600 in the 0700 `.git/krad/`) for the one app that
//! serves this repository. The app writes it once it serves and removes it
//! when it stops; a file left by an app that died is never trusted: a reader
//! believes it only while the repository's lock is held, and removes it
//! when the lock is free.
//!
//! Knows nothing of the per-user registry or of the CLI's order of lookups.

use std::path::{Path, PathBuf};

use krad_bus::api_json::{self, ApiJson, ApiJsonError};

use super::lock::{self, Probe};
use super::repository::krad_dir;

/// The discovery file's name in `.git/krad/`.
pub(crate) const FILE: &str = "api.json";

/// The discovery file of the repository whose git common directory is `common_dir`.
pub(crate) fn path(common_dir: &Path) -> PathBuf {
    krad_dir(common_dir).join(FILE)
}

/// Writes the discovery file (atomically, 0600, in a private folder).
pub(crate) fn write(common_dir: &Path, contents: &ApiJson) -> Result<(), ApiJsonError> {
    api_json::write(&path(common_dir), contents)
}

/// Removes the discovery file if it still names this process.
pub(crate) fn remove_if_ours(common_dir: &Path) {
    api_json::remove_if_ours(&path(common_dir));
}

/// The app serving the repository of `common_dir`, from its discovery file,
/// when the repository's lock says that app is alive. A file whose app is
/// gone (the lock is free) is removed on the way.
pub(crate) fn live(common_dir: &Path) -> Option<ApiJson> {
    let file = path(common_dir);
    let found = match api_json::read(&file) {
        Ok(found) => found,
        Err(_) => return None,
    };
    match lock::probe(&krad_dir(common_dir)) {
        Probe::Held(holder) => {
            // A newer app may hold the lock and not have written its file yet.
            let same = holder.is_none_or(|h| h.pid == found.pid);
            (same && api_json::pid_alive(found.pid)).then_some(found)
        }
        Probe::Free(_guard) => {
            // Held shared while removing: no new app can be starting now.
            if std::fs::remove_file(&file).is_ok() {
                tracing::info!(
                    "removed {}: its app (pid {}) is gone",
                    file.display(),
                    found.pid
                );
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apps::lock::{Holder, RepoLock};
    use krad_bus::protocol::Token;

    fn sample(pid: u32) -> ApiJson {
        ApiJson {
            api_version: 1,
            endpoint: "127.0.0.1:1".into(),
            token: Token::new("t".repeat(32)),
            pid,
            build: "0.1.0".into(),
            started_at: "2026-12-07T00:00:00Z".into(),
            root: "/repo".into(),
            ui: None,
        }
    }

    #[test]
    fn believed_while_locked_and_removed_once_the_lock_is_free() {
        let tmp = tempfile::tempdir().unwrap();
        let common = tmp.path();
        let dir = krad_dir(common);
        krad_bus::private_file::ensure_dir(&dir).unwrap();
        let me = std::process::id();
        let lock = RepoLock::acquire(
            &dir,
            &Holder {
                pid: me,
                root: "/repo".into(),
                endpoint: None,
                started_at: String::new(),
            },
        )
        .unwrap();
        write(common, &sample(me)).unwrap();
        assert_eq!(live(common).map(|a| a.pid), Some(me));
        drop(lock);
        assert_eq!(live(common), None);
        assert!(!path(common).exists(), "a dead app's file is cleaned");
    }
}
