//! Issue 18: terminals on an SSH host live in tmux there and outlive a dropped
//! link, a frozen sshd and a killed app; `krad stop` leaves nothing behind. The
//! host is a real sshd on 127.0.0.1 (see `ssh.rs`); its tmux is this machine's.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::ssh::{Sshd, app_with_host_logged, process_tree, signal_all};
use crate::support::{App, exit_code, stderr};

/// The agent every test runs on the host: it writes its pid to `pid_file`,
/// then counts, reading a line between two ticks and echoing it (a line
/// `report X` it also reports: `krad report idle -m X`). What a read that
/// timed out took of a line is kept for the next.
fn counter(pid_file: &Path) -> Value {
    json!([
        "bash",
        "-c",
        format!(
            "echo $$ > {}; i=0; part=; while :; do i=$((i+1)); echo tick $i; \
             if IFS= read -r -t 0.3 more; then line=$part$more; part=; echo \"got:$line\"; \
             case $line in report*) krad report idle -m \"${{line#report }}\";; esac; \
             else part=$part$more; fi; done",
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

/// An app with host `far` (in tmux there, logged), and a counter started on
/// it in a new worktree `worktree` (`start_counter`).
fn counter_on_a_host(worktree: &str) -> (Sshd, App, (u64, i32, PathBuf)) {
    let sshd = Sshd::start();
    let (app, _remote) = app_with_host_logged(&sshd, "");
    let counter = start_counter(&app, &sshd, worktree);
    (sshd, app, counter)
}

/// Freezes sshd and the sessions it forked (SIGSTOP), and waits until the app
/// sees the host `down`; gives the frozen processes (to SIGCONT).
fn freeze_until_down(sshd: &Sshd, app: &App) -> Vec<i32> {
    let frozen = process_tree(sshd.child.id());
    signal_all(&frozen, nix::sys::signal::Signal::SIGSTOP);
    let until = Instant::now() + Duration::from_secs(20);
    while host_status(app)["state"] != "down" {
        assert!(Instant::now() < until, "{}", host_status(app));
        std::thread::sleep(Duration::from_millis(100));
    }
    frozen
}

/// After a cut: the same program runs on (never restarted), its output since
/// shows on the screen, the record is not `exited`, and Send reaches it.
fn same_program_goes_on(app: &App, id: u64, pid: i32, pid_file: &Path, before: u64) {
    until_tick_above(app, id, before + 3, Duration::from_secs(60));
    assert!(alive(pid), "the program on the host died");
    assert_eq!(read_pid(pid_file), pid, "the program was started again");
    let record = app.record(id);
    assert_ne!(record["state"], "exited", "{record}");
    // Ticks on the screen may be output that was under way at the cut: the
    // terminal is taken back once Send stops answering `unavailable`.
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let sent =
            app.request(json!({"Send": {"target": id, "text": "after the cut", "enter": true}}));
        if sent["Sent"].is_object() {
            break;
        }
        assert_eq!(sent["Error"]["code"], "unavailable", "{sent}");
        assert_eq!(sent["Error"]["retryable"], true, "{sent}");
        assert!(Instant::now() < until, "never taken back: {sent}");
        std::thread::sleep(Duration::from_millis(100));
    }
    app.until_screen(id, "got:after the cut");
    // Its `krad` reaches the bus again (the same port on the host, its token).
    app.request(json!({"Send": {"target": id, "text": "report back again", "enter": true}}));
    app.until(id, Duration::from_secs(30), |r| {
        r["message"] == "back again"
    });
}

#[test]
fn a_host_terminal_in_tmux_outlives_a_killed_link() {
    let (_sshd, app, (id, pid, pid_file)) = counter_on_a_host("far-cut");
    // Keys reach the program before the cut too.
    app.request(json!({"Send": {"target": id, "text": "before", "enter": true}}));
    app.until_screen(id, "got:before");
    // An interactive shell (readline turns bracketed paste on).
    let shell = app.spawn(json!({"profile": "exec", "environment": "far-cut",
        "command": ["bash", "--norc", "--noprofile", "-i"], "env": {"PS1": "ready$ "}}))["terminal"]
        .as_u64()
        .unwrap();
    app.until_screen(shell, "ready$");
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
    // Text sent as a bracketed paste and Ctrl-B reach the shell through tmux
    // (no prefix key there): C-b moves readline's cursor back one letter.
    let sent = app.request(
        json!({"Send": {"target": shell, "text": "echo pasted-$((40+2)) ab", "keys": ["C-b"]}}),
    );
    assert!(sent["Sent"].is_object(), "{sent}");
    app.request(json!({"Send": {"target": shell, "text": "X", "enter": true}}));
    app.until_screen(shell, "pasted-42 aXb");
    // tmux turned bracketed paste on here as the shell did there: the text
    // went as a paste.
    let transcript = walk(app.dir.path())
        .into_iter()
        .find(|p| p.ends_with(format!("transcripts/{shell}.log")))
        .unwrap();
    let raw = String::from_utf8_lossy(&std::fs::read(transcript).unwrap()).into_owned();
    assert!(raw.contains("\u{1b}[?2004h"), "{raw:?}");
    // Attach (`krad attach`) shows the re-attached screen.
    let mut stream = app.connect();
    let envelope = app.envelope(json!({"Attach": {"target": id}}));
    std::io::Write::write_all(&mut stream, format!("{envelope}\n").as_bytes()).unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stream), &mut line).unwrap();
    let first: Value = serde_json::from_str(&line).unwrap();
    let data = first["Screen"]["data"].as_str().unwrap_or_default();
    let data = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, data).unwrap();
    let data = String::from_utf8_lossy(&data);
    assert!(data.contains("got:after the cut"), "{data:?}");
}

