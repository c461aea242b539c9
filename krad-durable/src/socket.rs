//! The private Unix socket of the durable facet: the seed's rules for its
//! folder and modes, and the one check the app makes on a caller. The path rules
//! are [`crate::socket_path`]'s, re-exported here.
//!
//! | rule | where |
//! |---|---|
//! | the path is absolute, at most [`MAX_PATH`] bytes | [`check_path`] |
//! | the socket's folder is ours and 0700, made if missing | [`bind_private`] |
//! | a stale socket file is removed before listening; a live one is left alone | [`bind_private`] |
//! | the socket is 0600 | [`bind_private`] |
//! | only the file we bound is removed at shutdown | [`BoundSocket::remove_if_ours`] |
//! | the app's own descendants are refused (`403 caller-refused`) | [`is_own_descendant`] |
//! | so are the programs of its terminals, wherever they run (tmux) | [`runs_in_a_terminal`] |
//!
//! The walk Collie makes before every connection (no symlink, no writable parent)
//! is [`crate::doctor`]'s; [`bind_private`] runs it after binding and logs a
//! warning when Collie would refuse the path, since the app cannot fix a parent
//! folder it does not own.

use std::fs;
use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use crate::doctor::{self, DoctorCode};
pub use crate::socket_path::{MAX_PATH, SocketError, check_path};

/// How long [`bind_private`] waits for a connection to an existing socket file
/// before deciding something holds it.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// How many parents [`is_own_descendant`] follows at most (a guard against a
/// `/proc` that changes under the walk and loops).
const MAX_ANCESTRY: usize = 4096;

/// The socket file [`bind_private_tracked`] made, as it was right after binding,
/// so that shutdown removes that file and never one another process bound at the
/// same path since.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundSocket {
    /// Where the socket was bound.
    pub path: PathBuf,
    /// The device of the socket file.
    pub dev: u64,
    /// The inode of the socket file.
    pub ino: u64,
    /// Its change time (seconds, nanoseconds) once chmodded: a freed inode can
    /// be given at once to the next file made, so device and inode alone may
    /// name another process's socket.
    ctime: (i64, i64),
}

impl BoundSocket {
    /// Records the socket file now at `path` (call it right after binding and
    /// chmodding: a later chmod makes it look replaced, and it is then left).
    pub fn record(path: &Path) -> Result<BoundSocket, SocketError> {
        let meta = fs::symlink_metadata(path).map_err(|e| {
            SocketError(format!(
                "cannot read the socket {} just bound: {e}",
                path.display()
            ))
        })?;
        Ok(BoundSocket {
            path: path.to_path_buf(),
            dev: meta.dev(),
            ino: meta.ino(),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        })
    }

    /// Removes the socket file if it is still the one bound (a socket with the
    /// same device, inode and change time). Returns whether it removed it; a
    /// file that is gone or was replaced is left alone.
    pub fn remove_if_ours(&self) -> bool {
        match fs::symlink_metadata(&self.path) {
            Ok(meta)
                if meta.file_type().is_socket()
                    && meta.dev() == self.dev
                    && meta.ino() == self.ino
                    && (meta.ctime(), meta.ctime_nsec()) == self.ctime =>
            {
                match fs::remove_file(&self.path) {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::warn!(path = %self.path.display(), "cannot remove the durable socket: {e}");
                        false
                    }
                }
            }
            _ => false,
        }
    }
}

/// Binds the private socket at `path`: makes its folder (0700, ours, not a
/// symlink), removes a stale socket file, binds and chmods the socket 0600.
/// Must be called inside a tokio runtime.
///
/// Use [`bind_private_tracked`] to also get the [`BoundSocket`] that removes the
/// file at shutdown.
pub fn bind_private(path: &Path) -> Result<tokio::net::UnixListener, SocketError> {
    bind_private_tracked(path).map(|(listener, _)| listener)
}

