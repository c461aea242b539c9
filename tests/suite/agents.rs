//! Sections 1 and 5: terminals and the truth about the agents in them — every
//! state transition with its source, and Spawn, Send, Output, Close, Report.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use nix::sys::signal::Signal;

use crate::support::{App, Launch, code};

#[test]
fn an_agent_starts_works_and_exits_with_its_code() {
    let app = App::start();
    let id = app.spawn_sh("read -r go; echo working; sleep 0.3; exit 3");
    let record = app.record(id);
    assert_eq!(record["state"], "starting");
    assert_eq!(record["state_source"], "process");
    assert_eq!(record["environment"], "main");
    assert_eq!(record["profile"], "exec");
    assert!(record["pid"].as_u64().unwrap() > 0);
    app.request(json!({"Send": {"target": id, "text": "go", "enter": true}}));
    let working = app.until_state(id, "working");
    assert_eq!(working["state_source"], "screen");
    let exited = app.until_state(id, "exited");
    assert_eq!(exited["state_source"], "process");
    assert_eq!(exited["exit_code"], 3);
    assert_eq!(exited["signal"], Value::Null);
    assert!(exited["rev"].as_u64() > working["rev"].as_u64());
}

#[test]
fn an_agent_killed_by_a_signal_says_which() {
    let app = App::start();
    let id = app.spawn_sh("kill -TERM $$");
    let exited = app.until_state(id, "exited");
    assert_eq!(exited["signal"], 15);
    assert_eq!(exited["exit_code"], Value::Null);
}

#[test]
fn quiet_time_makes_a_working_agent_idle_and_output_makes_it_working_again() {
    let app = App::start_config("[profiles.quiet]\ncommand = [\"sh\"]\nidle_after_secs = 1\n");
    let id = app.spawn(json!({"profile": "quiet", "command": ["sh", "-c", "echo one; read -r x; echo two; sleep 60"]}))
        ["terminal"]
        .as_u64()
        .unwrap();
    app.until_state(id, "working");
    let idle = app.until_state(id, "idle");
    assert_eq!(idle["state_source"], "quiet");
    app.request(json!({"Send": {"target": id, "text": "x", "enter": true}}));
    let again = app.until_state(id, "working");
    assert_eq!(again["state_source"], "screen");
}

#[test]
fn a_bell_while_working_means_idle_from_the_screen() {
    let app = App::start();
    let id = app.spawn_sh("echo busy; sleep 0.3; printf '\\a'; sleep 60");
    app.until_state(id, "working");
    let idle = app.until_state(id, "idle");
    assert_eq!(idle["state_source"], "screen");
}

#[test]
fn osc_notifications_ask_or_finish_with_their_text() {
    let app = App::start();
    let asking = app.spawn_sh(
        "echo busy; sleep 0.3; printf '\\033]9;Approval requested: rm -rf build\\007'; sleep 60",
    );
    let record = app.until_state(asking, "asking");
    assert_eq!(record["state_source"], "screen");
    assert_eq!(record["message"], "Approval requested: rm -rf build");
    let done = app.spawn_sh(
        "echo busy; sleep 0.3; printf '\\033]777;notify;Codex;Turn complete\\007'; sleep 60",
    );
    let record = app.until_state(done, "idle");
    assert_eq!(record["message"], "Codex: Turn complete");
}

#[test]
fn the_title_is_recorded() {
    let app = App::start();
    let id = app.spawn_sh("printf '\\033]0;✳ Fixing login\\007'; sleep 60");
    app.until(id, Duration::from_secs(10), |r| {
        r["title"] == "✳ Fixing login"
    });
}

