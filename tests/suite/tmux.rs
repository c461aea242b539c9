//! The tmux terminal host (`[terminals] host = "tmux"`), with a real tmux: the
//! agent requests work as on the default host, and terminals outlive the app.

use std::io::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{App, Launch, code};

pub(crate) const TMUX: &str = "[terminals]\nhost = \"tmux\"\n";

/// The app's tmux server, killed when the test ends (it outlives the app).
pub(crate) struct TmuxServer(String);

/// The pid of the tmux server on `socket`, if one answers.
fn server_pid(socket: &str) -> Option<i32> {
    let out = Command::new("tmux")
        .args(["-L", socket, "display-message", "-p", "#{pid}"])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

/// Ends a test's tmux server: `kill-server`, and SIGKILL for a server that does
/// not go (tmux 3.3 can wait forever for a control client whose app was killed).
fn end_server(socket: &str) {
    let pid = server_pid(socket);
    let _ = Command::new("tmux")
        .args(["-L", socket, "kill-server"])
        .output();
    if let Some(pid) = pid.map(nix::unistd::Pid::from_raw) {
        let until = Instant::now() + Duration::from_millis(300);
        while nix::sys::signal::kill(pid, None).is_ok() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
    }
    let dir = std::env::var_os("TMUX_TMPDIR").unwrap_or_else(|| "/tmp".into());
    let _ = std::fs::remove_file(
        std::path::Path::new(&dir)
            .join(format!("tmux-{}", nix::unistd::getuid()))
            .join(socket),
    );
}

impl TmuxServer {
    /// The server a terminal lives in, as its Attach stream names it.
    pub(crate) fn of(app: &App, id: u64) -> TmuxServer {
        let mut stream = app.connect();
        let envelope = app.envelope(json!({"Attach": {"target": id}}));
        stream
            .write_all(format!("{envelope}\n").as_bytes())
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stream), &mut line).unwrap();
        let first: Value = serde_json::from_str(&line).unwrap();
        let tmux = &first["Screen"]["tmux"];
        let server = TmuxServer(tmux["socket"].as_str().unwrap().to_owned());
        assert_eq!(tmux["session"], "krad", "{first}");
        // The window it names is the terminal's.
        let window = tmux["window"].as_str().unwrap();
        let named = Command::new("tmux")
            .args(["-L", &server.0, "display-message", "-p", "-t", window])
            .arg("#{window_name} #{@krad-terminal}")
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&named.stdout).trim(),
            format!("krad-{id} {id}")
        );
        server
    }
}

impl Drop for TmuxServer {
    fn drop(&mut self) {
        end_server(&self.0);
    }
}

/// Issue 48: the tests left dead `krad-repo-*` sockets in the user's own tmux
/// directory. Through the test command (scripts/test) every tmux server of
/// the tests — the apps' and the tests' own — lives in a directory of the
/// tests' own, emptied before and after the run.
#[test]
fn the_tests_tmux_servers_live_in_a_directory_of_their_own() {
    let private = std::env::var_os("TMUX_TMPDIR").map(std::path::PathBuf::from);
    let Some(private) = private.filter(|d| d.is_absolute() && d != Path::new("/tmp")) else {
        panic!(
            "TMUX_TMPDIR is not set to a directory of the tests' own: run the tests through \
             scripts/test, which does, so that no test touches your tmux servers"
        );
    };
    let app = App::start_config(TMUX);
    let id = app.spawn_sh("sleep 60");
    let server = TmuxServer::of(&app, id);
    let socket = private
        .join(format!("tmux-{}", nix::unistd::getuid()))
        .join(&server.0);
    assert!(socket.exists(), "{} is not there", socket.display());
    let user_s = Path::new("/tmp")
        .join(format!("tmux-{}", nix::unistd::getuid()))
        .join(&server.0);
    assert!(
        !user_s.exists(),
        "{} is in the user's tmux directory",
        user_s.display()
    );
}

