//! A child's process group, killed (SIGKILL) when dropped or on demand: what a
//! program started in its own group (`process_group(0)`) leaves behind goes
//! with it. Shared by extensions' servers and the app's `Code`.

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// The process group of a child started with `process_group(0)`.
#[derive(Debug)]
pub struct ProcessGroup(Option<Pid>);

impl ProcessGroup {
    /// The group led by the child whose pid is `pid` (`None`: nothing to kill).
    pub fn of(pid: Option<u32>) -> ProcessGroup {
        ProcessGroup(
            pid.and_then(|pid| i32::try_from(pid).ok())
                .map(Pid::from_raw),
        )
    }

    /// SIGKILL to every process of the group.
    pub fn kill(&self) {
        if let Some(pgid) = self.0 {
            let _ = killpg(pgid, Signal::SIGKILL);
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}
