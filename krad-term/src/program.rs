//! What both hosts share about a terminal's program: the checks before starting
//! it, the log of its start ([`log_started`]: its program and how many
//! arguments it has, its whole argv only on [`ARGV_TARGET`] once
//! [`log_full_argv`] allowed it), its process group and the SIGKILL that ends
//! what is left of it after the grace, and the error a terminal that has ended
//! answers with.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

use nix::errno::Errno;
use nix::sys::signal::killpg;
use nix::unistd::Pid;

use crate::{SpawnError, SpawnSpec};

/// The program of `spec`, once it is known to name one and its working
/// directory exists.
pub(crate) fn checked_program(spec: &SpawnSpec) -> Result<&str, SpawnError> {
    let Some(program) = spec.argv.first() else {
        return Err(SpawnError::Program {
            program: String::new(),
            source: io::Error::new(io::ErrorKind::InvalidInput, "no program given"),
        });
    };
    if !spec.cwd.is_dir() {
        return Err(SpawnError::NoDirectory(spec.cwd.clone()));
    }
    Ok(program)
}

/// Whether `spec` sets or removes `TERM` (otherwise the program gets
/// [`DEFAULT_TERM`](crate::pty::DEFAULT_TERM)).
pub(crate) fn names_term(spec: &SpawnSpec) -> bool {
    spec.env_remove.iter().any(|k| k == "TERM") || spec.env.iter().any(|(k, _)| k == "TERM")
}

/// The process group of the program with `pid` (it leads its own).
pub(crate) fn pgid(pid: u32) -> Option<Pid> {
    i32::try_from(pid)
        .ok()
        .filter(|&p| p > 0)
        .map(Pid::from_raw)
}

/// Whether nothing is left of the process group `pgid`.
pub(crate) fn group_gone(pgid: Pid) -> bool {
    killpg(pgid, None) == Err(Errno::ESRCH)
}

/// Logs how the SIGKILL sent after a close's grace went: the program, or what it
/// left in its group (a process ignoring SIGHUP), was still there, or nothing was.
pub(crate) fn log_grace_kill(id: u64, killed: nix::Result<()>) {
    match killed {
        Ok(()) => tracing::debug!(terminal = id, "still there after the grace: SIGKILL"),
        Err(Errno::ESRCH) => {}
        Err(error) => tracing::debug!(terminal = id, %error, "cannot send SIGKILL"),
    }
}

/// What a write or resize gets once the terminal has ended.
pub(crate) fn ended() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "the terminal has ended")
}

/// The tracing target a terminal's whole argv is logged on, at trace, and only
/// once [`log_full_argv`] allowed it (`RUST_LOG=krad::argv=trace`): an argv may
/// hold a prompt, or whatever secret a user put there.
pub const ARGV_TARGET: &str = "krad::argv";

static FULL_ARGV: AtomicBool = AtomicBool::new(false);

/// Allows the whole argv on [`ARGV_TARGET`] (the app calls it when `RUST_LOG`
/// names that target itself; a bare `RUST_LOG=trace` is not enough).
pub fn log_full_argv(allowed: bool) {
    FULL_ARGV.store(allowed, Ordering::Relaxed);
}

/// Logs that a terminal started: its program and the number of its arguments
/// (debug); its whole argv only on [`ARGV_TARGET`] at trace, when allowed.
/// Its environment is never logged.
pub(crate) fn log_started(what: &str, id: u64, pid: Option<u32>, argv: &[String]) {
    let program = argv.first().map(String::as_str).unwrap_or_default();
    let args = argv.len().saturating_sub(1);
    tracing::debug!(terminal = id, ?pid, program, args, "{what} started");
    if FULL_ARGV.load(Ordering::Relaxed) {
        tracing::trace!(target: ARGV_TARGET, terminal = id, ?argv, "{what} argv");
    }
}
