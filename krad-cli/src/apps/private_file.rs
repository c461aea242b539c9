//! Private folders and files: a folder only this user can enter (0700, made
//! when missing, refused when others can) and a file written whole into one
//! (a 0600 temp file renamed over the target), so a reader never sees half
//! of it; and a check-then-write done under a lock file.
//!
//! Knows nothing of what the files hold.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Makes `dir` (0700) when it is missing, and checks that it is a folder of
/// this user's that nobody else can enter.
pub fn ensure_dir(dir: &Path) -> std::io::Result<()> {
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        // The umask may have narrowed the mode; the last level is exactly 0700.
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    let meta = std::fs::metadata(dir)?;
    let refuse = |why: String| {
        Err(std::io::Error::other(format!(
            "{} is not a private folder ({why}); it holds krad's files, so only you may \
             enter it: `chmod 700 {}`",
            dir.display(),
            dir.display()
        )))
    };
    if !meta.is_dir() {
        return refuse("not a folder".to_owned());
    }
    if meta.uid() != nix::unistd::geteuid().as_raw() {
        return refuse(format!("owned by uid {}", meta.uid()));
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o077 != 0 {
        return refuse(format!("mode {mode:04o}"));
    }
    Ok(())
}

/// Writes `bytes` to `path` (0600) through a temp file beside it and a
/// rename; the folder must be private already ([`ensure_dir`]).
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other(format!("{} has no folder", path.display())))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // One temp name per process: a dead writer's is replaced at the next write.
    let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&temp);
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

/// Runs `work` holding an exclusive `flock` on `lock` (made 0600 when
/// missing, in a private folder made when missing): for a check and a write
/// that must not interleave with another process's. Waits for the holder,
/// which holds it only that long.
pub fn exclusively<T>(lock: &Path, work: impl FnOnce() -> T) -> std::io::Result<T> {
    if let Some(dir) = lock.parent().filter(|d| !d.as_os_str().is_empty()) {
        ensure_dir(dir)?;
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(lock)?;
    let held = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, errno)| std::io::Error::from(errno))?;
    let done = work();
    drop(held);
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_0600_in_0700_folders_and_a_shared_folder_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        ensure_dir(&dir).unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        write(&dir.join("f.json"), b"{}").unwrap();
        let meta = std::fs::metadata(dir.join("f.json")).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert_eq!(std::fs::read(dir.join("f.json")).unwrap(), b"{}");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let refused = ensure_dir(&dir).unwrap_err().to_string();
        assert!(refused.contains("mode 0755"), "{refused}");
    }
}
