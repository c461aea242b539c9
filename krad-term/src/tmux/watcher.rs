//! The watchdog: a thread per control client that looks at the followed
//! programs (on an SSH host, asks tmux about them), for the ends tmux misses.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::common::lock;
use super::connection::Connection;
use super::exit::ask_exit;

/// How often the watchdog looks at the followed programs.
const WATCH_EVERY: Duration = Duration::from_millis(250);
/// How often the watchdog of a client on an SSH host (whose programs it cannot
/// see) asks tmux for the followed programs' ends.
const ASK_REMOTE_EVERY: Duration = Duration::from_secs(2);

/// The watchdog: tmux (3.3, with a control client) sometimes misses a
/// program's end — the process stays a zombie, unreaped, and the `pane-died`
/// hook never runs. A zombie makes the watchdog send the server the SIGCHLD it
/// missed; a program gone without a word makes it ask for the exit status.
pub(super) fn watch(connection: &std::sync::Weak<Connection>) {
    let mut asked: HashMap<String, Instant> = HashMap::new();
    loop {
        std::thread::sleep(WATCH_EVERY);
        let Some(connection) = connection.upgrade() else {
            return;
        };
        if connection.ended() {
            return;
        }
        let followed = lock(&connection.followed).clone();
        if connection.remote.is_some() {
            // Its programs' pids are the host's: ask tmux now and then.
            let due = asked
                .get("")
                .is_none_or(|at| at.elapsed() >= ASK_REMOTE_EVERY);
            if due {
                asked.insert(String::new(), Instant::now());
                for pane in followed.keys() {
                    ask_exit(&connection, pane);
                }
            }
            continue;
        }
        asked.retain(|pane, _| followed.contains_key(pane));
        let mut nudge = false;
        for (pane, pid) in followed {
            match process_state(pid) {
                Some('Z') => nudge = true,
                Some(_) => {}
                None => {
                    let due = asked
                        .get(&pane)
                        .is_none_or(|at| at.elapsed() > Duration::from_secs(1));
                    if due {
                        asked.insert(pane.clone(), Instant::now());
                        ask_exit(&connection, &pane);
                    }
                }
            }
        }
        if nudge && let Some(server) = connection.server {
            let _ = nix::sys::signal::kill(server, Signal::SIGCHLD);
        }
    }
}

/// A process's state letter (`R`, `S`, `Z`…), or `None` once it is gone.
fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}
