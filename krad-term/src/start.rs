//! Starting a PTY terminal's program, and waiting for it to end.
//!
//! The program is started with `posix_spawn`, which glibc runs as a clone
//! that shares the app's memory until the `exec` (`CLONE_VM | CLONE_VFORK`):
//! nothing of the app's address space is copied, however large it is. (A
//! `pre_exec` hook, which `std`'s `Command` needs for a new session, forces a
//! real `fork` instead, and its cost grows with the app.) In the new process,
//! before the `exec`:
//!
//! * `POSIX_SPAWN_SETSID` makes it the leader of a new session (and of its
//!   process group);
//! * the terminal's program side is opened as fd 0 without `O_NOCTTY`, which
//!   makes it the session's controlling terminal, and copied to fds 1 and 2;
//! * it moves to the program's directory; its signal mask is emptied and every
//!   signal goes back to its default action, as a terminal emulator (tmux
//!   among them) starts its programs: SIGPIPE, which the Rust runtime ignores,
//!   and whatever the app was started ignoring (SIGHUP under `nohup`).
//!
//! Its environment ([`Environment`]) is the app's own, encoded once (the app
//! never changes it), with a terminal's variables removed and added. The
//! program is looked up on the `PATH` it is given (not the app's), as
//! `execvp` would, so that a missing program is reported as one before
//! anything starts. The app then waits for it through a pidfd, on the runtime's
//! event loop, with no thread and no SIGCHLD handler of its own.
//!
//! The one place in krad that calls libc itself: `nix` and `rustix` have no
//! wrapper for `POSIX_SPAWN_SETSID` with a working directory.
#![allow(unsafe_code)]

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ffi::{CStr, CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use nix::unistd::{AccessFlags, access};
use rustix::process::{Pid, PidfdFlags, WaitIdOptions, WaitOptions};
use tokio::io::unix::AsyncFd;

use crate::ExitStatus;

/// What a program is started with.
pub(crate) struct Start<'a> {
    /// argv; `argv[0]` names the program (a path, or a name looked up on `PATH`).
    pub argv: &'a [String],
    /// Its working directory.
    pub cwd: &'a Path,
    /// Its whole environment.
    pub env: &'a Environment,
    /// The terminal's program side (`/dev/pts/N`).
    pub terminal: &'a CStr,
}

/// The `PATH` a program is looked up on when its environment has none (glibc's).
const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// A program's environment, ready for `exec`.
pub(crate) struct Environment {
    /// `NAME=value`: the app's own (encoded once) first, then the given ones.
    pairs: Vec<Cow<'static, CStr>>,
    /// Its `PATH`, if it has one.
    path: Option<OsString>,
}

impl Environment {
    /// The app's environment without the variables `removed` names or `given`
    /// sets, then `given`.
    pub(crate) fn of_app(
        removed: &[String],
        given: &BTreeMap<OsString, OsString>,
    ) -> io::Result<Self> {
        Self::build(app_environment(), removed, given)
    }

    fn build(
        inherited: &'static [(OsString, CString)],
        removed: &[String],
        given: &BTreeMap<OsString, OsString>,
    ) -> io::Result<Self> {
        let dropped =
            |key: &OsStr| given.contains_key(key) || removed.iter().any(|r| OsStr::new(r) == key);
        let mut pairs = Vec::with_capacity(inherited.len() + given.len());
        let mut path = None;
        for (key, pair) in inherited {
            if dropped(key) {
                continue;
            }
            if key == "PATH" {
                path = pair
                    .to_bytes()
                    .get(key.len() + 1..)
                    .map(|value| OsStr::from_bytes(value).to_os_string());
            }
            pairs.push(Cow::Borrowed(pair.as_c_str()));
        }
        for (key, value) in given {
            if key.is_empty() || key.as_bytes().contains(&b'=') {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{key:?} cannot name an environment variable"),
                ));
            }
            if key == "PATH" {
                path = Some(value.clone());
            }
            pairs.push(Cow::Owned(encode(key, value)?));
        }
        Ok(Self { pairs, path })
    }
}