#[test]
fn reports_set_state_and_message_from_hooks() {
    let app = App::start();
    let id = app.spawn_sh(
        "krad report working -m 'running tests' && krad report asking -m 'Delete it?' && read -r a && \
         read -r go && krad report idle -m \"answer: $a\" --title t1 && sleep 60",
    );
    let asking = app.until_state(id, "asking");
    assert_eq!(asking["state_source"], "hook");
    assert_eq!(asking["message"], "Delete it?");
    // Keystrokes to an asking agent make it working.
    let sent = app.request(json!({"Send": {"target": id, "text": "yes", "enter": true}}));
    assert_eq!(
        sent["Sent"],
        json!({"terminal": id, "delivered": true, "state": "working"})
    );
    assert_eq!(app.record(id)["state_source"], "input");
    app.request(json!({"Send": {"target": id, "text": "go", "enter": true}}));
    let idle = app.until_state(id, "idle");
    assert_eq!(idle["state_source"], "hook");
    assert_eq!(idle["message"], "answer: yes");
    assert_eq!(idle["title"], "t1");
}

#[test]
fn output_is_not_mistaken_for_work_after_a_hook_said_idle() {
    let app = App::start();
    let id = app.spawn_sh("krad report idle -m done; while :; do echo tick; sleep 0.1; done");
    app.until(id, Duration::from_secs(10), |r| {
        r["state"] == "idle" && r["state_source"] == "hook"
    });
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(app.record(id)["state"], "idle");
}

#[test]
fn report_is_for_terminals_about_themselves() {
    let app = App::start();
    let answer = app.request(json!({"Report": {"state": "idle"}}));
    assert_eq!(code(&answer), "forbidden");
    let id = app.spawn_sh("sleep 0.2");
    let token = app.terminal_token(id);
    app.until_state(id, "exited");
    let answer = app.call_as(id, &token, json!({"Report": {"state": "working"}}));
    assert_eq!(code(&answer), "conflict", "{answer}");
    let answer = app.call_as(id, &token, json!({"Report": {"state": "sleeping"}}));
    assert_eq!(code(&answer), "bad_request");
}

#[test]
fn the_terminal_gets_its_variables_and_a_private_token_file() {
    let app = App::start();
    let id = app.spawn_sh("echo \"E=$KRAD_ADE_ENDPOINT V=$KRAD_ADE_ENVIRONMENT T=$KRAD_ADE_TERMINAL X=${KRAD_ADE_TOKEN:-none}\"; krad api; sleep 60");
    let screen = app.until_screen(id, "agents API v1");
    assert!(
        screen.contains(&format!("E={} V=main T={id} X=none", app.endpoint)),
        "{screen}"
    );
    let file = app.token_dir().join(format!("{id}.token"));
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(
        std::fs::metadata(app.token_dir())
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o700
    );
    // The token is the terminal's own, not the client's.
    assert_ne!(app.terminal_token(id), app.token());
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", app.record(id)["pid"])).unwrap();
    assert!(!String::from_utf8_lossy(&cmdline).contains(&app.terminal_token(id)));
}

#[test]
fn spawn_errors_are_clear() {
    let app = App::start();
    let cases = [
        (json!({"profile": "nope"}), "invalid"),
        (json!({"profile": "exec"}), "invalid"),
        (json!({"profile": "exec", "command": []}), "invalid"),
        (
            json!({"profile": "exec", "command": ["true"], "cols": 0}),
            "invalid",
        ),
        (
            json!({"profile": "exec", "command": ["true"], "environment": "elsewhere"}),
            "not_found",
        ),
        (
            json!({"profile": "exec", "command": ["true"], "env": {"KRAD_ADE_TERMINAL": "9"}}),
            "invalid",
        ),
        (
            json!({"profile": "exec", "command": ["no-such-program-krad"]}),
            "failed",
        ),
        (json!({"profile": "exec", "command": "true"}), "bad_request"),
    ];
    for (fields, expected) in cases {
        let answer = app.request(json!({"Spawn": fields}));
        assert_eq!(code(&answer), expected, "{fields} → {answer}");
    }
    // The exec profile without a command says how the CLI gives one.
    let answer = app.request(json!({"Spawn": {"profile": "exec"}}));
    let message = answer["Error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("krad spawn --profile exec -- CMD"),
        "{answer}"
    );
    // Failed spawns leave nothing behind.
    assert_eq!(app.request(json!("List"))["Agents"], json!([]));
}