/// [`bind_private`], also returning the [`BoundSocket`] to remove at shutdown
/// with [`BoundSocket::remove_if_ours`].
pub fn bind_private_tracked(
    path: &Path,
) -> Result<(tokio::net::UnixListener, BoundSocket), SocketError> {
    check_path(path)?;
    let folder = socket_folder(path)?;
    make_private_folder(folder)?;
    remove_stale(path)?;
    let listener = tokio::net::UnixListener::bind(path).map_err(|e| {
        SocketError(format!(
            "cannot listen on {}: {e}{}",
            path.display(),
            if e.kind() == ErrorKind::AddrInUse {
                " (another process bound it just now: is another app serving there?)"
            } else {
                ""
            }
        ))
    })?;
    if let Err(e) = fs::set_permissions(path, fs::Permissions::from_mode(0o600)) {
        // Just bound by us in our 0700 folder: ours to remove.
        let _ = fs::remove_file(path);
        return Err(SocketError(format!(
            "cannot make the socket {} private (chmod 600): {e}",
            path.display()
        )));
    }
    let bound = BoundSocket::record(path)?;
    let report = doctor::walk(path);
    if !report.ok {
        tracing::warn!(
            path = %path.display(),
            "Collie will refuse this socket path ({}): {}; see `krad durable doctor`",
            report.code.unwrap_or(DoctorCode::SocketNotPrivate),
            report.problem.as_deref().unwrap_or("the walk failed"),
        );
    }
    Ok((listener, bound))
}

/// The socket's own folder, which the app owns and keeps 0700: never `/`.
fn socket_folder(path: &Path) -> Result<&Path, SocketError> {
    match path.parent() {
        Some(folder)
            if folder
                .components()
                .any(|c| matches!(c, Component::Normal(_))) =>
        {
            Ok(folder)
        }
        _ => Err(SocketError(format!(
            "the socket {} must be in a folder of its own (made 0700), not in /: \
             use a path such as /run/user/1000/krad/durable.sock",
            path.display()
        ))),
    }
}

/// Makes the socket's folder if missing (its parents as usual, itself 0700), or
/// checks that the existing one is a real folder we own and chmods it 0700.
fn make_private_folder(folder: &Path) -> Result<(), SocketError> {
    let shown = folder.display();
    match fs::symlink_metadata(folder) {
        Err(e) if e.kind() == ErrorKind::NotFound => {
            if let Some(parent) = folder.parent() {
                fs::create_dir_all(parent).map_err(|e| {
                    SocketError(format!("cannot make the folder {}: {e}", parent.display()))
                })?;
            }
            match fs::DirBuilder::new().mode(0o700).create(folder) {
                Ok(()) => {}
                // Made meanwhile by someone else: checked below like any existing one.
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
                Err(e) => {
                    return Err(SocketError(format!(
                        "cannot make the socket's folder {shown}: {e}"
                    )));
                }
            }
            check_own_folder(folder)
        }
        Err(e) => Err(SocketError(format!(
            "cannot read the socket's folder {shown}: {e}"
        ))),
        Ok(_) => check_own_folder(folder),
    }
}

/// The socket's existing folder: not a symlink, a folder, ours; chmod 0700.
fn check_own_folder(folder: &Path) -> Result<(), SocketError> {
    let shown = folder.display();
    let meta = fs::symlink_metadata(folder)
        .map_err(|e| SocketError(format!("cannot read the socket's folder {shown}: {e}")))?;
    let kind = meta.file_type();
    if kind.is_symlink() {
        return Err(SocketError(format!(
            "the socket's folder {shown} is a symbolic link, which Collie refuses: \
             give the real path, or a folder of its own"
        )));
    }
    if !kind.is_dir() {
        return Err(SocketError(format!(
            "{shown} is not a folder: the socket needs a folder of its own"
        )));
    }
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me {
        return Err(SocketError(format!(
            "the socket's folder {shown} belongs to uid {}, not to you (uid {me}): \
             use a folder of your own",
            meta.uid()
        )));
    }
    if meta.mode() & 0o777 != 0o700 {
        fs::set_permissions(folder, fs::Permissions::from_mode(0o700)).map_err(|e| {
            SocketError(format!(
                "cannot make the socket's folder {shown} private (chmod 700): {e}"
            ))
        })?;
    }
    Ok(())
}