#[test]
fn a_host_terminal_in_tmux_outlives_a_frozen_sshd() {
    let (sshd, app, (id, pid, pid_file)) = counter_on_a_host("far-freeze");
    let before = last_tick(&app, id);
    // sshd and the sessions it forked stop answering; tmux's server (a daemon
    // of its own) and the program under it go on.
    let frozen = freeze_until_down(&sshd, &app);
    // The terminal shows it; the agent is not `exited`.
    app.until_screen(id, "link to host far is down");
    assert_ne!(app.record(id)["state"], "exited");
    assert!(alive(pid));
    // Send says so at once (no keys reach a pane it cannot see).
    let sent = app.request(json!({"Send": {"target": id, "text": "while down", "enter": true}}));
    let said = sent["Error"]["message"].as_str().unwrap_or_default();
    assert!(said.contains("link"), "{sent}");
    assert_eq!(sent["Error"]["code"], "unavailable", "{sent}");
    signal_all(&frozen, nix::sys::signal::Signal::SIGCONT);
    until_up_again(&app, 1);
    same_program_goes_on(&app, id, pid, &pid_file, before);
}

#[test]
fn a_host_terminal_in_tmux_outlives_sshd_stopped_for_30_s() {
    let (mut sshd, app, (id, pid, pid_file)) = counter_on_a_host("far-restart");
    let before = last_tick(&app, id);
    // sshd stops for 30 s (the outage under test), every link with it...
    let stopped = Instant::now();
    sshd.stop();
    let until = Instant::now() + Duration::from_secs(60);
    while host_status(&app)["state"] == "up" {
        assert!(Instant::now() < until, "still up: {}", host_status(&app));
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(30).saturating_sub(stopped.elapsed()));
    // ...and starts again: the app re-opens its link (reconnects).
    sshd.start_again();
    until_up_again(&app, 1);
    same_program_goes_on(&app, id, pid, &pid_file, before);
}

#[test]
fn a_killed_app_s_host_terminals_are_attached_again_by_the_next_app() {
    let (sshd, mut app, (id, pid, pid_file)) = counter_on_a_host("far-again");
    let go = sshd.dir.path().join("go");
    let ender = app.spawn(
        json!({"profile": "exec", "environment": "far-again", "command": ["sh", "-c",
        format!("echo waiting; while [ ! -f {} ]; do sleep 0.1; done; exit 7", go.display())]}),
    )["terminal"]
        .as_u64()
        .unwrap();
    app.until_screen(ender, "waiting");
    let port = host_status(&app)["remote_port"].as_u64().unwrap();
    let before = last_tick(&app, id);
    app.signal(nix::sys::signal::Signal::SIGKILL);
    app.wait_exit(Duration::from_secs(10));
    // While the app is away, one program ends (its status stays on the host).
    std::fs::write(&go, "").unwrap();
    let exit_file = host_file_eventually(&sshd, &format!("{ender}.exit"));
    assert_eq!(std::fs::read_to_string(exit_file).unwrap().trim(), "7");
    let app = crate::ssh::again_with_host(app, &sshd, "");
    // The same terminal ids, the records as they were; the program never restarted.
    let record = app.record(id);
    assert_eq!(record["host"], "far", "{record}");
    assert_ne!(record["state"], "exited", "{record}");
    let ended = app.until(ender, Duration::from_secs(60), |r| r["state"] == "exited");
    assert_eq!(ended["exit_code"], 7, "{ended}");
    same_program_goes_on(&app, id, pid, &pid_file, before);
    // On the port the last run had (the programs were told it).
    assert_eq!(host_status(&app)["remote_port"].as_u64().unwrap(), port);
}