#[test]
fn spawn_honours_name_env_size_and_records_its_parent() {
    let app = App::start();
    let record = app.spawn(json!({
        "profile": "exec", "command": ["sh", "-c", "echo \"$GREETING $(stty size)\"; sleep 60"],
        "name": "greeter", "env": {"GREETING": "hello"}, "cols": 77, "rows": 22
    }));
    let id = record["terminal"].as_u64().unwrap();
    assert_eq!(record["name"], "greeter");
    assert_eq!(record["parent"], Value::Null);
    assert_eq!(record["lead"], false);
    app.until_screen(id, "hello 22 77");
    // A terminal's child names it as parent.
    let token = app.terminal_token(id);
    let child = app.call_as(
        id,
        &token,
        json!({"Spawn": {"profile": "exec", "command": ["sleep", "60"]}}),
    );
    assert_eq!(child["Agent"]["parent"], id, "{child}");
}

#[test]
fn ids_are_never_reused() {
    let app = App::start();
    let a = app.spawn_sh("true");
    app.until_state(a, "exited");
    assert_eq!(app.request(json!({"Close": {"target": a}})), json!("Ok"));
    let b = app.spawn_sh("true");
    assert!(b > a);
}

#[test]
fn list_is_by_terminal_id_and_filters_by_environment() {
    let app = App::start();
    let ids: Vec<u64> = (0..3).map(|_| app.spawn_sh("sleep 60")).collect();
    let agents = app.request(json!("List"))["Agents"]
        .as_array()
        .unwrap()
        .clone();
    let listed: Vec<u64> = agents
        .iter()
        .map(|a| a["terminal"].as_u64().unwrap())
        .collect();
    assert_eq!(listed, ids);
    assert_eq!(
        app.request(json!({"List": {"environment": "main"}}))["Agents"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert_eq!(
        code(&app.request(json!({"List": {"environment": "nope"}}))),
        "not_found"
    );
    assert_eq!(app.request(json!("Stats"))["Stats"]["agents"], 3);
}

#[test]
fn send_uses_bracketed_paste_when_the_program_asked_for_it() {
    let app = App::start();
    let plain = app.spawn_sh("stty -echo; cat -v");
    app.request(json!({"Send": {"target": plain, "text": "one\ntwo", "enter": true}}));
    app.until_screen(plain, "two");
    let screen = app.until_screen(plain, "one");
    assert!(!screen.contains("[200~"), "{screen}");
    let pasting = app.spawn_sh("printf '\\033[?2004h'; stty -echo; echo ready; cat -v");
    app.until_screen(pasting, "ready");
    let sent =
        app.request(json!({"Send": {"target": pasting, "text": "multi\nline", "enter": true}}));
    assert_eq!(sent["Sent"]["delivered"], true);
    app.until_screen(pasting, "^[[200~multi");
    app.until_screen(pasting, "line^[[201~");
}

#[test]
fn send_when_idle_holds_the_text_until_the_agent_stops() {
    let app = App::start();
    let id = app.spawn_sh(
        "echo busy; sleep 1; krad report idle; read -r line; echo \"got $line\"; sleep 60",
    );
    app.until_state(id, "working");
    let started = Instant::now();
    let sent = app
        .request(json!({"Send": {"target": id, "text": "later", "enter": true, "when": "idle"}}));
    assert_eq!(sent["Sent"]["delivered"], true, "{sent}");
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "sent before the agent was idle"
    );
    app.until_screen(id, "got later");
}

#[test]
fn send_to_an_exited_agent_is_a_conflict_and_limits_hold() {
    let app = App::start();
    let id = app.spawn_sh("true");
    app.until_state(id, "exited");
    let answer = app.request(json!({"Send": {"target": id, "text": "x"}}));
    assert_eq!(code(&answer), "conflict");
    assert_eq!(
        code(&app.request(json!({"Send": {"target": 999, "text": "x"}}))),
        "not_found"
    );
    let big = "x".repeat(32 * 1024 + 1);
    assert_eq!(
        code(&app.request(json!({"Send": {"target": id, "text": big}}))),
        "invalid"
    );
}

#[test]
fn output_shows_screen_cursor_and_scrollback() {
    let app = App::start();
    let id = app.spawn(json!({"profile": "exec", "rows": 10, "command": ["sh", "-c", "seq 1 50; printf 'last'; sleep 60"]}))
        ["terminal"]
        .as_u64()
        .unwrap();
    app.until_screen(id, "last");
    let output = app.request(json!({"Output": {"target": id, "lines": 5}}))["Output"].clone();
    assert_eq!(output["terminal"], id);
    assert!(
        output["screen"].as_str().unwrap().contains("50\nlast"),
        "{output}"
    );
    assert_eq!(output["cursor"], json!([9, 4]));
    let scrollback: Vec<&str> = output["scrollback"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert_eq!(scrollback.len(), 5);
    assert_eq!(output["truncated"], true);
    assert_eq!(
        code(&app.request(json!({"Output": {"target": id, "lines": 10001}}))),
        "invalid"
    );
    assert_eq!(
        code(&app.request(json!({"Output": {"target": 77}}))),
        "not_found"
    );
}

/// The screen model keeps what Output shows: coloured text as text, a wide
/// character once, and the text of 10,000 lines of scrollback after 12,000
/// coloured lines (the parser's own history is emptied after each chunk).
#[test]
fn output_after_12000_coloured_lines_keeps_text_wide_characters_and_scrollback() {
    let app = App::start();
    let script = "i=0; while [ $i -lt 12000 ]; do printf '\\033[1;3%dmline %d\\033[0m\\n' $((i % 8)) $i; \
                  i=$((i+1)); done; printf '\\033[32m\\346\\227\\245\\346\\234\\254 wide\\033[0m end'; sleep 60";
    let id = app
        .spawn(json!({"profile": "exec", "rows": 10, "cols": 40, "command": ["sh", "-c", script]}))
        ["terminal"]
        .as_u64()
        .unwrap();
    app.until_screen(id, "wide");
    let output = app.request(json!({"Output": {"target": id, "lines": 10000}}))["Output"].clone();
    assert_eq!(
        output["screen"].as_str().unwrap(),
        (11991..12000)
            .map(|i| format!("line {i}\n"))
            .collect::<String>()
            + "日本 wide end",
        "{output}"
    );
    // Two wide characters take four columns.
    assert_eq!(output["cursor"], json!([9, 13]));
    let scrollback = output["scrollback"].as_array().unwrap();
    // The app keeps 10,000 lines: all of them were returned.
    assert_eq!(scrollback.len(), 10_000);
    assert_eq!(output["truncated"], false);
    assert_eq!(scrollback[0], "line 1991");
    assert_eq!(scrollback[9_999], "line 11990");
}

/// `nohup krad serve`: the app goes on at SIGHUP, and its terminals do not
/// inherit the ignored SIGHUP (Close and the app's end hang them up).
#[test]
fn an_app_started_ignoring_sighup_starts_terminals_that_do_not() {
    let app = App::launch(Launch {
        ignoring_hangup: true,
        rust_log: "info",
        ..Launch::default()
    });
    let id = app.spawn_sh("grep '^SigIgn' /proc/self/status; echo listed; sleep 60");
    let screen = app.until_screen(id, "listed");
    let mask = screen
        .lines()
        .find_map(|line| line.strip_prefix("SigIgn:"))
        .map(|mask| u64::from_str_radix(mask.trim(), 16).unwrap())
        .unwrap_or_else(|| panic!("no SigIgn line: {screen}"));
    assert_eq!(mask & 1, 0, "the terminal ignores SIGHUP (SigIgn {mask:x})");
    app.signal(Signal::SIGHUP);
    let log = app.dir.path().join("app.log");
    crate::support::wait_until(Duration::from_secs(60), || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("SIGHUP ignored"))
    });
    assert!(app.request(json!("Hello"))["Hello"].is_object());
    assert_eq!(app.request(json!({"Close": {"target": id}})), json!("Ok"));
}

