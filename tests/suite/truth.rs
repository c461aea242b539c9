//! States that stay true, with programs of the tests' own: keys that reach a
//! dialog as keystrokes, a Send that claims no state it did not cause, asks
//! decided when the agent moves on or kept asking when they expire, questions
//! read on the screen, OSC 7501 announcements, messages that follow the state,
//! and `[notify]`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{App, Launch, code, exit_code, stderr};

fn asks(app: &App) -> Vec<Value> {
    app.request(json!("Asks"))["Asks"]
        .as_array()
        .unwrap()
        .clone()
}

/// Polls `check` until it holds (at most 20 s).
fn until(what: &str, check: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(20);
    while !check() {
        assert!(Instant::now() < until, "never: {what}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

#[test]
fn keys_arrive_as_the_bytes_a_terminal_sends_in_the_cursor_mode_on_screen() {
    let app = App::start();
    // Application cursor keys on, raw mode: the bytes that arrive, in hex.
    let id = app.spawn_sh(
        "printf '\\033[?1h'; stty raw -echo; echo ready; head -c 7 | od -An -tx1 | tr -d ' \\n' | sed 's/^/got:/'; echo; sleep 30",
    );
    app.until_screen(id, "ready");
    let sent = app.request(json!({"Send": {"target": id, "keys": ["Down", "Up", "2"]}}));
    assert_eq!(sent["Sent"]["delivered"], true, "{sent}");
    let screen = app.until_screen(id, "got:");
    assert!(
        screen.contains("got:1b4f421b4f4132"),
        "application cursor mode: ESC O B, ESC O A, then '2': {screen}"
    );
    // Without it, arrows are ESC [ B.
    let id = app.spawn_sh(
        "stty raw -echo; echo ready; head -c 4 | od -An -tx1 | tr -d ' \\n' | sed 's/^/got:/'; echo; sleep 30",
    );
    app.until_screen(id, "ready");
    app.request(json!({"Send": {"target": id, "keys": ["Down", "C-c"]}}));
    let screen = app.until_screen(id, "got:");
    assert!(screen.contains("got:1b5b4203"), "{screen}");
}

#[test]
fn a_bad_key_is_invalid_and_nothing_is_sent() {
    let app = App::start();
    let id = app.spawn_sh("echo ready; read line; echo got:$line; sleep 30");
    app.until_screen(id, "ready");
    let answer = app.request(json!({"Send": {"target": id, "keys": ["Down", "Sideways"]}}));
    assert_eq!(code(&answer), "invalid", "{answer}");
    assert!(
        answer["Error"]["message"]
            .as_str()
            .unwrap()
            .contains("Sideways"),
        "{answer}"
    );
    let out = app.krad(&["send", &id.to_string(), "--key", "Nope"]);
    assert_eq!(exit_code(&out), 2, "a usage error: {}", stderr(&out));
    assert!(stderr(&out).contains("Nope"), "{}", stderr(&out));
    let out = app.krad(&["send", &id.to_string(), "x", "--key", "Enter"]);
    assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
    app.until_screen(id, "got:x");
}

#[test]
fn enter_is_its_own_keystroke_after_the_paste() {
    let app = App::start();
    // Bracketed paste on, raw mode: prints what arrives, read by read.
    let id = app.spawn_sh(
        "printf '\\033[?2004h'; stty raw -echo opost; echo ready; while :; do dd bs=64 count=1 2>/dev/null | od -An -c | tr -s ' ' | sed 's/^/chunk:/'; done",
    );
    app.until_screen(id, "ready");
    app.request(json!({"Send": {"target": id, "text": "hi", "enter": true}}));
    let screen = app.until_screen(id, "\\r");
    let paste_then_enter = screen
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("chunk:"))
        .collect::<Vec<_>>();
    let enter_line = paste_then_enter
        .iter()
        .position(|l| l.contains("\\r"))
        .unwrap();
    assert!(
        paste_then_enter[enter_line]
            .trim_start_matches("chunk:")
            .trim()
            == "\\r",
        "the Enter came in a read of its own, not glued to the paste: {screen}"
    );
}

#[test]
fn an_agent_that_reports_working_or_idle_decides_its_open_asks() {
    let app = App::start();
    let ask = r#"{"Ask":{"kind":"permission","tool":{"name":"Bash","input":{"command":"make"}}}}"#;
    let id = app.spawn_sh(&format!(
        "krad raw '{ask}' > answered.json & echo asked; read go; krad report working; sleep 30"
    ));
    until("the ask is open", || !asks(&app).is_empty());
    let asking = app.until_state(id, "asking");
    assert_eq!(asking["message"], "Bash: make");
    // The user answered in the agent's own terminal: the agent goes on.
    app.request(json!({"Send": {"target": id, "text": "go", "enter": true}}));
    until("the ask is decided", || asks(&app).is_empty());
    let answered = app.dir.path().join("repo/answered.json");
    until("the hook learnt the decision", || {
        std::fs::read_to_string(&answered).is_ok_and(|t| t.contains("\"by\":\"program\""))
    });
    let working = app.until_state(id, "working");
    assert_eq!(working["state_source"], "hook");
    assert_eq!(working["message"], Value::Null, "no leftover question");
}

#[test]
fn an_expired_ask_leaves_the_agent_asking_in_its_own_terminal() {
    let app = App::start();
    let ask = r#"{"Ask":{"kind":"permission","tool":{"name":"Bash","input":{"command":"make"}},"expires_in_secs":1}}"#;
    let id = app.spawn_sh(&format!(
        "krad raw '{ask}'; echo expired; read answer; krad report idle --message done; sleep 30"
    ));
    app.until_screen(id, "\"by\":\"timeout\"");
    app.until_screen(id, "expired");
    let record = app.record(id);
    assert_eq!(record["state"], "asking", "{record}");
    assert_eq!(record["message"], "Bash: make");
    // Keys to an agent whose hooks tell its state claim nothing; here the
    // exec profile has no hooks: Enter answers and it works again.
    app.request(json!({"Send": {"target": id, "text": "y", "enter": true}}));
    let idle = app.until_state(id, "idle");
    assert_eq!(idle["message"], "done");
}

#[test]
fn osc_7501_announcements_decide_and_reports_only_bring_messages() {
    let app = App::start();
    let id = app.spawn_sh(
        "printf '\\033]7501;state=working\\007'; echo one; read a; \
         printf '\\033]7501;state=blocked:exec:kind=permission\\007'; read b; \
         krad report idle --message 'not a state'; \
         printf '\\033]7501;state=working\\007'; read c; \
         printf '\\033]7501;state=done\\007'; krad report idle --message 'All done.'; sleep 30",
    );
    let working = app.until(id, Duration::from_secs(20), |r| {
        r["state"] == "working" && r["state_source"] == "hook"
    });
    assert_eq!(working["message"], Value::Null);
    app.request(json!({"Send": {"target": id, "text": "a", "enter": true}}));
    let asking = app.until_state(id, "asking");
    assert_eq!(asking["state_source"], "hook");
    assert_eq!(asking["message"], "needs your approval");
    app.request(json!({"Send": {"target": id, "text": "b", "enter": true}}));
    let working = app.until(id, Duration::from_secs(20), |r| r["state"] == "working");
    // The report in between said idle: the announcements outrank it.
    assert_eq!(working["state_source"], "hook");
    app.request(json!({"Send": {"target": id, "text": "c", "enter": true}}));
    let idle = app.until(id, Duration::from_secs(20), |r| {
        r["state"] == "idle" && r["message"] == "All done."
    });
    assert_eq!(idle["state_source"], "hook");
}

/// Codex runs its turn-complete notify from its core, which can be ahead of
/// the announcements on its screen: the report of a turn may come after that
/// turn's `done`, before it (while `working`), or even before its `working`
/// (while the last turn's idle is still on record). Each turn ends with its
/// own message. (A title after each turn's `done` says when the app has read
/// it: both come in order from the same output.)
#[test]
fn a_turn_s_report_is_its_message_whether_it_comes_before_during_or_after_the_turn() {
    let app = App::start();
    let id = app.spawn_sh(
        "o() { printf '\\033]7501;state=%s\\007' \"$1\"; }; t() { printf '\\033]0;%s\\007' \"$1\"; }; \
         o working; read a; o done; krad report idle --message one; t one-over; read b; \
         krad report idle --message two; o working; o done; t two-over; read c; \
         o working; o done; t three-over; read d; \
         o working; krad report idle --message four; o done; t four-over; sleep 30",
    );
    let turn = |key: &str, over: &str| {
        app.request(json!({"Send": {"target": id, "text": key, "enter": true}}));
        app.until(id, Duration::from_secs(20), |r| r["title"] == over)
    };
    app.until(id, Duration::from_secs(20), |r| r["state"] == "working");
    let after = turn("a", "one-over");
    assert_eq!(
        (&after["state"], &after["message"]),
        (&json!("idle"), &json!("one"))
    );
    // Its report before its `working`: not lost when that `working` comes.
    let ahead = turn("b", "two-over");
    assert_eq!(
        (&ahead["state"], &ahead["message"]),
        (&json!("idle"), &json!("two"))
    );
    // A turn with no report says nothing: the last turn's message is gone.
    let none = turn("c", "three-over");
    assert_eq!(
        (&none["state"], &none["message"]),
        (&json!("idle"), &Value::Null)
    );
    let during = turn("d", "four-over");
    assert_eq!(
        (&during["state"], &during["message"]),
        (&json!("idle"), &json!("four"))
    );
}

#[test]
fn a_login_screen_is_asking_until_it_is_gone_and_no_prompt_is_typed_into_it() {
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agent.sh");
    // Takes whatever arguments a claude profile gives; says it is up (as Claude
    // Code's SessionStart hook does), then asks to log in first.
    std::fs::write(
        &agent,
        "#!/bin/sh\nkrad report idle; echo 'Select login method:'; echo ' 1. Claude account'; read choice; \
         printf '\\033[2J\\033[H'; echo \"logged in with $choice\"; read prompt; echo \"prompt: $prompt\"; sleep 30\n",
    )
    .unwrap();
    let mut perms = std::fs::metadata(&agent).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&agent, perms).unwrap();
    let config = format!(
        "[profiles.login]\ncommand = [{:?}]\nhooks = \"claude\"\nprompt = \"type\"\n",
        agent.display().to_string()
    );
    let app = App::start_config(&config);
    let id = app.spawn(json!({"profile": "login", "prompt": "the task"}))["terminal"]
        .as_u64()
        .unwrap();
    let asking = app.until_state(id, "asking");
    assert_eq!(asking["state_source"], "screen");
    assert_eq!(asking["message"], "needs you: log in");
    // Up and quiet past the app's wait before typing (400 ms): a prompt typed now
    // would be read as the login choice.
    until_quiet(&app, id, Duration::from_secs(1));
    app.request(json!({"Send": {"target": id, "keys": ["1", "Enter"]}}));
    app.until_screen(id, "logged in with 1");
    let record = app.until(id, Duration::from_secs(20), |r| r["state"] != "asking");
    assert_ne!(record["message"], "needs you: log in");
    // The question gone, the prompt is typed.
    app.until_screen(id, "prompt: the task");
}

/// Polls until the terminal's screen has not changed for `calm` (at most 20 s).
fn until_quiet(app: &App, id: u64, calm: Duration) {
    let until = Instant::now() + Duration::from_secs(20);
    let mut last = String::new();
    let mut since = Instant::now();
    loop {
        let screen = app.request(json!({"Output": {"target": id}}))["Output"]["screen"].clone();
        let screen = screen.as_str().unwrap_or_default().to_owned();
        if screen != last {
            last = screen;
            since = Instant::now();
        } else if since.elapsed() >= calm {
            return;
        }
        assert!(Instant::now() < until, "terminal {id} never went quiet");
        std::thread::sleep(Duration::from_millis(25));
    }
}

#[test]
fn the_message_follows_the_state_and_an_exit_says_how_it_ended() {
    let app = App::start();
    let id = app.spawn_sh(
        "krad report idle --message 'first reply'; read a; krad report working; read b; exit 3",
    );
    let idle = app.until_state(id, "idle");
    assert_eq!(idle["message"], "first reply");
    app.request(json!({"Send": {"target": id, "text": "a", "enter": true}}));
    let working = app.until_state(id, "working");
    assert_eq!(working["message"], Value::Null, "a new turn: no leftover");
    app.request(json!({"Send": {"target": id, "text": "b", "enter": true}}));
    let exited = app.until_state(id, "exited");
    let message = exited["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("exited with code 3"), "{exited}");
}

/// Issue 48, item 7: a program that tells no state of its own (the `exec`
/// profile: no hooks, no quiet time) shows what is true of it: a quiet one
/// runs (`working`, never `starting` for its whole life), a shell at its
/// prompt waits (`idle`), and works again while a command runs.
#[test]
fn a_program_with_no_state_source_shows_what_its_process_does() {
    let app = App::start();
    let quiet = app.spawn(json!({"profile": "exec", "command": ["sleep", "60"]}))["terminal"]
        .as_u64()
        .unwrap();
    let running = app.until_state(quiet, "working");
    assert_eq!(running["state_source"], "process", "{running}");
    let shell = app.spawn(json!({"profile": "exec",
        "command": ["bash", "--norc", "--noprofile", "-i"]}))["terminal"]
        .as_u64()
        .unwrap();
    let at_prompt = app.until_state(shell, "idle");
    assert_eq!(at_prompt["state_source"], "process", "{at_prompt}");
    app.request(json!({"Send": {"target": shell, "text": "sleep 3; echo slept", "enter": true}}));
    app.until_state(shell, "working");
    app.until_screen(shell, "slept");
    let back = app.until_state(shell, "idle");
    assert_eq!(back["state_source"], "process", "{back}");
    // It stays so: no turn it is not in (Check answers at the next change,
    // or after wait_secs with the same record).
    let rev = back["rev"].as_u64().unwrap();
    let later = app.request(json!({"Check": {"target": shell, "wait_secs": 3, "since_rev": rev}}));
    assert_eq!(later["Agent"]["rev"], rev, "{later}");
    assert_eq!(app.record(quiet)["state"], "working");
}

/// Issue 48, item 6: a failed program's message carries what its screen
/// said last; a clean exit's is plain; a program given by a path that does
/// not exist is not said to be missing from PATH.
#[test]
fn a_failed_program_says_what_its_screen_said_last() {
    let app = App::start();
    let id = app.spawn_sh("echo starting; echo 'Unable to connect to the model service'; exit 1");
    let exited = app.until_state(id, "exited");
    assert_eq!(
        exited["message"],
        "exited with code 1: Unable to connect to the model service"
    );
    let clean = app.spawn_sh("echo all done");
    let exited = app.until_state(clean, "exited");
    assert_eq!(exited["message"], "exited with code 0");
    let answer = app.request(json!({"Spawn": {"profile": "exec",
        "command": ["/no/such/prog"]}}));
    let message = answer["Error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("no such file"), "{answer}");
    assert!(!message.contains("PATH"), "{answer}");
}

/// An agent CLI missing from PATH is said so, with where to learn how to
/// install it; any other program is only said missing.
#[test]
fn a_missing_agent_cli_says_how_to_install_it() {
    let app = App::launch(Launch {
        env: vec![("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into())],
        ..Launch::default()
    });
    let answer = app.request(json!({"Spawn": {"profile": "codex", "prompt": "fix it"}}));
    assert_eq!(code(&answer), "failed", "{answer}");
    assert_eq!(
        answer["Error"]["message"],
        "cannot start \"codex\": no such program on PATH; `krad doctor` says how to install it"
    );
    let answer = app.request(json!({"Spawn": {"profile": "exec",
        "command": ["no-such-program-krad"]}}));
    let message = answer["Error"]["message"].as_str().unwrap_or_default();
    assert!(message.ends_with("no such program on PATH"), "{answer}");
}

#[test]
fn notify_runs_the_command_with_the_record_on_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("told.jsonl");
    let config = format!(
        // One write per notice (notices may run at once: two appends each
        // could interleave).
        "[notify]\ncommand = [\"sh\", \"-c\", \"r=$(cat); printf '%s %s\\\\n' \\\"$KRAD_NOTIFY_KIND\\\" \\\"$r\\\" >> {log}\"]\ndebounce_secs = 0\n",
        log = log.display()
    );
    let app = App::start_config(&config);
    let id =
        app.spawn_sh("krad report working; krad report idle --message 'turn over'; read a; exit 0");
    until("told of the idle", || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("turn over"))
    });
    app.request(json!({"Send": {"target": id, "text": "a", "enter": true}}));
    until("told of the exit", || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("exited "))
    });
    let told = std::fs::read_to_string(&log).unwrap();
    for line in told.lines() {
        let (kind, record) = line.split_once(' ').unwrap();
        let record: Value = serde_json::from_str(record).unwrap();
        assert_eq!(record["terminal"], id);
        assert_eq!(record["state"], kind, "{line}");
    }
    assert!(!told.contains(app.token()), "never the token");
}