/// The app's own environment, each variable with its `NAME=value`: read and
/// encoded the first time a program starts (nothing in krad changes it).
fn app_environment() -> &'static [(OsString, CString)] {
    static APP: OnceLock<Vec<(OsString, CString)>> = OnceLock::new();
    APP.get_or_init(|| {
        std::env::vars_os()
            .filter_map(|(key, value)| Some((key.clone(), encode(&key, &value).ok()?)))
            .collect()
    })
}

/// `NAME=value`, as `exec` takes it.
fn encode(key: &OsStr, value: &OsStr) -> io::Result<CString> {
    let mut pair = Vec::with_capacity(key.len() + 1 + value.len());
    pair.extend_from_slice(key.as_bytes());
    pair.push(b'=');
    pair.extend_from_slice(value.as_bytes());
    c_string(&pair, "an environment variable")
}

/// A started program, until it is reaped.
#[derive(Debug)]
pub(crate) struct Program {
    pid: Pid,
    /// Readable once the program ended; `None` on kernels without pidfds
    /// (before 5.3), where a blocking thread waits instead.
    pidfd: Option<AsyncFd<OwnedFd>>,
}

impl Program {
    /// Its process id.
    pub(crate) fn id(&self) -> u32 {
        self.pid.as_raw_nonzero().get().unsigned_abs()
    }

    /// Sends it SIGKILL (it is not reaped yet, so its pid is still its own).
    pub(crate) fn kill(&self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.pid.as_raw_nonzero().get()),
            nix::sys::signal::Signal::SIGKILL,
        );
    }

    /// Waits until it ended and reaps it.
    pub(crate) async fn wait(&mut self) -> io::Result<ExitStatus> {
        let Some(pidfd) = &self.pidfd else {
            let pid = self.pid;
            return tokio::task::spawn_blocking(move || {
                match rustix::process::waitpid(Some(pid), WaitOptions::empty())? {
                    Some((_, status)) => Ok(ExitStatus {
                        code: status.exit_status(),
                        signal: status.terminating_signal(),
                    }),
                    None => Err(io::Error::other("waitpid returned no status")),
                }
            })
            .await
            .map_err(io::Error::other)?;
        };
        loop {
            let mut ready = pidfd.readable().await?;
            let waited = rustix::process::waitid(
                rustix::process::WaitId::PidFd(pidfd.get_ref().as_fd()),
                WaitIdOptions::EXITED | WaitIdOptions::NOHANG,
            )?;
            match waited {
                Some(status) => {
                    return Ok(ExitStatus {
                        code: status.exit_status(),
                        signal: status.terminating_signal(),
                    });
                }
                None => ready.clear_ready(),
            }
        }
    }
}

/// Starts a program as described in the module's documentation. Must be
/// called within a tokio runtime (the pidfd joins its event loop).
///
/// A program that cannot be found or run fails with `NotFound`,
/// `PermissionDenied` or `ENOEXEC`, as `exec` would.
pub(crate) fn start(how: &Start<'_>) -> io::Result<Program> {
    let Some(name) = how.argv.first() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "no program given",
        ));
    };
    let path = find_program(name, how.cwd, how.env.path.as_deref())?;
    let argv = how
        .argv
        .iter()
        .map(|arg| c_string(arg.as_bytes(), "an argument"))
        .collect::<io::Result<Vec<_>>>()?;
    let env = &how.env.pairs;
    let cwd = c_string(how.cwd.as_os_str().as_bytes(), "the working directory")?;
    let program = c_string(path.as_os_str().as_bytes(), "the program's path")?;

    let pid = match spawn(&program, &argv, env, &cwd, how.terminal) {
        // What `execvp` does with a file the kernel cannot run (a script
        // without `#!`): run it with the shell.
        Err(error) if error.raw_os_error() == Some(libc::ENOEXEC) => {
            let shell = c"/bin/sh".to_owned();
            let mut with_shell = vec![shell.clone(), program.clone()];
            with_shell.extend(argv.iter().skip(1).cloned());
            spawn(&shell, &with_shell, env, &cwd, how.terminal).map_err(|_| error)?
        }
        started => started?,
    };
    // Not reaped by anyone yet, so this pid is still the program's.
    let pidfd = match rustix::process::pidfd_open(pid, PidfdFlags::empty()) {
        // SAFETY: the `AsyncFd` owns the pidfd: it stays open, and the same
        // descriptor, until the `AsyncFd` is dropped.
        Ok(fd) => {
            match unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) } {
                Ok(fd) => Some(fd),
                Err(error) => return Err(abandon(pid, error.into())),
            }
        }
        Err(rustix::io::Errno::NOSYS) => None,
        Err(error) => return Err(abandon(pid, error.into())),
    };
    Ok(Program { pid, pidfd })
}

