//! One app per repository: an exclusive `flock` on `.git/krad/app.lock` in the
//! repository's git common directory, taken by `krad serve` before it opens
//! the store and held until the process ends. The kernel drops it when the
//! process dies, however it dies, so it is never stale: a SIGKILLed app's
//! successor takes it at once.
//!
//! The lock is the truth; the file's contents (the holder's pid, repository
//! and endpoint, as JSON) only let a refused app say whom it met. Readers
//! test the lock with a shared, non-blocking `flock` ([`probe`]): refused
//! means an app is alive. Such a test holds the lock for an instant, so
//! [`RepoLock::acquire`] tries again for a moment before it gives up on a
//! holder whose pid is gone.
//!
//! Knows nothing of the bus, of api.json or of the registry.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};

/// The lock file's name in `.git/krad/`.
pub(crate) const FILE: &str = "app.lock";

/// How long [`RepoLock::acquire`] tries again while the lock is held by
/// something that is not a live app (a reader's test, an app still writing
/// its name).
const CONTENDED: Duration = Duration::from_millis(500);

/// Who holds the lock, as the holder wrote it.
///
/// # Format
///
/// ```json
/// {"pid":48211,"root":"/src/app","endpoint":"127.0.0.1:41234","started_at":"…"}
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Holder {
    /// The app's process id.
    pub pid: u32,
    /// The repository it serves (its top folder).
    pub root: PathBuf,
    /// The bus's endpoint, once the app listens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// When it started, RFC 3339 UTC.
    pub started_at: String,
}

/// The lock, held: the repository is this process's until it is dropped or
/// the process ends.
#[derive(Debug)]
pub(crate) struct RepoLock {
    file: Flock<File>,
    path: PathBuf,
}

/// Why the lock was not taken.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LockError {
    /// Another process holds it; what it wrote about itself, if readable.
    #[error("another app holds {path}")]
    Held {
        /// The lock file.
        path: PathBuf,
        /// The holder, as it wrote itself into the file.
        holder: Option<Holder>,
    },
    /// The file could not be opened or locked.
    #[error("cannot lock {path}: {source}")]
    Io {
        /// The lock file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl RepoLock {
    /// Takes the lock in `krad_dir` (which must exist) for `holder`, and
    /// writes `holder` into the file. Never waits on a live app: a live
    /// holder is [`LockError::Held`] at once.
    pub(crate) fn acquire(krad_dir: &Path, holder: &Holder) -> Result<RepoLock, LockError> {
        let path = krad_dir.join(FILE);
        let io = |source: std::io::Error| LockError::Io {
            path: path.clone(),
            source,
        };
        // Opened without truncating: a refused app leaves the holder's words.
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        let until = Instant::now() + CONTENDED;
        let locked = loop {
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(locked) => break locked,
                Err((back, Errno::EWOULDBLOCK)) => {
                    let current = read_holder(&back);
                    let live = current
                        .as_ref()
                        .is_some_and(|h| krad_bus::api_json::pid_alive(h.pid));
                    if live || Instant::now() >= until {
                        return Err(LockError::Held {
                            path,
                            holder: current,
                        });
                    }
                    file = back;
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err((_, errno)) => return Err(io(std::io::Error::from(errno))),
            }
        };
        let mut lock = RepoLock {
            file: locked,
            path: path.clone(),
        };
        lock.update(holder).map_err(io)?;
        Ok(lock)
    }

    /// Writes `holder` into the lock file (the endpoint, once known).
    pub(crate) fn update(&mut self, holder: &Holder) -> std::io::Result<()> {
        let bytes = serde_json::to_vec(holder).map_err(std::io::Error::other)?;
        self.file.set_len(0)?;
        self.file.write_all_at(&bytes, 0)?;
        Ok(())
    }

    /// The lock file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// What a reader learns about a repository's lock.
#[derive(Debug)]
pub(crate) enum Probe {
    /// An app holds it: the repository is served.
    Held(Option<Holder>),
    /// Nobody holds it; the guard keeps a shared lock until dropped, so that
    /// a dead app's leftovers can be cleaned without racing a new app.
    Free(FreeGuard),
}

/// A shared lock on a lock nobody else held, released when dropped.
#[derive(Debug)]
pub(crate) struct FreeGuard {
    _file: Option<Flock<File>>,
}

/// Tests the lock in `krad_dir` without waiting. A missing file is free
/// (no app ever served here); a file that cannot be opened is taken as held,
/// so that a reader never cleans up after an app it cannot see.
pub(crate) fn probe(krad_dir: &Path) -> Probe {
    let path = krad_dir.join(FILE);
    let file = match File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Probe::Free(FreeGuard { _file: None });
        }
        Err(_) => return Probe::Held(None),
    };
    match Flock::lock(file, FlockArg::LockSharedNonblock) {
        Ok(shared) => Probe::Free(FreeGuard {
            _file: Some(shared),
        }),
        Err((file, _)) => Probe::Held(read_holder(&file)),
    }
}

/// The holder written in the lock file, if it reads as one.
fn read_holder(file: &File) -> Option<Holder> {
    let mut bytes = vec![0; 64 * 1024];
    let n = file.read_at(&mut bytes, 0).ok()?;
    serde_json::from_slice(&bytes[..n]).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(pid: u32) -> Holder {
        Holder {
            pid,
            root: "/repo".into(),
            endpoint: Some("127.0.0.1:1".into()),
            started_at: "2026-12-07T00:00:00Z".into(),
        }
    }

    #[test]
    fn one_holder_at_a_time_and_readers_see_it() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(matches!(probe(tmp.path()), Probe::Free(_)));
        let first = RepoLock::acquire(tmp.path(), &holder(std::process::id())).unwrap();
        // flock is per open file: a second open in this process conflicts too.
        match RepoLock::acquire(tmp.path(), &holder(1)) {
            Err(LockError::Held {
                holder: Some(h), ..
            }) => {
                assert_eq!(h.pid, std::process::id())
            }
            other => panic!("{other:?}"),
        }
        match probe(tmp.path()) {
            Probe::Held(Some(h)) => assert_eq!(h, holder(std::process::id())),
            other => panic!("{other:?}"),
        }
        drop(first);
        assert!(matches!(probe(tmp.path()), Probe::Free(_)));
        RepoLock::acquire(tmp.path(), &holder(std::process::id())).unwrap();
    }

    #[test]
    fn a_readers_test_does_not_refuse_a_new_app() {
        let tmp = tempfile::tempdir().unwrap();
        // A dead app's words are in the file; a reader holds its shared lock.
        drop(RepoLock::acquire(tmp.path(), &holder(u32::MAX - 1)).unwrap());
        let guard = probe(tmp.path());
        assert!(matches!(guard, Probe::Free(_)));
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            drop(guard);
        });
        RepoLock::acquire(tmp.path(), &holder(std::process::id())).unwrap();
        release.join().unwrap();
    }
}