#[test]
fn notify_shows_a_desktop_notification_through_notify_send() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("notify-send.log");
    // A notify-send of the test's own, first on the app's PATH.
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let fake = bin.join("notify-send");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do printf '%s|' \"$a\" >> {}; done; echo >> {}\n",
            log.display(),
            log.display()
        ),
    )
    .unwrap();
    let mut perms = std::fs::metadata(&fake).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&fake, perms).unwrap();
    let path = format!(
        "{}:{}:{}",
        bin.display(),
        crate::support::fake_agents_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let app = App::launch(crate::support::Launch {
        config: Some("[notify]\ndesktop = true\non = [\"asking\"]\n"),
        env: vec![("PATH".into(), path)],
        ..Default::default()
    });
    let id = app.spawn(json!({"profile": "exec", "name": "fix-login",
        "command": ["sh", "-c", "krad report asking --message 'may I run make?'; sleep 30"]}))
        ["terminal"]
        .as_u64()
        .unwrap();
    until("notify-send ran", || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("may I run make?"))
    });
    let line = std::fs::read_to_string(&log).unwrap();
    assert!(
        line.contains(&format!(
            "krad: fix-login (terminal {id}) needs you|may I run make?|"
        )),
        "{line}"
    );
    assert!(line.contains("--urgency|critical|"), "{line}");
}