/// Removes a socket file nobody answers on. A path that is not a socket, or a
/// socket a live process listens on, is refused and left alone.
fn remove_stale(path: &Path) -> Result<(), SocketError> {
    let shown = path.display();
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(SocketError(format!("cannot read {shown}: {e}"))),
    };
    if !meta.file_type().is_socket() {
        return Err(SocketError(format!(
            "{shown} exists and is not a socket: krad will not remove it; \
             move it away or pick another socket path"
        )));
    }
    match probe(path) {
        Probe::Gone => Ok(()),
        Probe::Stale => match fs::remove_file(path) {
            Ok(()) => {
                tracing::info!(path = %shown, "removed a stale durable socket");
                Ok(())
            }
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(SocketError(format!(
                "cannot remove the stale socket {shown}: {e}"
            ))),
        },
        Probe::Live => Err(SocketError(format!(
            "a process is already listening on {shown} (another app serving the durable facet?): \
             stop it, or pick another socket path"
        ))),
        Probe::Unknown(e) => Err(SocketError(format!(
            "cannot tell whether {shown} is in use ({e}): remove it by hand if nothing serves there"
        ))),
    }
}

/// What a connection attempt says about an existing socket file.
enum Probe {
    /// Nothing listens: the file is left over.
    Stale,
    /// The file went away meanwhile.
    Gone,
    /// A process accepted, or holds it without answering in time.
    Live,
    /// Another failure.
    Unknown(std::io::Error),
}

/// Connects to the socket at `path` from a helper thread, so that a listener
/// whose backlog is full (a blocking connect) costs at most [`PROBE_TIMEOUT`].
fn probe(path: &Path) -> Probe {
    let (tx, rx) = mpsc::channel();
    let target = path.to_path_buf();
    let spawned = std::thread::Builder::new()
        .name("krad-socket-probe".to_owned())
        .spawn(move || {
            let _ = tx.send(std::os::unix::net::UnixStream::connect(&target));
        });
    if let Err(e) = spawned {
        return Probe::Unknown(e);
    }
    match rx.recv_timeout(PROBE_TIMEOUT) {
        Ok(Ok(_stream)) => Probe::Live,
        Ok(Err(e)) => match e.kind() {
            ErrorKind::ConnectionRefused => Probe::Stale,
            ErrorKind::NotFound => Probe::Gone,
            _ => Probe::Unknown(e),
        },
        Err(_) => Probe::Live,
    }
}

/// True when `pid` is this process or one of its descendants, by the parent
/// pids of `/proc/<pid>/stat` up to pid 1. A step that cannot be read (no
/// `/proc`, as on macOS, or a process that ended) ends the walk with false.
///
/// Note: when the app itself is pid 1 (a container's init), every process is its
/// descendant.
pub fn is_own_descendant(pid: i32) -> bool {
    let Ok(me) = i32::try_from(std::process::id()) else {
        return false;
    };
    let mut current = pid;
    for _ in 0..MAX_ANCESTRY {
        if current == me {
            return true;
        }
        if current <= 1 {
            return false;
        }
        match fs::read(format!("/proc/{current}/stat"))
            .ok()
            .and_then(|stat| parent_pid(&stat))
        {
            Some(parent) => current = parent,
            None => return false,
        }
    }
    false
}

/// Verdicts kept by [`Callers`] before it starts afresh (each holds a pidfd).
const KEPT_VERDICTS: usize = 64;

/// Tells the app's own agents from other callers, remembering the verdict per
/// process: Collie connects anew for every poll, and the walk up a caller's
/// parents reads `/proc` once per parent. A process's verdict cannot turn from
/// "outside the app" to "inside" (processes are never adopted by the app), so a
/// kept one stays right; one that turns the other way (an agent orphaned) stays
/// refused.
///
/// A verdict is kept with a pidfd of its process (`pidfd_open`): while that
/// process runs, its pid names no other, so a later connection from the same
/// pid is the same process when the pidfd does not yet poll readable (it does
/// once the process exits). That is one `poll` per connection, where reading
/// the process's start time from `/proc/PID/stat` cost an open, a read the
/// kernel formats ~50 fields for, and a close. Without pidfds (Linux before
/// 5.3), nothing is kept and every connection is looked at afresh.
///
/// The `poll` is made outside the lock: a thread preempted at that system
/// call's return would otherwise hold up every other connection's check for
/// its whole time off the CPU.
#[derive(Default)]
pub struct Callers {
    verdicts: std::sync::Mutex<std::collections::HashMap<i32, Arc<Verdict>>>,
}

