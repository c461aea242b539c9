//! Issue 18: terminals on an SSH host live in tmux there and outlive a dropped
//! link, a frozen sshd and a killed app; `krad stop` leaves nothing behind. The
//! host is a real sshd on 127.0.0.1 (see `ssh.rs`); its tmux is this machine's.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::ssh::{Sshd, app_with_host_logged};
use crate::support::App;

/// The agent every test runs on the host: it writes its pid to `pid_file`,
/// then counts, reading a line between two ticks and echoing it.
fn counter(pid_file: &Path) -> Value {
    json!([
        "bash",
        "-c",
        format!(
            "echo $$ > {}; i=0; while :; do i=$((i+1)); echo tick $i; if read -r -t 0.3 line; then echo \"got:$line\"; fi; done",
            pid_file.display()
        )
    ])
}

fn host_status(app: &App) -> Value {
    app.request(json!("Hosts"))["Hosts"][0].clone()
}

fn screen(app: &App, id: u64) -> String {
    app.request(json!({"Output": {"target": id}}))["Output"]["screen"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The highest `tick N` on the terminal's screen.
fn last_tick(app: &App, id: u64) -> u64 {
    screen(app, id)
        .lines()
        .filter_map(|l| l.trim().strip_prefix("tick ")?.parse().ok())
        .max()
        .unwrap_or(0)
}

/// Waits until the screen shows a tick above `above` (the program ran on and
/// its output reached the screen); returns it.
fn until_tick_above(app: &App, id: u64, above: u64, limit: Duration) -> u64 {
    let until = Instant::now() + limit;
    loop {
        let tick = last_tick(app, id);
        if tick > above {
            return tick;
        }
        assert!(
            Instant::now() < until,
            "no tick above {above} on terminal {id}: {}\n{}",
            screen(app, id),
            app.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn read_pid(path: &Path) -> i32 {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(pid) = std::fs::read_to_string(path)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            return pid;
        }
        assert!(Instant::now() < until, "{} never written", path.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn alive(pid: i32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
}

/// The pids of the processes whose command line matches `pattern`.
fn pgrep(pattern: &str) -> Vec<i32> {
    let out = Command::new("pgrep")
        .args(["-f", "--", pattern])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Waits for the link to be up again after a cut, re-opened at least `reconnects` times.
fn until_up_again(app: &App, reconnects: u64) {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let status = host_status(app);
        if status["state"] == "up" && status["reconnects"].as_u64().unwrap() >= reconnects {
            return;
        }
        assert!(Instant::now() < until, "the link never came back: {status}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Starts the counter on the host in a new worktree; its id and pid there.
fn start_counter(app: &App, sshd: &Sshd, worktree: &str) -> (u64, i32, PathBuf) {
    let env = app.request(json!({"CreateWorktree": {"name": worktree, "host": "far"}}));
    assert!(env["Environment"].is_object(), "{env}");
    assert_eq!(host_status(app)["tmux"], true, "this host has tmux");
    let pid_file = sshd.dir.path().join(format!("{worktree}.pid"));
    let id = app
        .spawn(json!({"profile": "exec", "environment": worktree, "command": counter(&pid_file)}))
        ["terminal"]
        .as_u64()
        .unwrap();
    app.until_screen(id, "tick 2");
    (id, read_pid(&pid_file), pid_file)
}

/// After a cut: the same program runs on (never restarted), its output since
/// shows on the screen, the record is not `exited`, and Send reaches it.
fn same_program_goes_on(app: &App, id: u64, pid: i32, pid_file: &Path, before: u64) {
    until_tick_above(app, id, before + 3, Duration::from_secs(60));
    assert!(alive(pid), "the program on the host died");
    assert_eq!(read_pid(pid_file), pid, "the program was started again");
    let record = app.record(id);
    assert_ne!(record["state"], "exited", "{record}");
    let sent = app.request(json!({"Send": {"target": id, "text": "after the cut", "enter": true}}));
    assert!(sent["Sent"].is_object(), "{sent}");
    app.until_screen(id, "got:after the cut");
}

#[test]
fn a_host_terminal_in_tmux_outlives_a_killed_link() {
    let sshd = Sshd::start();
    let (app, _remote) = app_with_host_logged(&sshd, "");
    let (id, pid, pid_file) = start_counter(&app, &sshd, "far-cut");
    // Keys reach the program before the cut too.
    app.request(json!({"Send": {"target": id, "text": "before", "enter": true}}));
    app.until_screen(id, "got:before");
    let masters = pgrep(&format!("-M -N -S .*krad-ssh-.*/{}-far", app.pid));
    assert_eq!(masters.len(), 1, "{masters:?}");
    let before = last_tick(&app, id);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(masters[0]),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    until_up_again(&app, 1);
    same_program_goes_on(&app, id, pid, &pid_file, before);
}
