//! A memory limit per terminal through cgroup v2 (`[limits] memory_max_mib`),
//! where the machine delegates it: cgroup2 is mounted, the app's own cgroup
//! is writable by the app and has the `memory` controller in its
//! `cgroup.subtree_control`. A terminal's first process then goes, right
//! after it starts, into a child cgroup of the app's (`krad-terminal-<id>`)
//! whose `memory.max` is the limit; what it starts later goes there too.
//! The kernel reclaims, then kills inside that cgroup only, not the machine.
//!
//! Where delegation does not exist (cgroup v1 or hybrid, a v2 cgroup not
//! writable, or without `memory` in its subtree), [`Delegation::detect`]
//! says why, `krad api` shows it, and a Spawn under a config asking for a
//! limit is answered `invalid` with that reason and what to do.
//!
//! Every path here is relative to a root standing in for /sys/fs/cgroup, so
//! that the detection and the writes are tested against a temporary dir.

use std::path::{Path, PathBuf};

use krad_bus::protocol::{ApiError, ErrorCode};

/// Where cgroup2 is mounted on a unified machine.
pub const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// What to do where delegation does not exist, said with each refusal.
const HOW_TO_DELEGATE: &str = "run the app in a cgroup v2 scope delegated to it, e.g. \
     `systemd-run --user --scope -p Delegate=yes krad serve` on a machine booted with \
     the unified hierarchy, or remove memory_max_mib from [limits] and the profiles";

/// Whether the app may put its terminals in memory-limited cgroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delegation {
    /// Yes: children of this cgroup dir get the limit.
    Delegated(PathBuf),
    /// No, and why (for `krad api`, the docs and a refused Spawn).
    Unavailable(String),
}

impl Delegation {
    /// Detects delegation on this machine, for this process.
    pub fn detect() -> Delegation {
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        Delegation::detect_at(Path::new(CGROUP_ROOT), &own)
    }

    /// Detects delegation under `root` (the cgroup2 mount) for a process
    /// whose /proc/self/cgroup reads `own`.
    pub fn detect_at(root: &Path, own: &str) -> Delegation {
        if !root.join("cgroup.controllers").is_file() {
            return Delegation::Unavailable(format!(
                "cgroup v2 is not mounted at {} (cgroup v1 or hybrid)",
                root.display()
            ));
        }
        // On a unified machine the one line is `0::/path`.
        let Some(path) = own.lines().find_map(|l| l.strip_prefix("0::")) else {
            return Delegation::Unavailable(
                "this process has no cgroup v2 path in /proc/self/cgroup".to_owned(),
            );
        };
        let dir = root.join(path.trim().trim_start_matches('/'));
        let subtree =
            std::fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default();
        if !subtree.split_whitespace().any(|c| c == "memory") {
            return Delegation::Unavailable(format!(
                "the app's cgroup {} does not enable the memory controller for its children \
                 (cgroup.subtree_control)",
                dir.display()
            ));
        }
        if !writable(&dir) {
            return Delegation::Unavailable(format!(
                "the app's cgroup {} is not writable by the app (not delegated)",
                dir.display()
            ));
        }
        Delegation::Delegated(dir)
    }

    /// One line for `krad api`.
    pub fn describe(&self) -> String {
        match self {
            Delegation::Delegated(dir) => format!("cgroup v2, delegated ({})", dir.display()),
            Delegation::Unavailable(why) => format!("unavailable: {why}"),
        }
    }