/// A kept verdict and the process it is about.
struct Verdict {
    own: bool,
    process: std::os::fd::OwnedFd,
}

impl Callers {
    /// True when `pid` is one of the app's own: a descendant, or a program of
    /// one of its terminals ([`is_own_descendant`], [`runs_in_a_terminal`]).
    pub fn is_own(&self, pid: i32) -> bool {
        let lock = || self.verdicts.lock().unwrap_or_else(|p| p.into_inner());
        let kept = lock().get(&pid).cloned();
        if let Some(kept) = kept {
            if still_running(&kept.process) {
                return kept.own;
            }
            // Gone: drop it, unless another connection already put a newer
            // verdict in its place.
            let mut verdicts = lock();
            if verdicts
                .get(&pid)
                .is_some_and(|now| Arc::ptr_eq(now, &kept))
            {
                verdicts.remove(&pid);
            }
        }
        // Opened before looking: the verdict is then about this process or a
        // later one with its pid, never kept for a process that came after.
        let process = rustix::process::Pid::from_raw(pid).and_then(|p| {
            rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok()
        });
        let own = runs_in_a_terminal(pid) || is_own_descendant(pid);
        if let Some(process) = process {
            let mut verdicts = lock();
            if verdicts.len() >= KEPT_VERDICTS {
                verdicts.clear();
            }
            verdicts.insert(pid, Arc::new(Verdict { own, process }));
        }
        own
    }
}

/// Whether the process of a pidfd has not exited (its pidfd polls readable
/// once it has). An error counts as exited: the verdict is made afresh.
fn still_running(process: &std::os::fd::OwnedFd) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let mut fds = [PollFd::new(process, PollFlags::IN)];
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    matches!(poll(&mut fds, Some(&now)), Ok(0))
}

/// The variable every krad terminal's program gets (see docs/agents.md).
const TERMINAL_VARIABLE: &[u8] = b"KRAD_ADE_TERMINAL=";

/// True when `pid` runs in a krad terminal: its environment names one. This
/// catches the agents of a terminal host whose processes are not the app's
/// descendants (tmux runs them under its own server). A process whose
/// environment cannot be read is not taken for one.
pub fn runs_in_a_terminal(pid: i32) -> bool {
    fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
        environ
            .split(|&b| b == 0)
            .any(|entry| entry.starts_with(TERMINAL_VARIABLE))
    })
}

