//! git's lock files that a killed git left behind.
//!
//! git takes `<file>.lock` (created with `O_EXCL`) before it rewrites a file of
//! the repository, and removes it when it is done — also on SIGHUP, SIGINT or
//! SIGTERM, but not on SIGKILL. A git killed while it holds one (an agent's `git
//! commit` ended by a Close's SIGKILL: a commit takes `packed-refs.lock`, shared by
//! every worktree, to delete `AUTO_MERGE`) leaves it behind, and every later git
//! command that needs it fails with "Unable to create '…lock': File exists" until
//! someone removes it by hand.
//!
//! When one of the app's own git commands fails that way, the lock is looked at:
//! inside this repository's git directories, held open by no process, and older
//! than [`SETTLE`] (a git closes its lock just before renaming it into place; no
//! git keeps a closed lock that long), it is removed and the command is run once
//! more. A lock some process holds open is left alone, and the error names that
//! process.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// How old a lock no process holds open must be before it is taken as left behind.
pub(crate) const SETTLE: Duration = Duration::from_secs(2);

/// What was found about the locks a failed git command names.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// git's message names no lock that exists (or none it could not create).
    NoLock,
    /// Every lock it names was left behind and is removed (or went away): run
    /// the command again.
    Cleared,
    /// A lock is in use or not the repository's: why it is kept, for the error.
    Kept(String),
}

/// The lock files git's stderr says it could not create because they exist.
pub(crate) fn named_locks(stderr: &str) -> Vec<PathBuf> {
    const START: &str = "Unable to create '";
    const END: &str = "': File exists";
    let mut found = Vec::new();
    let mut rest = stderr;
    while let Some(at) = rest.find(START) {
        rest = &rest[at + START.len()..];
        let Some(end) = rest.find(END) else {
            break;
        };
        let path = PathBuf::from(&rest[..end]);
        rest = &rest[end + END.len()..];
        let is_lock = path.extension().is_some_and(|e| e == "lock");
        if is_lock && path.is_absolute() && !found.contains(&path) {
            found.push(path);
        }
    }
    found
}

/// Looks at each lock in `locks` (see the module's doc); `git_dirs` are the
/// repository's git directory and common directory, absolute.
pub(crate) async fn clear(locks: Vec<PathBuf>, git_dirs: Vec<PathBuf>) -> Verdict {
    if locks.is_empty() {
        return Verdict::NoLock;
    }
    let work = tokio::task::spawn_blocking(move || clear_blocking(&locks, &git_dirs));
    match work.await {
        Ok(verdict) => verdict,
        Err(error) => Verdict::Kept(format!("cannot look at git's lock: {error}")),
    }
}

fn clear_blocking(locks: &[PathBuf], git_dirs: &[PathBuf]) -> Verdict {
    let git_dirs: Vec<PathBuf> = git_dirs
        .iter()
        .filter_map(|d| d.canonicalize().ok())
        .collect();
    for lock in locks {
        if let Err(why) = clear_one(lock, &git_dirs) {
            return Verdict::Kept(why);
        }
    }
    Verdict::Cleared
}

/// Removes `lock` if it was left behind; Ok also when it is already gone.
fn clear_one(lock: &Path, git_dirs: &[PathBuf]) -> Result<(), String> {
    let shown = lock.display();
    let parent = lock.parent().and_then(|p| p.canonicalize().ok());
    let inside = (parent.as_ref()).is_some_and(|p| git_dirs.iter().any(|dir| p.starts_with(dir)));
    let (Some(parent), Some(name), true) = (parent, lock.file_name(), inside) else {
        return Err(format!(
            "{shown} is not in this repository's git directory; krad leaves it alone"
        ));
    };
    let Some(first) = identity(lock) else {
        return Ok(());
    };
    let age = SystemTime::now()
        .duration_since(first.1)
        .unwrap_or(Duration::ZERO);
    if age < SETTLE {
        std::thread::sleep(SETTLE - age);
    }
    // /proc shows the path with its symbolic links resolved.
    if let Some((pid, command)) = holder(&parent.join(name)) {
        return Err(format!(
            "{shown} is held by process {pid} ({command}); wait for it to finish, or end it"
        ));
    }
    match identity(lock) {
        None => Ok(()),
        // Taken again by another git in the meantime: not the one left behind.
        Some(now) if now != first => Err(format!(
            "{shown} is in use by another git; try again when it has finished"
        )),
        Some(_) => match std::fs::remove_file(lock) {
            Ok(()) => {
                tracing::warn!(
                    "removed {shown}: no process held it for {:.0?} (a git that was killed left it)",
                    SETTLE.max(age)
                );
                Ok(())
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(format!(
                "{shown} was left behind by a git that was killed, and cannot be removed: {error}; remove it by hand"
            )),
        },
    }
}

/// The lock's inode and modification time: the same pair later means the same
/// lock, untouched.
fn identity(lock: &Path) -> Option<((u64, u64), SystemTime)> {
    let meta = std::fs::symlink_metadata(lock).ok()?;
    Some(((meta.dev(), meta.ino()), meta.modified().ok()?))
}

/// A process that has `path` open, with its command line.
fn holder(path: &Path) -> Option<(u32, String)> {
    let entries = std::fs::read_dir("/proc").ok()?;
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        let holds = fds
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target == path));
        if holds {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let words: Vec<String> = (cmdline.split(|b| *b == 0))
                .filter(|w| !w.is_empty())
                .map(|w| String::from_utf8_lossy(w).into_owned())
                .collect();
            return Some((pid, words.join(" ")));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_locks_git_names_are_found_in_its_messages() {
        let stderr = "error: cannot lock ref 'refs/heads/a': Unable to create '/r/.git/refs/heads/a.lock': File exists.\n\
                      fatal: Unable to create '/r/.git/packed-refs.lock': File exists.\n\n\
                      Another git process seems to be running in this repository, e.g.\n\
                      Unable to create 'relative.lock': File exists.\n\
                      Unable to create '/r/.git/packed-refs.lock': File exists.";
        assert_eq!(
            named_locks(stderr),
            [
                PathBuf::from("/r/.git/refs/heads/a.lock"),
                PathBuf::from("/r/.git/packed-refs.lock")
            ]
        );
        assert!(named_locks("fatal: not a git repository").is_empty());
        assert!(named_locks("Unable to create '/r/.git/x': File exists").is_empty());
    }

    #[test]
    fn a_lock_held_open_is_kept_and_its_holder_named() {
        let dir = tempfile::tempdir().unwrap();
        let git_dir = dir.path().join(".git");
        std::fs::create_dir(&git_dir).unwrap();
        let lock = git_dir.join("packed-refs.lock");
        let held = std::fs::File::create(&lock).unwrap();
        let why = clear_one(&lock, &[git_dir.canonicalize().unwrap()]).unwrap_err();
        assert!(
            why.contains(&format!("process {}", std::process::id())),
            "{why}"
        );
        assert!(lock.exists());
        drop(held);
        clear_one(&lock, &[git_dir.canonicalize().unwrap()]).unwrap();
        assert!(!lock.exists());
    }

    #[test]
    fn a_lock_outside_the_repository_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let git_dir = dir.path().join(".git");
        std::fs::create_dir(&git_dir).unwrap();
        let lock = dir.path().join("elsewhere.lock");
        std::fs::write(&lock, "").unwrap();
        let why = clear_one(&lock, &[git_dir.canonicalize().unwrap()]).unwrap_err();
        assert!(why.contains("not in this repository"), "{why}");
        assert!(lock.exists());
    }
}