#[test]
fn spawn_send_output_wait_and_close_work_as_on_the_default_host() {
    let app = App::start_config(TMUX);
    let id = app.spawn_sh("echo started; read -r x; echo \"got $x\"; exit 3");
    let _server = TmuxServer::of(&app, id);
    assert!(app.record(id)["pid"].as_u64().unwrap() > 0);
    app.until_screen(id, "started");
    let sent = app.request(json!({"Send": {"target": id, "text": "hello", "enter": true}}));
    assert_eq!(sent["Sent"]["delivered"], true, "{sent}");
    let waited = app.request(json!({"Wait": {"target": id, "for": "exit", "timeout_secs": 20}}));
    assert_eq!(waited["Agent"]["state"], "exited", "{waited}");
    assert_eq!(waited["Agent"]["exit_code"], 3);
    let output = app.request(json!({"Output": {"target": id}}));
    let screen = output["Output"]["screen"].as_str().unwrap();
    assert!(screen.contains("started\nhello\ngot hello"), "{output}");

    let sleeper = app.spawn_sh("sleep 600");
    assert_eq!(
        app.request(json!({"Close": {"target": sleeper}})),
        json!("Ok")
    );
    assert_eq!(
        code(&app.request(json!({"Check": {"target": sleeper}}))),
        "not_found"
    );
}

/// tmux lets a pane die before reading what its program left in the terminal:
/// a program that printed a lot and ended at once lost its last lines. The
/// pane's runner waits until tmux has read them.
#[test]
fn a_program_s_last_words_after_much_output_are_on_its_final_screen() {
    let app = App::start_config(TMUX);
    let _server = TmuxServer::of(&app, app.spawn_sh("sleep 600"));
    let mut ids = Vec::new();
    for n in 0..3 {
        ids.push(app.spawn_sh(&format!("seq 1 20000; echo \"last words {n}\"; exit 4")));
    }
    for (n, id) in ids.into_iter().enumerate() {
        let waited =
            app.request(json!({"Wait": {"target": id, "for": "exit", "timeout_secs": 30}}));
        assert_eq!(waited["Agent"]["exit_code"], 4, "{waited}");
        let output = app.request(json!({"Output": {"target": id}}));
        let screen = output["Output"]["screen"].as_str().unwrap();
        assert!(
            screen.contains(&format!("20000\nlast words {n}")),
            "{output}"
        );
    }
}

/// Ctrl-C and Ctrl-\ go to the program, not to the pane's runner, which ends
/// as the program ended (killed by SIGINT); a program that handles them lives on.
#[test]
fn ctrl_c_reaches_the_program_and_its_end_is_told_as_it_was() {
    let app = App::start_config(TMUX);
    let interrupted = app.spawn_sh("echo ready; exec sleep 600");
    let _server = TmuxServer::of(&app, interrupted);
    let handling = app.spawn_sh("trap 'echo caught' QUIT; echo ready; while :; do sleep 1; done");
    app.until_screen(interrupted, "ready");
    app.until_screen(handling, "ready");

    let sent = app.request(json!({"Send": {"target": handling, "keys": ["C-\\"]}}));
    assert_eq!(sent["Sent"]["delivered"], true, "{sent}");
    app.until_screen(handling, "caught");
    let record = app.record(handling);
    assert_ne!(record["state"], "exited", "{record}");

    app.request(json!({"Send": {"target": interrupted, "keys": ["C-c"]}}));
    let waited =
        app.request(json!({"Wait": {"target": interrupted, "for": "exit", "timeout_secs": 20}}));
    assert_eq!(waited["Agent"]["signal"], 2, "{waited}");
    assert_eq!(waited["Agent"]["exit_code"], Value::Null, "{waited}");
}

