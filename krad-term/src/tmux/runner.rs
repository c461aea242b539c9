//! What runs in a pane: a small `sh` script that runs the terminal's program
//! and, once it ended, waits until tmux has read every byte it printed before
//! the pane may die.
//!
//! tmux lets a pane die as soon as its program ends, closing the terminal with
//! whatever the program printed last still unread in the kernel (tmux 3.7
//! checks `FIONREAD` for every pane, earlier versions only for piped ones, and
//! neither sees the bytes the kernel has not yet moved to the reading side):
//! a program that printed and ended at once lost its last lines, on its screen
//! and to the app. So the program runs as the child of this script, which then
//! writes a cursor position request (`CSI 6 n`, after a `CAN` that ends any
//! sequence the program left open) and reads tmux's answer: tmux answers in the
//! order it reads, so once the answer came, everything before it is on tmux's
//! screen. It waits half a second at most, then ends the way the program
//! ended: its exit code, or killed by the same signal (a code from 129 to 143
//! is taken as a signal, as shells report it).
//!
//! The script is the pane's process (`#{pane_pid}`, the terminal's pid): a
//! signal to it (SIGHUP, SIGTERM…) ends it and the kernel hangs the program up.
//! It ignores the SIGINT and SIGQUIT the terminal sends its whole group (the
//! program gets them), and says nothing when the program is killed.

/// The runner, for `sh -c`: the program's argv follows as `$@`.
const SCRIPT: &str = "trap : INT QUIT; exec 3>&2 2>/dev/null; (exec \"$@\" 2>&3 3>&-); s=$?; \
exec 2>&3 3>&-; \
if stty raw -echo min 0 time 5 2>/dev/null; then printf '\\030\\033[6n'; n=0; \
while [ $n -lt 8 ]; do r=$(dd bs=64 count=1 2>/dev/null); \
case $r in *R*|'') break;; esac; n=$((n+1)); done; fi; \
trap - INT QUIT; \
if [ $s -gt 128 ] && [ $s -lt 144 ]; then ulimit -c 0; kill -$((s-128)) $$; fi; exit $s";

/// The words before the program's argv on the pane's command line (`$0` is
/// `krad`, which names the runner in the shell's own messages).
pub(super) fn runner_argv() -> [&'static str; 4] {
    ["sh", "-c", SCRIPT, "krad"]
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt as _;
    use std::process::{Command, Output};

    use super::*;

    fn run(program: &[&str]) -> Output {
        let [sh, c, script, name] = runner_argv();
        Command::new(sh)
            .args([c, script, name])
            .args(program)
            .output()
            .unwrap()
    }

    #[test]
    fn the_runner_ends_as_its_program_ended() {
        let exited = run(&["sh", "-c", "echo out; echo err >&2; exit 3"]);
        assert_eq!(exited.status.code(), Some(3));
        assert_eq!(exited.stdout, b"out\n");
        assert_eq!(exited.stderr, b"err\n");

        let killed = run(&["sh", "-c", "kill -TERM $$"]);
        assert_eq!(killed.status.signal(), Some(15));
        // The shell's own word on a killed child ("Terminated") stays unsaid.
        assert_eq!(killed.stderr, b"");

        assert_eq!(run(&["true"]).status.code(), Some(0));
    }

    #[test]
    fn the_argv_is_run_as_it_is_and_a_missing_program_says_so() {
        let one = run(&["echo x"]);
        assert_eq!(one.status.code(), Some(127));
        assert!(String::from_utf8_lossy(&one.stderr).contains("echo x: not found"));
        let spaced = run(&["printf", "%s|", "a b", "$HOME", "*"]);
        assert_eq!(spaced.stdout, b"a b|$HOME|*|");
    }
}