#[test]
fn close_hangs_up_then_kills_and_removes_the_terminal() {
    let app = App::start();
    // It says how it ended: by SIGHUP (trapped), not by the SIGKILL after the grace.
    let dir = tempfile::tempdir().unwrap();
    let told = dir.path().join("told");
    let polite = app.spawn_sh(&format!(
        "trap 'echo hup > {told}; exit 0' HUP; echo ready; sleep 60 & wait",
        told = told.display()
    ));
    app.until_screen(polite, "ready");
    assert_eq!(
        app.request(json!({"Close": {"target": polite}})),
        json!("Ok")
    );
    assert_eq!(
        std::fs::read_to_string(&told).unwrap_or_default().trim(),
        "hup",
        "SIGHUP should have ended it"
    );
    assert_eq!(
        code(&app.request(json!({"Check": {"target": polite}}))),
        "not_found"
    );
    let stubborn = app.spawn_sh("trap '' HUP; echo trapped; sleep 60");
    app.until_screen(stubborn, "trapped");
    let started = Instant::now();
    assert_eq!(
        app.request(json!({"Close": {"target": stubborn}})),
        json!("Ok")
    );
    let took = started.elapsed();
    // Killed after the grace (5 s), not at once — and not left running.
    assert!(
        took >= Duration::from_secs(4) && took < crate::support::stretched(Duration::from_secs(15)),
        "{took:?}"
    );
    assert_eq!(app.request(json!("List"))["Agents"], json!([]));
    assert_eq!(
        code(&app.request(json!({"Close": {"target": stubborn}}))),
        "not_found"
    );
    assert_eq!(
        code(&app.request(json!({"Close": {"environment": "main"}}))),
        "invalid"
    );
    assert_eq!(code(&app.request(json!({"Close": {}}))), "bad_request");
}