#[test]
fn krad_stop_leaves_nothing_of_its_host_terminals_behind() {
    let (sshd, mut app, (_id, pid, _pid_file)) = counter_on_a_host("far-stop");
    let home = sshd.dir.path().join("home");
    let on_host = format!("{}/.krad-ade", home.display());
    assert!(
        !pgrep(&on_host).is_empty(),
        "no tmux server of krad's on the host"
    );
    let control = std::env::temp_dir()
        .join(format!("krad-ssh-{}", nix::unistd::geteuid()))
        .join(format!("{}-far", app.pid));
    assert!(control.exists());
    let out = app.krad(&["stop"]);
    assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
    app.wait_exit(Duration::from_secs(30));
    // On the host: no program, no tmux server, no file of krad's.
    let until = Instant::now() + Duration::from_secs(10);
    while alive(pid) || !pgrep(&on_host).is_empty() {
        assert!(
            Instant::now() < until,
            "left on the host: {:?}",
            pgrep(&on_host)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let files: Vec<_> = walk(&home.join(".krad-ade"));
    assert!(files.is_empty(), "files left on the host: {files:?}");
    // Here: no control socket, no ssh of the app's.
    assert!(!control.exists(), "{}", control.display());
    let ssh = pgrep(&format!("krad-ssh-.*/{}-far", app.pid));
    assert!(ssh.is_empty(), "ssh processes left: {ssh:?}");
}

/// Every file under `dir` (none when it is missing).
fn walk(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .flat_map(|e| {
            let path = e.path();
            if path.is_dir() {
                walk(&path)
            } else {
                vec![path]
            }
        })
        .collect()
}

/// The file `name` in one of the app's folders on the host, once it is there.
fn host_file_eventually(sshd: &Sshd, name: &str) -> PathBuf {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let found = walk(&sshd.dir.path().join("home/.krad-ade"))
            .into_iter()
            .find(|p| p.file_name().is_some_and(|n| n == name));
        if let Some(path) = found {
            return path;
        }
        assert!(Instant::now() < until, "no {name} on the host");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A TCP proxy on `port` to `to`, from now on (the bus's forward back).
fn proxy(port: u16, to: std::net::SocketAddr) {
    let listener = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let upstream = std::net::TcpStream::connect(to).unwrap();
            let (mut c_read, mut u_write) =
                (client.try_clone().unwrap(), upstream.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut c_read, &mut u_write);
                let _ = u_write.shutdown(std::net::Shutdown::Write);
            });
            let (mut u_read, mut c_write) = (upstream, client);
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut u_read, &mut c_write);
                let _ = c_write.shutdown(std::net::Shutdown::Write);
            });
        }
    });
}

#[test]
fn a_report_from_a_terminal_waits_for_a_refused_bus_to_come_back() {
    use std::io::BufRead;
    let app = App::start();
    let id = app.spawn_sh("sleep 600");
    let token_file = app.token_dir().join(format!("{id}.token"));
    // The bus's forward is gone (as on a host while its link is down).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let endpoint = format!("127.0.0.1:{port}");
    let krad = |terminal: bool, retry: bool| {
        let mut command = Command::new(crate::support::KRAD);
        command
            .args(["report", "idle", "-m", "through the gap"])
            .env("KRAD_ADE_ENDPOINT", &endpoint)
            .env("KRAD_ADE_TOKEN_FILE", &token_file)
            .env_remove("KRAD_ADE_TOKEN")
            .env_remove("KRAD_ADE_API_JSON")
            .env_remove("KRAD_ADE_ENVIRONMENT")
            .env_remove("KRAD_ADE_TERMINAL")
            .env_remove("KRAD_ADE_RETRY_SECS")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if terminal {
            command
                .env("KRAD_ADE_ENVIRONMENT", "main")
                .env("KRAD_ADE_TERMINAL", id.to_string());
        }
        if retry {
            // What the app gives a terminal on an SSH host.
            command.env("KRAD_ADE_RETRY_SECS", "60");
        }
        command
    };
    // Outside a terminal, nothing is tried again: unreachable at once.
    let out = krad(false, true).output().unwrap();
    assert_eq!(exit_code(&out), 7, "{}", stderr(&out));
    // Nor from a terminal on this machine (no KRAD_ADE_RETRY_SECS): its hooks
    // must not hang on an app that is not running.
    let out = krad(true, false).output().unwrap();
    assert_eq!(exit_code(&out), 7, "{}", stderr(&out));
    // From a terminal, the call says it waits, and goes through once the bus is back.
    let mut cli = krad(true, true).spawn().unwrap();
    let mut said = std::io::BufReader::new(cli.stderr.take().unwrap());
    let mut line = String::new();
    said.read_line(&mut line).unwrap();
    assert!(line.contains("retrying for up to 60 s"), "{line}");
    proxy(port, app.endpoint);
    goes_through(cli, said, &app, id, "through the gap");
}