#[test]
fn a_killed_app_starts_again_and_takes_its_terminals_back() {
    let app = App::start_config(TMUX);
    let kept =
        app.spawn_sh("echo before; read -r x; krad report idle -m \"from $x\"; read -r y; exit 5");
    let _server = TmuxServer::of(&app, kept);
    let doomed = app.spawn_sh("echo doomed; sleep 600");
    app.until_screen(kept, "before");
    app.until_screen(doomed, "doomed");
    let state = app.until_state(kept, "working")["state"].clone();
    let doomed_pid = app.record(doomed)["pid"].as_u64().unwrap() as i32;

    app.signal(nix::sys::signal::Signal::SIGKILL);
    let dir = app.stop_keep_dir();
    // While the app is away, one terminal's program dies.
    let pid = nix::unistd::Pid::from_raw(doomed_pid);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    // Ended: gone, or a zombie tmux has not reaped yet (tmux 3.3 may miss a
    // SIGCHLD; the app's watchdog, away now, would nudge it).
    let ended = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
            stat.rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('Z'))
        })
    };
    while !ended() {
        assert!(
            Instant::now() < until,
            "the program did not end: {:?}",
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    let app = App::launch(Launch {
        config: Some(TMUX),
        reuse: Some(dir),
        ..Launch::default()
    });
    // The live one: its record, its screen, its state.
    let record = app.record(kept);
    assert_eq!(record["state"], state, "{record}");
    assert_eq!(record["profile"], "exec");
    assert!(app.until_screen(kept, "before").contains("before"));
    // The one that died while the app was away: exited, with how.
    let gone = app.until_state(doomed, "exited");
    assert_eq!(gone["signal"], 15, "{gone}");
    // The kept terminal still reaches the app (its token file holds the new
    // token, the endpoint it was given is served), and can be waited on.
    app.request(json!({"Send": {"target": kept, "text": "again", "enter": true}}));
    let idle = app.until(kept, Duration::from_secs(20), |r| r["state"] == "idle");
    assert_eq!(idle["state_source"], "hook", "{idle}");
    assert_eq!(idle["message"], "from again");
    app.request(json!({"Send": {"target": kept, "text": "y", "enter": true}}));
    let waited = app.request(json!({"Wait": {"target": kept, "for": "exit", "timeout_secs": 20}}));
    assert_eq!(waited["Agent"]["exit_code"], 5, "{waited}");
    // Ids are never reused.
    let next = app.spawn_sh("true");
    assert!(next > doomed, "{next}");
}

/// Issue 48 (16): the token folder of the app before, which the terminals
/// taken back read their tokens from, is left by an app of another repository
/// beside it (their folders share `~/.krad-ade`), and goes at the plain stop
/// of the app that took them back.
#[test]
fn a_taken_back_terminal_s_token_folder_outlives_other_repositories_apps_and_goes_at_a_plain_stop()
{
    let app = App::start_config(TMUX);
    let kept = app.spawn_sh("sleep 600");
    let _server = TmuxServer::of(&app, kept);
    let run = app.api_json.parent().unwrap().to_path_buf();
    let before = run.join(format!("terminals-{}", app.pid));
    let token = before.join(format!("{kept}.token"));
    assert!(token.exists(), "{}", token.display());
    let mut app = app.killed_then_again(Some(TMUX));
    assert_ne!(app.record(kept)["state"], "exited");
    assert!(
        token.exists(),
        "the terminal taken back reads its token there"
    );

    // An app of another repository, its api.json beside this one's: it serves
    // (its start's clean-up done), and leaves the folder in use alone.
    let other = crate::support::git_repo(&app.dir.path().join("other"));
    let mut beside = Command::new(crate::support::KRAD)
        .args(["serve", "--json"])
        .current_dir(&other)
        .env("KRAD_ADE_API_JSON", run.join("other.json"))
        .env_remove("KRAD_CONFIG")
        .envs(crate::support::private_home(app.dir.path()))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let serving = crate::support::first_line(&mut beside);
    let _ = beside.kill();
    let _ = beside.wait();
    assert!(serving.contains("Serving"), "{serving}");
    assert!(
        token.exists(),
        "another repository's app removed this one's token folder"
    );

    // A plain stop closes the terminal, and with it goes the folder.
    let own = run.join(format!("terminals-{}", app.pid));
    assert!(own.is_dir());
    let out = app.krad(&["stop"]);
    assert_eq!(
        crate::support::exit_code(&out),
        0,
        "{}",
        crate::support::stderr(&out)
    );
    assert_eq!(
        crate::support::stdout(&out).trim(),
        "krad: the app stopped, and closed its 1 running agent"
    );
    app.wait_exit(Duration::from_secs(15));
    assert!(!own.exists(), "{} is left", own.display());
    assert!(!before.exists(), "{} is left", before.display());
}

#[test]
fn attaching_to_an_exited_terminal_gives_its_last_screen_and_exit_not_its_gone_window() {
    let app = App::start_config(TMUX);
    let id = app.spawn_sh("read -r x; echo last words; exit 3");
    let _server = TmuxServer::of(&app, id);
    app.request(json!({"Send": {"target": id, "text": "go", "enter": true}}));
    let waited = app.request(json!({"Wait": {"target": id, "for": "exit", "timeout_secs": 20}}));
    assert_eq!(waited["Agent"]["exit_code"], 3, "{waited}");
    let mut stream = app.connect();
    let envelope = app.envelope(json!({"Attach": {"target": id}}));
    stream
        .write_all(format!("{envelope}\n").as_bytes())
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stream));
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert!(first["Screen"].is_object(), "{first}");
    assert!(
        first["Screen"].get("tmux").is_none(),
        "no window to attach to: {first}"
    );
    let screen = base64::Engine::decode(
        &base64::engine::general_purpose::STANDARD,
        first["Screen"]["data"].as_str().unwrap(),
    )
    .unwrap();
    assert!(String::from_utf8_lossy(&screen).contains("last words"));
    let next: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(next["Exited"]["exit_code"], 3, "{next}");
}