/// The parent pid in the text of `/proc/<pid>/stat`: `pid (comm) state ppid …`,
/// where comm may hold spaces and `)`, so the fields start after the last `)`.
fn parent_pid(stat: &[u8]) -> Option<i32> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(stat.get(close + 1..)?).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let _state = fields.next()?;
    fields.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::symlink_metadata(path).unwrap().mode() & 0o7777
    }

    #[tokio::test]
    async fn binds_in_a_new_private_folder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/krad.sock");
        let (listener, bound) = bind_private_tracked(&path).unwrap();
        assert_eq!(mode(&dir.path().join("a/b")), 0o700);
        assert_eq!(mode(&path), 0o600);
        assert!(fs::symlink_metadata(&path).unwrap().file_type().is_socket());

        let client = tokio::spawn({
            let path = path.clone();
            async move { tokio::net::UnixStream::connect(&path).await }
        });
        let (_server_side, _) = listener.accept().await.unwrap();
        client.await.unwrap().unwrap();

        drop(listener);
        assert!(bound.remove_if_ours());
        assert!(!path.exists());
        assert!(!bound.remove_if_ours());
    }

    #[tokio::test]
    async fn chmods_an_existing_folder_of_ours() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("sockets");
        fs::create_dir(&folder).unwrap();
        fs::set_permissions(&folder, fs::Permissions::from_mode(0o755)).unwrap();
        let _listener = bind_private(&folder.join("krad.sock")).unwrap();
        assert_eq!(mode(&folder), 0o700);
    }

    #[tokio::test]
    async fn refuses_a_symlinked_folder_and_a_non_socket() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        fs::create_dir(&real).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let error = bind_private(&link.join("krad.sock"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("symbolic link"), "{error}");

        let file = real.join("krad.sock");
        fs::write(&file, b"not a socket").unwrap();
        let error = bind_private(&file).unwrap_err().to_string();
        assert!(error.contains("not a socket"), "{error}");
        assert_eq!(fs::read(&file).unwrap(), b"not a socket");

        let error = bind_private(Path::new("/krad.sock"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("folder of its own"), "{error}");
    }

    #[tokio::test]
    async fn removes_a_stale_socket_but_not_a_live_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s/krad.sock");
        fs::create_dir(dir.path().join("s")).unwrap();

        // Stale: bound by a listener that is gone (std leaves the file behind).
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        assert!(path.exists());
        let (first, bound) = bind_private_tracked(&path).unwrap();

        // Live: the first listener still answers.
        let error = bind_private(&path).unwrap_err().to_string();
        assert!(error.contains("already listening"), "{error}");
        assert!(path.exists());

        // Replaced: shutdown of the first must not remove another's socket.
        // (Moved away rather than removed, so that its inode stays taken.)
        drop(first);
        let moved = dir.path().join("s/old.sock");
        fs::rename(&path, &moved).unwrap();
        let _second = std::os::unix::net::UnixListener::bind(&path).unwrap();
        assert!(!bound.remove_if_ours());
        assert!(path.exists());
    }

    #[test]
    fn parses_parent_pids_with_odd_names() {
        assert_eq!(parent_pid(b"42 (krad) S 7 42 42 0 -1"), Some(7));
        assert_eq!(parent_pid(b"42 (a b) c) R 99 1 1"), Some(99));
        assert_eq!(parent_pid(b"42 (x)"), None);
        assert_eq!(parent_pid(b"garbage"), None);
    }

    #[test]
    fn knows_its_own_descendants() {
        let me = i32::try_from(std::process::id()).unwrap();
        assert!(is_own_descendant(me));
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        let descendant = is_own_descendant(pid);
        child.kill().unwrap();
        child.wait().unwrap();
        if Path::new("/proc/self/stat").exists() {
            assert!(descendant);
            assert!(!is_own_descendant(1));
            let parent = i32::try_from(std::os::unix::process::parent_id()).unwrap();
            assert!(!is_own_descendant(parent));
        }
        assert!(!is_own_descendant(0));
        assert!(!is_own_descendant(-5));
        assert!(!is_own_descendant(i32::MAX));
    }

    #[test]
    fn callers_keep_their_verdict_per_process() {
        if !Path::new("/proc/self/stat").exists() {
            return;
        }
        let callers = Callers::default();
        let mut plain = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let mut agent = std::process::Command::new("sleep")
            .arg("5")
            .env("KRAD_ADE_TERMINAL", "3")
            .spawn()
            .unwrap();
        let plain_pid = i32::try_from(plain.id()).unwrap();
        let agent_pid = i32::try_from(agent.id()).unwrap();
        // A child's environment shows in /proc once its exec has laid it out,
        // which may be a moment after spawn returns.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !runs_in_a_terminal(agent_pid) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(runs_in_a_terminal(agent_pid));
        assert!(!runs_in_a_terminal(plain_pid));
        // Both are this test's children: descendants, hence "own".
        assert!(callers.is_own(plain_pid) && callers.is_own(agent_pid));
        assert_eq!(callers.verdicts.lock().unwrap().len(), 2, "kept");
        assert!(callers.is_own(plain_pid), "the kept verdict");
        assert!(!callers.is_own(1));
        // A process gone: its kept verdict goes with it (its pid may be
        // another process's next), and the verdict is made afresh.
        plain.kill().unwrap();
        plain.wait().unwrap();
        assert!(!callers.is_own(plain_pid), "a reaped pid is no descendant");
        assert!(!callers.verdicts.lock().unwrap().contains_key(&plain_pid));
        assert!(callers.is_own(agent_pid), "the other verdict is still kept");
        agent.kill().unwrap();
        agent.wait().unwrap();
    }
}