#[test]
fn with_the_local_tmux_host_a_killed_app_s_host_terminals_are_taken_back() {
    let sshd = Sshd::start();
    let extra = format!("\n{}", crate::tmux::TMUX);
    let (mut app, _remote) = crate::ssh::app_with_host_configured(&sshd, "", &extra);
    let (id, pid, pid_file) = start_counter(&app, &sshd, "far-local-tmux");
    let before = last_tick(&app, id);
    app.signal(nix::sys::signal::Signal::SIGKILL);
    app.wait_exit(Duration::from_secs(10));
    let app = crate::ssh::again_with_host(app, &sshd, &extra);
    // The new app takes it back from tmux on the host (whatever the local
    // terminal host), re-opens the link and gives the program its new token.
    assert_ne!(app.record(id)["state"], "exited");
    same_program_goes_on(&app, id, pid, &pid_file, before);
}

#[test]
fn a_host_terminal_closed_while_the_link_is_down_ends_there_once_it_is_back() {
    let (sshd, app, (id, pid, _pid_file)) = counter_on_a_host("far-close");
    let token = host_file_eventually(&sshd, &format!("{id}.token"));
    let frozen = freeze_until_down(&sshd, &app);
    // Closed here at once; the program there goes on meanwhile.
    assert_eq!(app.request(json!({"Close": {"target": id}})), json!("Ok"));
    assert!(alive(pid));
    signal_all(&frozen, nix::sys::signal::Signal::SIGCONT);
    until_up_again(&app, 1);
    // Once the link is back, its session and files there go.
    let until = Instant::now() + Duration::from_secs(30);
    while alive(pid) || token.exists() {
        assert!(
            Instant::now() < until,
            "the closed terminal lives on on the host"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A host with tmux and a worktree `env` on it: the app, and the host's sshd.
fn app_with_worktree(sshd: &Sshd, env: &str) -> App {
    let (app, _remote) = app_with_host_logged(sshd, "");
    let created = app.request(json!({"CreateWorktree": {"name": env, "host": "far"}}));
    assert!(created["Environment"].is_object(), "{created}");
    assert_eq!(host_status(&app)["tmux"], true, "this host has tmux");
    app
}

/// Starts `script` (for `sh -c`) in a terminal of `env` on the host.
fn spawn_on_host(app: &App, env: &str, script: &str) -> u64 {
    app.spawn(json!({"profile": "exec", "environment": env, "command": ["sh", "-c", script]}))
        ["terminal"]
        .as_u64()
        .unwrap()
}

#[test]
fn osc_notifications_and_7501_states_of_a_host_terminal_reach_the_app() {
    let sshd = Sshd::start();
    let app = app_with_worktree(&sshd, "far-osc");
    // OSC 9 and OSC 777 (notifications) decide the state from the screen, as here.
    for (osc, state, message) in [
        (
            "9;Approval requested: rm -rf build",
            "asking",
            "Approval requested: rm -rf build",
        ),
        (
            "777;notify;Codex;Turn complete",
            "idle",
            "Codex: Turn complete",
        ),
    ] {
        let script = format!("echo busy; sleep 0.3; printf '\\033]{osc}\\007'; sleep 60");
        let notifying = spawn_on_host(&app, "far-osc", &script);
        let record = app.until_state(notifying, state);
        assert_eq!(record["state_source"], "screen", "{record}");
        assert_eq!(record["message"], message, "{record}");
    }
    // Codex's OSC 7501 state announcements.
    let announcing = spawn_on_host(
        &app,
        "far-osc",
        "printf '\\033]7501;state=blocked:app=x:kind=permission\\033\\\\'; read a; \
         printf '\\033]7501;state=done\\033\\\\'; sleep 30",
    );
    let asking = app.until_state(announcing, "asking");
    assert_eq!(asking["state_source"], "hook", "{asking}");
    assert_eq!(asking["message"], "needs your approval");
    app.request(json!({"Send": {"target": announcing, "text": "a", "enter": true}}));
    let idle = app.until_state(announcing, "idle");
    assert_eq!(idle["state_source"], "hook", "{idle}");
}

#[test]
fn twelve_terminals_on_a_host_whose_sshd_allows_10_sessions_all_work() {
    // `Sshd::start` keeps sshd's default `MaxSessions 10`: one ssh session per
    // terminal would fail the 10th.
    let sshd = Sshd::start();
    let app = app_with_worktree(&sshd, "far-many");
    let ids: Vec<u64> = (0..12)
        .map(|n| {
            spawn_on_host(
                &app,
                "far-many",
                &format!("echo ready-{n}; read line; echo \"got-{n}:$line\"; sleep 60"),
            )
        })
        .collect();
    for (n, id) in ids.iter().enumerate() {
        app.until_screen(*id, &format!("ready-{n}"));
    }
    for (n, id) in ids.iter().enumerate() {
        let sent = app
            .request(json!({"Send": {"target": id, "text": format!("hello {n}"), "enter": true}}));
        assert!(sent["Sent"].is_object(), "{sent}");
    }
    for (n, id) in ids.iter().enumerate() {
        app.until_screen(*id, &format!("got-{n}:hello {n}"));
        assert_ne!(app.record(*id)["state"], "exited");
    }
    // All through the one link: no ssh fell back to a connection of its own
    // when the link refused it a session.
    assert_eq!(
        connections_to(sshd.port),
        1,
        "connections to the host's sshd"
    );
}

/// This machine's established TCP connections to `port` on 127.0.0.1 (their
/// client side).
fn connections_to(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let to = format!("0100007F:{port:04X}");
    table
        .lines()
        .skip(1)
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.get(2) == Some(&to.as_str()) && fields.get(3) == Some(&"01")
        })
        .count()
}

#[test]
fn host_terminals_whose_tmux_server_died_while_the_link_was_down_end_without_a_code() {
    let (sshd, app, (id, pid, _pid_file)) = counter_on_a_host("far-reboot");
    let frozen = freeze_until_down(&sshd, &app);
    // The host "reboots": the app's tmux server there dies with its programs.
    let on_host = format!("{}/.krad-ade", sshd.dir.path().join("home").display());
    let servers = pgrep(&on_host);
    assert!(!servers.is_empty(), "no tmux server of krad's on the host");
    signal_all(&servers, nix::sys::signal::Signal::SIGKILL);
    signal_all(&[pid], nix::sys::signal::Signal::SIGKILL);
    assert_ne!(
        app.record(id)["state"],
        "exited",
        "ended before the link was back"
    );
    signal_all(&frozen, nix::sys::signal::Signal::SIGCONT);
    until_up_again(&app, 1);
    let ended = app.until(id, Duration::from_secs(30), |r| r["state"] == "exited");
    assert_eq!(ended["exit_code"], Value::Null, "{ended}");
    let message = ended["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("is gone") && message.contains("host restarted"),
        "{ended}"
    );
}

/// A `krad report` left retrying succeeds within 60 s, and its message lands.
fn goes_through(
    mut cli: std::process::Child,
    mut said: impl std::io::Read,
    app: &App,
    id: u64,
    message: &str,
) {
    let until = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = cli.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < until, "the call never went through");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut rest = String::new();
    let _ = said.read_to_string(&mut rest);
    assert!(status.success(), "{status}: {rest}");
    app.until(id, Duration::from_secs(10), |r| r["message"] == message);
}

/// A restarted app whose host no longer runs terminals in tmux (here: turned
/// off in the config) lets go of the terminals kept there: they end `exited`
/// without a code, rather than wait for ever.
#[test]
fn kept_host_terminals_end_when_the_host_no_longer_runs_them_in_tmux() {
    let sshd = Sshd::start();
    let mut app = app_with_worktree(&sshd, "far-off");
    let id = spawn_on_host(&app, "far-off", "echo started; sleep 86400");
    app.until_screen(id, "started");
    app.signal(nix::sys::signal::Signal::SIGKILL);
    app.wait_exit(Duration::from_secs(10));
    let app = crate::ssh::again_with_host(app, &sshd, "tmux = false\n");
    let ended = app.until(id, Duration::from_secs(60), |r| r["state"] == "exited");
    assert!(ended["exit_code"].is_null(), "{ended}");
    assert_eq!(host_status(&app)["tmux"], false);
}