/// Kills and reaps a program just started that cannot be waited for; `error`.
fn abandon(pid: Pid, error: io::Error) -> io::Error {
    Program { pid, pidfd: None }.kill();
    let _ = rustix::process::waitpid(Some(pid), WaitOptions::empty());
    error
}

/// The path `name` is run from: itself when it holds a `/`; otherwise the
/// first executable file of that name in a directory of the program's `PATH`
/// (relative directories are the program's working directory's).
fn find_program(name: &str, cwd: &Path, path: Option<&OsStr>) -> io::Result<PathBuf> {
    if name.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "empty program name",
        ));
    }
    if name.contains('/') {
        return Ok(PathBuf::from(name));
    }
    let path = path.unwrap_or(OsStr::new(DEFAULT_PATH));
    let mut denied = false;
    for dir in path.as_bytes().split(|&b| b == b':') {
        let dir = if dir.is_empty() {
            Path::new(".")
        } else {
            Path::new(OsStr::from_bytes(dir))
        };
        let candidate = cwd.join(dir).join(name);
        match std::fs::metadata(&candidate) {
            Ok(meta) if meta.is_file() && access(&candidate, AccessFlags::X_OK).is_ok() => {
                return Ok(candidate);
            }
            // `execvp` goes on past a file it may not run, and reports it if
            // nothing else is found.
            Ok(_) => denied = true,
            Err(error) if error.kind() == io::ErrorKind::PermissionDenied => denied = true,
            Err(_) => {}
        }
    }
    Err(if denied {
        io::Error::from(io::ErrorKind::PermissionDenied)
    } else {
        io::Error::from(io::ErrorKind::NotFound)
    })
}

fn c_string(bytes: &[u8], what: &str) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} holds a NUL byte"),
        )
    })
}

/// `posix_spawn` with the attributes and file actions of the module's
/// documentation; the new process's pid.
fn spawn(
    program: &CStr,
    argv: &[CString],
    env: &[Cow<'_, CStr>],
    cwd: &CStr,
    terminal: &CStr,
) -> io::Result<Pid> {
    let attributes = Attributes::new()?;
    let actions = FileActions::new(cwd, terminal)?;
    let argv = null_terminated(argv);
    let env = null_terminated(env);
    let mut pid: libc::pid_t = 0;
    // SAFETY: every pointer is valid for the call: `program` and the strings
    // of `argv` and `env` are NUL-terminated and outlive it, both arrays end
    // with a null pointer, and the attributes and file actions were
    // initialized (and are destroyed only after it).
    let error = unsafe {
        libc::posix_spawn(
            &mut pid,
            program.as_ptr(),
            actions.as_ptr(),
            attributes.as_ptr(),
            argv.as_ptr(),
            env.as_ptr(),
        )
    };
    check(error)?;
    Pid::from_raw(pid).ok_or_else(|| io::Error::other("posix_spawn returned no pid"))
}

/// The pointers of `strings`, then a null pointer, as `exec` takes them.
fn null_terminated<S: AsRef<CStr>>(strings: &[S]) -> Vec<*mut libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ref().as_ptr().cast_mut())
        .chain(std::iter::once(std::ptr::null_mut()))
        .collect()
}

/// An error number returned by a `posix_spawn*` function (0 for success).
fn check(error: libc::c_int) -> io::Result<()> {
    if error == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(error))
    }
}

/// Spawn attributes: a new session, an empty signal mask, every signal at its
/// default action — as a terminal emulator starts its shell: a signal the app
/// ignores (SIGHUP under `nohup`, SIGPIPE, which Rust ignores) is not ignored
/// by its programs, so that Close's SIGHUP ends them. Boxed: glibc's object is
/// not documented as movable once initialized.
struct Attributes(Box<libc::posix_spawnattr_t>);