#[test]
fn osc_7501_announcements_reach_the_app_through_the_tmux_host_too() {
    let app = App::start_config(crate::tmux::TMUX);
    let id = app.spawn_sh(
        "printf '\\033]7501;state=blocked:app=x:kind=permission\\033\\\\'; read a; \
         printf '\\033]7501;state=done\\033\\\\'; sleep 30",
    );
    let _server = crate::tmux::TmuxServer::of(&app, id);
    let asking = app.until_state(id, "asking");
    assert_eq!(asking["state_source"], "hook");
    assert_eq!(asking["message"], "needs your approval");
    app.request(json!({"Send": {"target": id, "text": "a", "enter": true}}));
    let idle = app.until_state(id, "idle");
    assert_eq!(idle["state_source"], "hook");
}

#[test]
fn a_report_made_while_a_send_is_written_wins_over_the_send() {
    let app = App::start();
    // The program takes each byte as it comes, shows nothing (so Send waits for
    // an echo before its Enter), and raises a new question at the first byte.
    let id = app.spawn_sh(
        "stty -echo -icanon min 1 time 0; krad report asking -m start; \
         c=$(dd bs=1 count=1 2>/dev/null); krad report asking -m \"got-$c\"; sleep 60",
    );
    app.until(id, Duration::from_secs(20), |r| r["message"] == "start");
    let sent = app.request(json!({"Send": {"target": id, "text": "x", "enter": true}}));
    assert_eq!(sent["Sent"]["delivered"], true, "{sent}");
    // The Report came while the Send waited to press Enter: it is newer, and
    // the Send's answering keys do not turn it into "working".
    let record = app.record(id);
    assert_eq!(record["message"], "got-x", "{record}");
    assert_eq!(record["state"], "asking", "{record}");
    assert_eq!(sent["Sent"]["state"], "asking", "{sent}");
}