#[test]
fn a_closed_terminals_token_stops_working() {
    let app = App::start();
    let (id, token) = app.plain_terminal();
    assert!(app.call_as(id, &token, json!("Hello"))["Hello"].is_object());
    app.request(json!({"Close": {"target": id}}));
    assert_eq!(
        code(&app.call_as(id, &token, json!("Hello"))),
        "unauthorized"
    );
    assert!(!app.token_dir().join(format!("{id}.token")).exists());
}

#[test]
fn the_transcript_keeps_everything_printed() {
    let app = App::start();
    let id = app.spawn_sh("seq 1 3000");
    app.until_state(id, "exited");
    let transcript = app
        .dir
        .path()
        .join("repo/.git/krad/transcripts")
        .join(format!("{id}.log"));
    let text = std::fs::read_to_string(&transcript).unwrap();
    assert!(
        text.contains("\n1\r\n2\r\n") || text.starts_with("1\r\n2\r\n"),
        "{}",
        &text[..40.min(text.len())]
    );
    assert!(text.contains("2999\r\n3000"));
}

#[test]
fn the_shell_profile_types_its_prompt_once_the_shell_is_ready() {
    let app = App::start();
    let record =
        app.spawn(json!({"profile": "shell", "command": ["sh"], "prompt": "echo typed-$((6*7))"}));
    let id = record["terminal"].as_u64().unwrap();
    app.until_screen(id, "typed-42");
    assert_eq!(record["command"], json!(["sh"]));
}

#[test]
fn the_arg_prompt_is_the_last_argument() {
    let app = App::start();
    let record = app.spawn(
        json!({"profile": "exec", "command": ["echo", "prompt:"], "prompt": "do the thing"}),
    );
    assert_eq!(
        record["command"],
        json!(["echo", "prompt:", "do the thing"])
    );
    app.until_screen(record["terminal"].as_u64().unwrap(), "prompt: do the thing");
}