impl Attributes {
    fn new() -> io::Result<Self> {
        // SAFETY: a zeroed `posix_spawnattr_t` is plain memory for `init` to fill;
        // it is destroyed (by `Drop`) only once initialized.
        let mut attr: Box<libc::posix_spawnattr_t> = Box::new(unsafe { std::mem::zeroed() });
        // SAFETY: `attr` points to writable memory of the right type.
        check(unsafe { libc::posix_spawnattr_init(&mut *attr) })?;
        let attributes = Self(attr);
        // SAFETY: sigset_t is plain memory, filled by sigemptyset/sigfillset.
        let mut empty: libc::sigset_t = unsafe { std::mem::zeroed() };
        let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: the sets are valid `sigset_t`s and the attributes initialized.
        unsafe {
            libc::sigemptyset(&mut empty);
            libc::sigfillset(&mut all);
            let attr = attributes.as_ptr().cast_mut();
            check(libc::posix_spawnattr_setsigmask(attr, &empty))?;
            check(libc::posix_spawnattr_setsigdefault(attr, &all))?;
            // All three fit a `c_short`, as `setflags` takes them.
            let flags = (libc::POSIX_SPAWN_SETSIGMASK | libc::POSIX_SPAWN_SETSIGDEF)
                as libc::c_short
                | libc::POSIX_SPAWN_SETSID;
            check(libc::posix_spawnattr_setflags(attr, flags))?;
        }
        Ok(attributes)
    }

    fn as_ptr(&self) -> *const libc::posix_spawnattr_t {
        &*self.0
    }
}

impl Drop for Attributes {
    fn drop(&mut self) {
        // SAFETY: initialized in `new` (a `Self` exists only once it was).
        unsafe { libc::posix_spawnattr_destroy(&mut *self.0) };
    }
}

/// Spawn file actions: the terminal opened as fd 0 (becoming the controlling
/// terminal of the new session) and copied to fds 1 and 2, then the move to
/// the working directory.
struct FileActions(Box<libc::posix_spawn_file_actions_t>);

impl FileActions {
    fn new(cwd: &CStr, terminal: &CStr) -> io::Result<Self> {
        // SAFETY: as for `Attributes::new`.
        let mut fa: Box<libc::posix_spawn_file_actions_t> = Box::new(unsafe { std::mem::zeroed() });
        // SAFETY: `fa` points to writable memory of the right type.
        check(unsafe { libc::posix_spawn_file_actions_init(&mut *fa) })?;
        let mut actions = Self(fa);
        // SAFETY: the actions are initialized; glibc copies the paths.
        unsafe {
            let fa: *mut libc::posix_spawn_file_actions_t = &mut *actions.0;
            check(libc::posix_spawn_file_actions_addopen(
                fa,
                0,
                terminal.as_ptr(),
                libc::O_RDWR,
                0,
            ))?;
            check(libc::posix_spawn_file_actions_adddup2(fa, 0, 1))?;
            check(libc::posix_spawn_file_actions_adddup2(fa, 0, 2))?;
            check(libc::posix_spawn_file_actions_addchdir_np(fa, cwd.as_ptr()))?;
        }
        Ok(actions)
    }

    fn as_ptr(&self) -> *const libc::posix_spawn_file_actions_t {
        &*self.0
    }
}

impl Drop for FileActions {
    fn drop(&mut self) {
        // SAFETY: initialized in `new` (a `Self` exists only once it was).
        unsafe { libc::posix_spawn_file_actions_destroy(&mut *self.0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_with_path(path: &str) -> Environment {
        let given = BTreeMap::from([(OsString::from("PATH"), OsString::from(path))]);
        Environment::build(&[], &[], &given).unwrap()
    }

    #[test]
    fn a_program_is_looked_up_on_its_own_path() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let tool = bin.join("tool");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = OsString::from(format!("/nonexistent:{}", bin.display()));
        let env = Some(path.as_os_str());
        assert_eq!(find_program("tool", dir.path(), env).unwrap(), tool);
        let missing = find_program("no-such-tool", dir.path(), env).unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
        // Not executable: permission denied, as exec says.
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o644)).unwrap();
        let denied = find_program("tool", dir.path(), env).unwrap_err();
        assert_eq!(denied.kind(), io::ErrorKind::PermissionDenied);
        // A relative PATH entry is the working directory's.
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(
            find_program("tool", dir.path(), Some(OsStr::new("bin"))).unwrap(),
            dir.path().join("bin").join("tool")
        );
        // A path is used as given.
        assert_eq!(
            find_program("./x", dir.path(), env).unwrap(),
            PathBuf::from("./x")
        );
    }

