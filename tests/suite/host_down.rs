//! Issue 40: a host that goes down says so at once, and its agents come back at
//! once. Each case of docs/hosts.md ("When the link drops") with a real sshd on
//! 127.0.0.1 (see `ssh.rs`): sshd stopped, the control connection killed, sshd
//! frozen and continued, and a wrong token from a terminal.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::ssh::{Sshd, app_with_host_configured, process_tree, signal_all};
use crate::support::{App, code, exit_code, stderr, stdout, stretched};

fn host_status(app: &App) -> Value {
    app.request(json!("Hosts"))["Hosts"][0].clone()
}

/// Polls `Hosts` until `check` holds (at most `limit`); the status then.
fn until_host(app: &App, limit: Duration, check: impl Fn(&Value) -> bool) -> Value {
    let until = Instant::now() + limit;
    loop {
        let status = host_status(app);
        if check(&status) {
            return status;
        }
        assert!(
            Instant::now() < until,
            "the host never got there: {status}\n{}",
            app.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Polls until terminal `id`'s message is `message` (at most `limit`); says
/// what its screen shows if it never is.
fn until_message(app: &App, id: u64, message: &str, limit: Duration) {
    let until = Instant::now() + limit;
    while app.record(id)["message"] != message {
        assert!(
            Instant::now() < until,
            "terminal {id} never said {message:?}: {}\nscreen: {}",
            app.record(id),
            app.request(json!({"Output": {"target": id}}))["Output"]["screen"]
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// An app with host `far` (`extra` lines in its table) and a worktree `env` there.
fn app_with_env_on_host(sshd: &Sshd, env: &str, extra: &str) -> App {
    let (app, _remote) = app_with_host_configured(sshd, "", extra);
    let created = app.request(json!({"CreateWorktree": {"name": env, "host": "far"}}));
    assert!(created["Environment"].is_object(), "{created}");
    app
}

/// An `unavailable` answer, retryable, whose one-line message says `because`.
fn assert_unavailable(answer: &Value, because: &str) {
    assert_eq!(code(answer), "unavailable", "{answer}");
    assert_eq!(answer["Error"]["retryable"], true, "{answer}");
    let message = answer["Error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.to_lowercase().contains(because),
        "no {because:?} in: {answer}"
    );
    assert!(
        !message.contains('\n') && !message.contains('\r'),
        "{answer}"
    );
}

/// sshd stopped with every session it serves, for both terminal hosts on the
/// host: `down` with ssh's own reason, and every request that needs the host
/// (Spawn, CheckHost, CreateWorktree) `unavailable` at once with it; sshd back,
/// the link is up again and a Spawn there works.
#[test]
fn sshd_stopped_is_down_with_ssh_s_reason_and_requests_are_unavailable_at_once() {
    let _bound = crate::support::latency_bound();
    for extra in ["", "tmux = false\n"] {
        let mut sshd = Sshd::start();
        let app = app_with_env_on_host(&sshd, "far-stop", extra);
        assert_eq!(host_status(&app)["state"], "up");
        sshd.stop();
        let stopped = Instant::now();
        let down = until_host(&app, Duration::from_secs(20), |s| {
            s["state"] == "down"
                && s["error"]
                    .as_str()
                    .is_some_and(|e| e.contains("Connection refused"))
        });
        eprintln!(
            "[{extra:?}] down with the reason after {:?}",
            stopped.elapsed()
        );
        assert!(down["since"].is_string(), "{down}");
        for request in [
            json!({"Spawn": {"profile": "exec", "environment": "far-stop", "command": ["true"]}}),
            json!({"CheckHost": {"name": "far"}}),
            json!({"CreateWorktree": {"name": "far-other", "host": "far"}}),
        ] {
            let asked = Instant::now();
            let answer = app.request(request.clone());
            assert_unavailable(&answer, "connection refused");
            assert!(
                !answer["Error"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("`git "),
                "the host's reason, not a git command line: {answer}"
            );
            assert!(
                asked.elapsed() < stretched(Duration::from_secs(2)),
                "{request} took {:?}",
                asked.elapsed()
            );
        }
        // The CLI says the same, exit 1 for `hosts check`.
        let out = app.krad(&["hosts", "check", "far"]);
        assert_eq!(exit_code(&out), 1, "{}", stdout(&out));
        assert!(
            stderr(&out).contains("Connection refused"),
            "{}",
            stderr(&out)
        );
        // Local requests are not held up.
        let asked = Instant::now();
        let local = app.spawn_sh("echo here; sleep 60");
        app.until_screen(local, "here");
        assert!(asked.elapsed() < Duration::from_secs(10));
        sshd.start_again();
        until_host(&app, Duration::from_secs(20), |s| s["state"] == "up");
        let id = spawn_in(
            &app,
            "far-stop",
            json!(["sh", "-c", "krad report idle -m back; sleep 60"]),
        );
        app.until(id, Duration::from_secs(30), |r| r["message"] == "back");
    }
}

/// Spawns `command` with the exec profile in `environment`; its terminal.
fn spawn_in(app: &App, environment: &str, command: Value) -> u64 {
    let answer = app.request(
        json!({"Spawn": {"profile": "exec", "environment": environment, "command": command}}),
    );
    answer["Agent"]["terminal"]
        .as_u64()
        .unwrap_or_else(|| panic!("{answer}"))
}

/// The reporter agent (see [`reporter`]) in an environment, once it made its
/// first report (`tick 1`), and the file that asks it for the next.
struct Reporter {
    id: u64,
    go: std::path::PathBuf,
    _flags: tempfile::TempDir,
}

impl Reporter {
    fn start(app: &App, environment: &str) -> Reporter {
        let flags = tempfile::tempdir().unwrap();
        let id = spawn_in(app, environment, reporter(flags.path()));
        let go = flags.path().join("go");
        std::fs::write(&go, "").unwrap();
        until_message(app, id, "tick 1", Duration::from_secs(30));
        Reporter {
            id,
            go,
            _flags: flags,
        }
    }
}

/// The agent every link test runs on the host: it reports `tick N` each time
/// the file `go` appears (and removes it), so a test can ask for a report at
/// a moment of its choice.
fn reporter(dir: &Path) -> Value {
    json!([
        "sh",
        "-c",
        format!(
            "i=0; while :; do if [ -e {d}/go ]; then rm -f {d}/go; i=$((i+1)); \
             krad report idle -m \"tick $i\"; fi; sleep 0.05; done",
            d = dir.display()
        )
    ])
}

/// The control connection killed: the link is re-opened, and an agent's
/// report asked for while it was down gets through within 2 s of the link
/// being up again; one asked for after it is back, at once.
#[test]
fn after_a_killed_control_connection_an_agent_s_reports_get_through_within_2_s_of_the_link() {
    let _bound = crate::support::latency_bound();
    for extra in ["", "tmux = false\n"] {
        let sshd = Sshd::start();
        let app = app_with_env_on_host(&sshd, "far-cut", extra);
        let agent = Reporter::start(&app, "far-cut");
        let (id, go) = (agent.id, agent.go.clone());
        let port = host_status(&app)["remote_port"].as_u64().unwrap();
        let pattern = format!("-M -N -S .*krad-ssh-.*/{}-far", app.pid);
        let killed = Command::new("pkill")
            .args(["-KILL", "-f", "--", &pattern])
            .status()
            .unwrap();
        assert!(killed.success(), "no master ssh matched");
        if extra.is_empty() {
            // In tmux the program goes on, and asks for a report while the link is down.
            std::fs::write(&go, "").unwrap();
        }
        let up = until_host(&app, Duration::from_secs(30), |s| {
            s["state"] == "up" && s["reconnects"].as_u64().unwrap_or(0) >= 1
        });
        let back = Instant::now();
        assert_eq!(up["remote_port"].as_u64().unwrap(), port, "{up}");
        if extra.is_empty() {
            until_message(&app, id, "tick 2", Duration::from_secs(30));
            let late = back.elapsed();
            eprintln!("the report asked for while down got through {late:?} after the link");
            assert!(late < stretched(Duration::from_secs(2)), "{late:?}");
            let asked = Instant::now();
            std::fs::write(&go, "").unwrap();
            until_message(&app, id, "tick 3", Duration::from_secs(30));
            assert!(
                asked.elapsed() < stretched(Duration::from_secs(2)),
                "{:?}",
                asked.elapsed()
            );
        } else {
            // Without tmux the terminal ended with its link; a new one reports at once.
            app.until(id, Duration::from_secs(30), |r| r["state"] == "exited");
            let asked = Instant::now();
            let again = spawn_in(
                &app,
                "far-cut",
                json!(["sh", "-c", "krad report idle -m fresh; sleep 60"]),
            );
            app.until(again, Duration::from_secs(30), |r| r["message"] == "fresh");
            eprintln!(
                "a new terminal reported {:?} after the link",
                back.elapsed()
            );
            assert!(
                asked.elapsed() < Duration::from_secs(10),
                "{:?}",
                asked.elapsed()
            );
        }
    }
}

/// sshd frozen (SIGSTOP on it and its sessions): `down` within seconds,
/// requests that need the host `unavailable` at once, local requests go on
/// as ever; continued, the link is up, the agent's program there is taken
/// back and reports, within 15 s.
#[test]
fn a_frozen_then_continued_sshd_blocks_nothing_and_comes_back_within_15_s() {
    let _bound = crate::support::latency_bound();
    let sshd = Sshd::start();
    let app = app_with_env_on_host(&sshd, "far-ice", "");
    let agent = Reporter::start(&app, "far-ice");
    let (id, go) = (agent.id, agent.go.clone());
    let frozen = process_tree(sshd.child.id());
    signal_all(&frozen, nix::sys::signal::Signal::SIGSTOP);
    let froze = Instant::now();
    until_host(&app, Duration::from_secs(12), |s| s["state"] == "down");
    eprintln!("down {:?} after the freeze", froze.elapsed());
    // Meanwhile: local requests answer at once, a local terminal starts.
    for request in [
        json!("List"),
        json!("Hosts"),
        json!("Environments"),
        json!("Stats"),
    ] {
        let asked = Instant::now();
        let answer = app.request(request.clone());
        assert!(answer.get("Error").is_none(), "{answer}");
        assert!(
            asked.elapsed() < stretched(Duration::from_secs(2)),
            "{request}: {:?}",
            asked.elapsed()
        );
    }
    let local = app.spawn_sh("echo local; sleep 60");
    app.until_screen(local, "local");
    let asked = Instant::now();
    let answer = app.request(
        json!({"Spawn": {"profile": "exec", "environment": "far-ice", "command": ["true"]}}),
    );
    assert_eq!(code(&answer), "unavailable", "{answer}");
    assert!(
        asked.elapsed() < stretched(Duration::from_secs(2)),
        "{:?}",
        asked.elapsed()
    );
    // The program asks for a report while its host is frozen... (it is frozen
    // too: its sshd parent is, not tmux's server) and the host is continued.
    std::fs::write(&go, "").unwrap();
    // Its `krad report` connects while the host is frozen, and waits.
    crate::support::wait_until(Duration::from_secs(10), || {
        Command::new("pgrep")
            .args(["-f", "--", "report idle -m tick 2"])
            .stdout(Stdio::null())
            .status()
            .unwrap()
            .success()
    });
    signal_all(&frozen, nix::sys::signal::Signal::SIGCONT);
    let thawed = Instant::now();
    until_host(&app, Duration::from_secs(15), |s| s["state"] == "up");
    eprintln!("up {:?} after the thaw", thawed.elapsed());
    until_message(&app, id, "tick 2", Duration::from_secs(15));
    let asked = Instant::now();
    std::fs::write(&go, "").unwrap();
    until_message(&app, id, "tick 3", Duration::from_secs(15));
    assert!(
        asked.elapsed() < stretched(Duration::from_secs(2)),
        "{:?}",
        asked.elapsed()
    );
    assert!(
        thawed.elapsed() < Duration::from_secs(15),
        "{:?}",
        thawed.elapsed()
    );
    // Its terminal is taken back over the new link a moment after the host
    // is up (and on a loaded machine, a few): until then a Send is
    // `unavailable`, retryable, as the contract says — and then delivered.
    let mut sent = Value::Null;
    crate::support::wait_until(stretched(Duration::from_secs(5)), || {
        sent = app.request(json!({"Send": {"target": id, "text": "x", "enter": true}}));
        sent["Sent"].is_object() || code(&sent) != "unavailable"
    });
    assert!(sent["Sent"].is_object(), "{sent}");
}

/// A `krad` in a host terminal whose token is not valid for the terminal it
/// names (an impostor, not a restarted app) exits 4 within 1 s, although host
/// terminals retry a refused bus.
#[test]
fn a_wrong_token_from_a_host_terminal_exits_4_within_1_s() {
    let _bound = crate::support::latency_bound();
    let app = App::start();
    let one = app.spawn_sh("sleep 600");
    let two = app.spawn_sh("sleep 600");
    let token_file = app.token_dir().join(format!("{one}.token"));
    let krad = |terminal: u64, file: &Path| {
        Command::new(crate::support::KRAD)
            .args(["report", "idle", "-m", "impostor"])
            .env("KRAD_ADE_ENDPOINT", app.endpoint.to_string())
            .env("KRAD_ADE_TOKEN_FILE", file)
            .env("KRAD_ADE_ENVIRONMENT", "main")
            .env("KRAD_ADE_TERMINAL", terminal.to_string())
            .env("KRAD_ADE_RETRY_SECS", "60")
            .env_remove("KRAD_ADE_TOKEN")
            .env_remove("KRAD_ADE_API_JSON")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .unwrap()
    };
    // Terminal 1's token, naming terminal 2.
    let asked = Instant::now();
    let out = krad(two, &token_file);
    assert_eq!(exit_code(&out), 4, "{}", stderr(&out));
    assert!(
        asked.elapsed() < stretched(Duration::from_secs(1)),
        "{:?}",
        asked.elapsed()
    );
    // A token no run of the app made, naming terminal 1.
    let dir = tempfile::tempdir().unwrap();
    let forged = dir.path().join("forged.token");
    std::fs::write(&forged, "0123456789abcdef0123456789abcdef").unwrap();
    let asked = Instant::now();
    let out = krad(one, &forged);
    assert_eq!(exit_code(&out), 4, "{}", stderr(&out));
    assert!(
        asked.elapsed() < stretched(Duration::from_secs(1)),
        "{:?}",
        asked.elapsed()
    );
    assert!(app.record(two)["message"] != "impostor");
}

/// `List` from terminal `terminal` of `environment`, with `token`.
fn call_with_token(app: &App, environment: &str, terminal: u64, token: &str) -> Value {
    app.call(&json!({
        "token": token,
        "from": {"Terminal": {"environment": environment, "terminal": terminal}},
        "request": "List"
    }))
}

/// An app killed while its host's terminal (in tmux there) runs, started
/// again while the host's sshd is stopped: the host is `down` with ssh's
/// reason, requests that need it are `unavailable` at once, a call with the
/// terminal's last-run token is refused but retryable (and any other wrong
/// token is not); sshd back, the link is up within 2 s or so, and a report the
/// agent asked for meanwhile gets through within 2 s of the link, once its
/// token file holds the new token.
#[test]
fn a_restarted_app_whose_host_is_down_says_so_and_takes_its_terminals_back_at_once() {
    let _bound = crate::support::latency_bound();
    let mut sshd = Sshd::start();
    let mut app = app_with_env_on_host(&sshd, "far-again", "");
    let agent = Reporter::start(&app, "far-again");
    let (id, go) = (agent.id, agent.go.clone());
    app.signal(nix::sys::signal::Signal::SIGKILL);
    app.wait_exit(Duration::from_secs(10));
    sshd.stop();
    let app = crate::ssh::again_with_host(app, &sshd, "");
    let down = until_host(&app, Duration::from_secs(20), |s| {
        s["state"] == "down"
            && s["error"]
                .as_str()
                .is_some_and(|e| e.contains("Connection refused"))
    });
    assert_ne!(app.record(id)["state"], "exited", "{down}");
    for request in [
        json!({"Spawn": {"profile": "exec", "environment": "far-again", "command": ["true"]}}),
        json!({"CheckHost": {"name": "far"}}),
    ] {
        let asked = Instant::now();
        assert_unavailable(&app.request(request.clone()), "connection refused");
        assert!(
            asked.elapsed() < stretched(Duration::from_secs(2)),
            "{request}"
        );
    }
    // The terminal's token is being renewed: a call with its last token is
    // worth retrying; a call naming a terminal the app does not have is not.
    let stale = call_with_token(&app, "far-again", id, "0123456789abcdef0123456789abcdef");
    assert_eq!(code(&stale), "unauthorized", "{stale}");
    assert_eq!(stale["Error"]["retryable"], true, "{stale}");
    let unknown = call_with_token(
        &app,
        "far-again",
        id + 100,
        "0123456789abcdef0123456789abcdef",
    );
    assert_eq!(code(&unknown), "unauthorized", "{unknown}");
    assert!(unknown["Error"].get("retryable").is_none(), "{unknown}");
    // The agent asks for a report while its app cannot be reached.
    std::fs::write(&go, "").unwrap();
    sshd.start_again();
    let restarted = Instant::now();
    until_host(&app, Duration::from_secs(20), |s| s["state"] == "up");
    let up = Instant::now();
    eprintln!("up {:?} after sshd", up - restarted);
    until_message(&app, id, "tick 2", Duration::from_secs(30));
    eprintln!("the report got through {:?} after the link", up.elapsed());
    assert!(
        up.elapsed() < stretched(Duration::from_secs(2)),
        "{:?}",
        up.elapsed()
    );
    // Its token is this run's now: anything else it is refused for good.
    let stale = call_with_token(&app, "far-again", id, "0123456789abcdef0123456789abcdef");
    assert!(stale["Error"].get("retryable").is_none(), "{stale}");
    let asked = Instant::now();
    std::fs::write(&go, "").unwrap();
    until_message(&app, id, "tick 3", Duration::from_secs(10));
    assert!(
        asked.elapsed() < stretched(Duration::from_secs(2)),
        "{:?}",
        asked.elapsed()
    );
}

/// A Spawn on a host that freezes under it (sshd stopped before the link is
/// seen down) is answered `unavailable` as soon as the link is seen down, not
/// after ssh's own time-out; thawed, the host is up again.
#[test]
fn a_spawn_on_a_host_that_freezes_under_it_is_unavailable_once_the_link_is_seen_down() {
    let _bound = crate::support::latency_bound();
    for extra in ["", "tmux = false\n"] {
        let sshd = Sshd::start();
        let app = app_with_env_on_host(&sshd, "far-f", extra);
        let frozen = process_tree(sshd.child.id());
        signal_all(&frozen, nix::sys::signal::Signal::SIGSTOP);
        let froze = Instant::now();
        let answer = app.request(json!({"Spawn": {"profile": "exec", "environment": "far-f",
            "command": ["sh", "-c", "sleep 60"]}}));
        let answered = froze.elapsed();
        eprintln!("[{extra:?}] Spawn answered after {answered:?}: {answer}");
        assert_eq!(code(&answer), "unavailable", "{answer}");
        assert_eq!(host_status(&app)["state"], "down");
        // Keepalives every 1 s, 3 missed: seen down within about 4 s (ssh's
        // own time-out of the Spawn's commands came at about 8 s).
        assert!(answered < stretched(Duration::from_secs(6)), "{answered:?}");
        signal_all(&frozen, nix::sys::signal::Signal::SIGCONT);
        until_host(&app, Duration::from_secs(20), |s| s["state"] == "up");
    }
}
