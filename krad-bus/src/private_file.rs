//! Private files: every file krad writes that only its user may read (api.json
//! and the terminals' token files, the discovery files, the durable feed's
//! conversations, the page's review drafts, settings handed to agents) is
//! written here, 0600 in a directory made 0700 when missing — the one writer
//! of the workspace. Knows nothing of what the files hold.
//!
//! * [`ensure_dir`] makes a private folder, or checks that one is: this
//!   user's, that nobody else can enter.
//! * [`write`] replaces a file atomically and durably: a new 0600 temp file
//!   beside it, synced, renamed over it, then the directory synced. A reader
//!   sees the old contents or the new, never a part; a symlink at the path is
//!   replaced, never followed.
//! * [`write_for_this_run`] does the same without the syncs, for a file no
//!   later run of the app reads, and writes a new file in place (no temp file,
//!   no rename: nothing reads it before it is whole).
//! * [`rewrite_in_place`] writes an existing file's new contents into the
//!   same file (not atomic: a reader may see it part written), for a file a
//!   sandbox has bound by itself and would not see replaced.
//! * [`append_json_line`] adds a line to a log (a conversation) without a sync:
//!   a crash may lose its last lines, never the earlier ones.
//! * [`exclusively`] runs a check and a write under a lock file, so that they
//!   never interleave with another process's.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::{
    DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _,
};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

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

/// Replaces the file at `path` with `bytes`, atomically and durably.
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = replace(path, bytes, true)?;
    sync_dir(&dir)
}

/// Writes `bytes` into the existing file at `path`, truncated first, and
/// syncs it: the same file (its inode), so that a bind mount of it sees the
/// new contents. Not atomic; a symlink at the path is refused, not followed.
pub fn rewrite_in_place(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .truncate(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Writes the file at `path` without syncing: for a file that matters only
/// while this run of the app lasts (the token of a terminal that ends with the
/// app; saves a Spawn two syncs). Written in place when there is no file at
/// `path` (the usual case: a terminal's id is never given twice), which saves a
/// temp file and a rename; replaced atomically as [`write`] does otherwise (a
/// symlink included, never followed).
pub fn write_for_this_run(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let new = match write_new(path, bytes, false) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            parent_dir(path)?;
            write_new(path, bytes, false)
        }
        new => new,
    };
    match new {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            replace(path, bytes, false).map(drop)
        }
        new => new,
    }
}

/// Writes `bytes` to a new temp file beside `path` (synced if `sync`) and
/// renames it over `path`; returns the directory.
fn replace(path: &Path, bytes: &[u8], sync: bool) -> std::io::Result<PathBuf> {
    let dir = parent_dir(path)?;
    let temp = temp_beside(&dir, path);
    let written = write_new(&temp, bytes, sync).and_then(|()| std::fs::rename(&temp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(e);
    }
    Ok(dir)
}

/// Adds `bytes` at the end of the file at `path` (created 0600 when missing),
/// in one write.
fn append(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    parent_dir(path)?;
    let mut file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)
}

/// Adds `value` as one JSON line to a log (a conversation): a crash may lose
/// its last lines, never the earlier ones; no fsync, so a busy pane does not
/// wait on the disk.
pub fn append_json_line(path: &Path, value: &impl Serialize) -> std::io::Result<()> {
    append(path, &json_line(value)?)
}

fn json_line(value: &impl Serialize) -> std::io::Result<Vec<u8>> {
    let mut line = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    line.push(b'\n');
    Ok(line)
}

/// The directory of `path`, made 0700 when missing.
fn parent_dir(path: &Path) -> std::io::Result<PathBuf> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
    Ok(dir)
}

/// A temp file name in `dir` no other writer uses: `.<name>.<pid>.<n>.tmp`.
fn temp_beside(dir: &Path, path: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()))
}

/// Writes a new 0600 file (never an existing one), synced if `sync`; removes
/// it again if it cannot be written whole.
fn write_new(path: &Path, bytes: &[u8], sync: bool) -> std::io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    let written = file
        .write_all(bytes)
        .and_then(|()| if sync { file.sync_all() } else { Ok(()) });
    if written.is_err() {
        let _ = std::fs::remove_file(path);
    }
    written
}

/// Syncs a directory, so that a rename in it lasts. A file system that cannot
/// sync directories (EINVAL) has nothing more to do.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    match File::open(dir)?.sync_all() {
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => Ok(()),
        done => done,
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn writes_0600_in_a_new_0700_dir_and_leaves_no_temp() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a").join("b");
        let path = dir.join("f.json");
        write(&path, b"one").unwrap();
        write(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&dir), 0o700);
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("f.json")]);
    }

    #[test]
    fn replaces_a_symlink_instead_of_following_it() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::write(&elsewhere, "kept").unwrap();
        let path = dir.path().join("token");
        std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
        write(&path, b"secret").unwrap();
        assert_eq!(std::fs::read(&elsewhere).unwrap(), b"kept");
        assert_eq!(std::fs::read(&path).unwrap(), b"secret");
        assert!(!std::fs::symlink_metadata(&path).unwrap().is_symlink());
    }

    #[test]
    fn writes_for_this_run_new_in_place_and_replaces_what_is_there() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("tokens");
        let path = dir.join("7.token");
        write_for_this_run(&path, b"one").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"one");
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&dir), 0o700);
        write_for_this_run(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        // A symlink left at the path is replaced, not followed.
        let elsewhere = root.path().join("elsewhere");
        std::fs::write(&elsewhere, "kept").unwrap();
        let linked = dir.join("8.token");
        std::os::unix::fs::symlink(&elsewhere, &linked).unwrap();
        write_for_this_run(&linked, b"secret").unwrap();
        assert_eq!(std::fs::read(&elsewhere).unwrap(), b"kept");
        assert_eq!(std::fs::read(&linked).unwrap(), b"secret");
        assert!(!std::fs::symlink_metadata(&linked).unwrap().is_symlink());
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["7.token", "8.token"]);
    }

    #[test]
    fn appends_json_lines_to_a_0600_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new").join("log.jsonl");
        append_json_line(&path, &serde_json::json!({"a": 1})).unwrap();
        append_json_line(&path, &serde_json::json!({"a": 2})).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"a\":1}\n{\"a\":2}\n"
        );
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
    }

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