    /// The app's variables go on unless removed or given anew; given ones come
    /// last, and the `PATH` looked up is the one the program gets.
    #[test]
    fn an_environment_is_the_apps_minus_the_removed_plus_the_given() {
        let app = |key: &str, value: &str| {
            let key = OsString::from(key);
            let pair = encode(&key, OsStr::new(value)).unwrap();
            (key, pair)
        };
        let inherited: &'static [(OsString, CString)] = Box::leak(Box::new([
            app("HOME", "/home/a"),
            app("PATH", "/app/bin"),
            app("KRAD_ADE_TOKEN", "secret"),
            app("LANG", "C"),
        ]));
        let shown = |env: &Environment| -> Vec<String> {
            env.pairs
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect()
        };
        let given = BTreeMap::from([(OsString::from("LANG"), OsString::from("fr"))]);
        let env = Environment::build(inherited, &["KRAD_ADE_TOKEN".to_owned()], &given).unwrap();
        assert_eq!(shown(&env), ["HOME=/home/a", "PATH=/app/bin", "LANG=fr"]);
        assert_eq!(env.path.as_deref(), Some(OsStr::new("/app/bin")));
        // A given PATH is the one looked up; a removed one leaves none.
        let given = BTreeMap::from([(OsString::from("PATH"), OsString::from("/mine"))]);
        let env = Environment::build(inherited, &[], &given).unwrap();
        assert_eq!(env.path.as_deref(), Some(OsStr::new("/mine")));
        assert_eq!(shown(&env).last().map(String::as_str), Some("PATH=/mine"));
        let env = Environment::build(inherited, &["PATH".to_owned()], &BTreeMap::new()).unwrap();
        assert_eq!(env.path, None);
        // A name exec cannot take, or a NUL, is refused.
        for (key, value) in [("", "x"), ("A=B", "x"), ("A", "x\0y")] {
            let given = BTreeMap::from([(OsString::from(key), OsString::from(value))]);
            let refused = Environment::build(inherited, &[], &given).err().unwrap();
            assert_eq!(refused.kind(), io::ErrorKind::InvalidInput, "{key:?}");
        }
    }

    /// What the app ignores, its programs do not: started under `nohup`, the
    /// app ignores SIGHUP, and a program that inherited that would outlive
    /// Close's hang-up.
    #[tokio::test]
    async fn a_program_starts_with_no_signal_ignored_or_blocked() {
        // SIGUSR2: no other test of this process sends or expects it.
        // SAFETY: setting a signal's disposition to SIG_IGN runs no handler.
        let previous = unsafe { libc::signal(libc::SIGUSR2, libc::SIG_IGN) };
        assert_ne!(previous, libc::SIG_ERR);
        let dir = tempfile::tempdir().unwrap();
        let argv = [
            "sh".to_owned(),
            "-c".to_owned(),
            "grep -E '^Sig(Ign|Blk)' /proc/self/status > status".to_owned(),
        ];
        let mut program = start(&Start {
            argv: &argv,
            cwd: dir.path(),
            env: &env_with_path(DEFAULT_PATH),
            terminal: c"/dev/null",
        })
        .unwrap();
        let status = program.wait().await.unwrap();
        assert_eq!(status.code, Some(0), "{status:?}");
        let lines = std::fs::read_to_string(dir.path().join("status")).unwrap();
        let mask = |name: &str| {
            let line = lines.lines().find(|l| l.starts_with(name)).unwrap();
            u64::from_str_radix(line[name.len()..].trim(), 16).unwrap()
        };
        assert_eq!(mask("SigBlk:"), 0, "{lines}");
        // The standard signals (1 to 31). glibc's posix_spawn leaves its two
        // internal real-time signals (32, 33) ignored, and so does `std`.
        assert_eq!(mask("SigIgn:") & 0x7fff_ffff, 0, "{lines}");
    }
}