#[test]
fn a_fake_claude_gets_settings_and_its_hooks_drive_every_state() {
    let app = App::start();
    let record =
        app.spawn(json!({"profile": "claude", "prompt": "fix the login bug", "name": "fix-login"}));
    let id = record["terminal"].as_u64().unwrap();
    // The prompt is typed once Claude Code is up, never an argument.
    assert_eq!(record["command"], json!(["claude"]));
    let asking = app.request(json!({"Wait": {"target": id, "timeout_secs": 30}}))["Agent"].clone();
    assert_eq!(asking["state"], "asking", "{asking}");
    assert_eq!(asking["state_source"], "hook");
    assert_eq!(
        asking["message"],
        "Claude needs your permission to use Bash"
    );
    app.until_screen(id, "working on: fix the login bug");
    app.request(json!({"Send": {"target": id, "text": "yes", "enter": true}}));
    let idle = app.until(id, Duration::from_secs(20), |r| r["state"] == "idle");
    assert_eq!(idle["message"], "Done: yes");
    assert_eq!(idle["state_source"], "hook");
    app.request(json!({"Send": {"target": id, "text": "bye", "enter": true}}));
    let exited = app.until_state(id, "exited");
    assert_eq!(
        exited["exit_code"], 0,
        "exit 70/71: the fake found no --settings/hooks"
    );
    // The settings came from a file of the app's, not from the user's own settings.
    let settings = app
        .dir
        .path()
        .join("repo/.git/krad/hooks")
        .join(id.to_string())
        .join("claude-settings.json");
    let settings: Value = serde_json::from_slice(&std::fs::read(settings).unwrap()).unwrap();
    for event in ["Stop", "Notification", "UserPromptSubmit", "PreToolUse"] {
        assert!(settings["hooks"][event].is_array(), "{event}");
    }
}

#[test]
fn a_fake_codex_reports_its_turn_through_notify() {
    let app = App::start();
    let id = app.spawn(json!({"profile": "codex", "prompt": "tidy up"}))["terminal"]
        .as_u64()
        .unwrap();
    let idle = app.until(id, Duration::from_secs(20), |r| r["state"] == "idle");
    assert_eq!(idle["state_source"], "hook");
    assert_eq!(idle["message"], "codex finished tidy up");
    app.request(json!({"Send": {"target": id, "text": "", "enter": true}}));
    assert_eq!(app.until_state(id, "exited")["exit_code"], 0);
}

#[test]
fn a_terminal_printing_100_mb_does_not_slow_hello() {
    let app = App::start();
    let id =
        app.spawn_sh("head -c 100000000 /dev/zero | tr '\\0' 'x'; echo; echo flood-done; sleep 60");
    app.until_state(id, "working");
    let mut slowest = Duration::ZERO;
    let until = Instant::now() + Duration::from_secs(300);
    loop {
        let started = Instant::now();
        assert!(app.request(json!("Hello"))["Hello"].is_object());
        slowest = slowest.max(started.elapsed());
        let screen =
            app.request(json!({"Output": {"target": id, "lines": 0}}))["Output"]["screen"].clone();
        if screen.as_str().unwrap_or_default().contains("flood-done") {
            break;
        }
        assert!(Instant::now() < until, "the flood never finished");
        std::thread::sleep(Duration::from_millis(20));
    }
    let bound = crate::support::stretched(Duration::from_secs(1));
    assert!(
        slowest < bound,
        "a Hello took {slowest:?} during the flood (bound {bound:?})"
    );
}

#[test]
fn the_rev_never_goes_back_across_a_restart() {
    let app = App::start();
    let id = app.spawn_sh("sleep 60");
    let rev = app.record(id)["rev"].as_u64().unwrap();
    let app = app.again(None);
    let id2 = app.spawn_sh("sleep 60");
    assert!(id2 > id, "terminal id {id2} reused (was {id})");
    assert!(app.record(id2)["rev"].as_u64().unwrap() > rev);
}

/// Past `[terminals] transcripts_max_mb`, closed terminals' transcripts go,
/// oldest first; a live terminal's stays.
#[test]
fn closed_terminals_transcripts_are_removed_past_the_budget() {
    let app = App::launch(crate::support::Launch {
        config: Some("[terminals]\ntranscripts_max_mb = 0\n"),
        ..crate::support::Launch::default()
    });
    let transcripts = app.dir.path().join("repo/.git/krad/transcripts");
    let live = app.spawn_sh("seq 1 100; sleep 60");
    let closed = app.spawn_sh("seq 1 100");
    app.until_state(closed, "exited");
    let file = |id: u64| transcripts.join(format!("{id}.log"));
    assert!(file(closed).is_file());
    assert_eq!(
        app.request(json!({"Close": {"target": closed}})),
        json!("Ok")
    );
    crate::support::wait_until(Duration::from_secs(10), || !file(closed).exists());
    assert!(file(live).is_file(), "a live terminal's transcript stays");
}