    /// Checks a config asking for `limit_mib` against what is delegated.
    pub fn check(&self, limit_mib: Option<u64>) -> Result<(), ApiError> {
        match (self, limit_mib) {
            (Delegation::Unavailable(why), Some(mib)) => Err(ApiError::new(
                ErrorCode::Invalid,
                format!(
                    "memory_max_mib = {mib} ([limits] or the profile) asks for a memory \
                     limit per terminal, but this machine does not delegate cgroup v2 to the app: {why}; \
                     {HOW_TO_DELEGATE}"
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Puts process `pid` of terminal `id` in a child cgroup limited to
    /// `limit_mib`; returns that child's dir (removed by [`release`]).
    pub fn confine(&self, id: u64, pid: u32, limit_mib: u64) -> Result<PathBuf, String> {
        let Delegation::Delegated(dir) = self else {
            return Err("no cgroup v2 delegation".to_owned());
        };
        let child = dir.join(format!("krad-terminal-{id}"));
        let fail =
            |what: &str, e: std::io::Error| format!("cannot {what} in {}: {e}", child.display());
        match std::fs::create_dir(&child) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(fail("create the cgroup", e)),
        }
        let bytes = limit_mib.saturating_mul(1024 * 1024);
        std::fs::write(child.join("memory.max"), bytes.to_string())
            .map_err(|e| fail("write memory.max", e))?;
        std::fs::write(child.join("cgroup.procs"), pid.to_string())
            .map_err(|e| fail("move the terminal's process", e))?;
        Ok(child)
    }
}

/// This machine's delegation, detected once per process.
pub fn here() -> &'static Delegation {
    static HERE: std::sync::OnceLock<Delegation> = std::sync::OnceLock::new();
    HERE.get_or_init(Delegation::detect)
}

/// Removes terminal `id`'s child cgroup, if it has one, once it exited.
pub(crate) fn forget(id: u64) {
    if let Delegation::Delegated(dir) = here() {
        let child = dir.join(format!("krad-terminal-{id}"));
        if child.exists() {
            release(&child);
        }
    }
}

/// Removes a terminal's child cgroup once its processes are gone (the
/// kernel refuses while any is left; that is not an error worth more than
/// a debug line).
pub fn release(child: &Path) {
    if let Err(e) = std::fs::remove_dir(child) {
        tracing::debug!("cgroup {} not removed: {e}", child.display());
    }
}

/// Whether this process may create entries in `dir`.
fn writable(dir: &Path) -> bool {
    nix::unistd::access(dir, nix::unistd::AccessFlags::W_OK).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unified(root: &Path, subtree: &str) -> PathBuf {
        std::fs::write(root.join("cgroup.controllers"), "cpu memory pids\n").unwrap();
        let dir = root.join("user.slice/krad.scope");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cgroup.subtree_control"), subtree).unwrap();
        dir
    }

    #[test]
    fn delegation_needs_cgroup2_a_path_and_memory_in_the_subtree() {
        let root = tempfile::tempdir().unwrap();
        let own = "0::/user.slice/krad.scope\n";
        let v1 = Delegation::detect_at(root.path(), "4:memory:/x\n0::/\n");
        assert!(
            matches!(&v1, Delegation::Unavailable(why) if why.contains("v1 or hybrid")),
            "{v1:?}"
        );
        let dir = unified(root.path(), "cpu pids\n");
        let no_memory = Delegation::detect_at(root.path(), own);
        assert!(
            matches!(&no_memory, Delegation::Unavailable(why) if why.contains("memory controller")),
            "{no_memory:?}"
        );
        let no_path = Delegation::detect_at(root.path(), "4:memory:/x\n");
        assert!(matches!(no_path, Delegation::Unavailable(_)));
        std::fs::write(dir.join("cgroup.subtree_control"), "cpu memory\n").unwrap();
        assert_eq!(
            Delegation::detect_at(root.path(), own),
            Delegation::Delegated(dir.clone())
        );
        assert!(
            Delegation::Delegated(dir)
                .describe()
                .starts_with("cgroup v2, delegated")
        );
    }

    #[test]
    fn a_limit_without_delegation_is_refused_saying_why_and_what_to_do() {
        let none = Delegation::Unavailable("cgroup v2 is not mounted".to_owned());
        assert!(none.check(None).is_ok());
        let refused = none.check(Some(512)).unwrap_err();
        assert_eq!(refused.code, ErrorCode::Invalid);
        assert!(
            refused.message.contains("memory_max_mib = 512"),
            "{}",
            refused.message
        );
        assert!(
            refused.message.contains("not mounted"),
            "{}",
            refused.message
        );
        assert!(
            refused.message.contains("Delegate=yes"),
            "{}",
            refused.message
        );
        assert!(none.confine(1, 1, 512).is_err());
    }

    #[test]
    fn confining_writes_memory_max_and_the_pid_in_a_child_cgroup() {
        let root = tempfile::tempdir().unwrap();
        let dir = unified(root.path(), "memory\n");
        let delegated = Delegation::detect_at(root.path(), "0::/user.slice/krad.scope\n");
        assert!(delegated.check(Some(256)).is_ok());
        let child = delegated.confine(7, 4242, 256).unwrap();
        assert_eq!(child, dir.join("krad-terminal-7"));
        assert_eq!(
            std::fs::read_to_string(child.join("memory.max")).unwrap(),
            (256u64 * 1024 * 1024).to_string()
        );
        assert_eq!(
            std::fs::read_to_string(child.join("cgroup.procs")).unwrap(),
            "4242"
        );
        // Again (a restart re-confining): the child is reused.
        assert!(delegated.confine(7, 4243, 128).is_ok());
        assert_eq!(
            std::fs::read_to_string(child.join("memory.max")).unwrap(),
            (128u64 * 1024 * 1024).to_string()
        );
        // The kernel's files vanish with the cgroup; here remove them first.
        std::fs::remove_file(child.join("memory.max")).unwrap();
        std::fs::remove_file(child.join("cgroup.procs")).unwrap();
        release(&child);
        assert!(!child.exists());
    }
}
