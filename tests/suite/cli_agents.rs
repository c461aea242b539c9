//! Section 7 for the agent commands: `krad spawn`, `ls`, `check`, `wait`,
//! `send`, `output`, `close`, `report`, `subscribe` and `watch`, run as a user
//! would, with their exit codes.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{App, KRAD, exit_code, stderr, stdout};

fn spawned_id(out: &std::process::Output) -> u64 {
    let answer: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {} {}", stdout(out), stderr(out)));
    answer["Agent"]["terminal"].as_u64().unwrap()
}

/// `krad spawn --json --profile exec -- sh -c SCRIPT`, and the new terminal's id.
fn spawn_sh_cli(app: &App, script: &str) -> u64 {
    spawned_id(&app.krad(&[
        "spawn",
        "--json",
        "--profile",
        "exec",
        "--",
        "sh",
        "-c",
        script,
    ]))
}

#[test]
fn spawn_ls_check_output_send_close() {
    let app = App::start();
    let out = app.krad(&[
        "spawn",
        "--json",
        "--profile",
        "exec",
        "--name",
        "echoer",
        "--",
        "sh",
        "-c",
        "echo ready; cat",
    ]);
    assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
    let id = spawned_id(&out);
    app.until_screen(id, "ready");

    let out = app.krad(&["ls"]);
    assert_eq!(exit_code(&out), 0);
    let table = stdout(&out);
    assert!(
        table.contains("echoer") && table.contains("working"),
        "{table}"
    );
    let out = app.krad(&["ls", "--json"]);
    let agents: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(agents["Agents"][0]["terminal"], id);

    let out = app.krad(&["check", &id.to_string()]);
    assert_eq!(exit_code(&out), 0);
    assert!(stdout(&out).contains("working"), "{}", stdout(&out));

    let out = app.krad(&["send", &id.to_string(), "hello there", "--enter"]);
    assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("delivered"), "{}", stdout(&out));
    app.until_screen(id, "hello there\nhello there");

    let out = app.krad(&["output", &id.to_string()]);
    assert!(stdout(&out).contains("hello there"), "{}", stdout(&out));
    // `krad read` is the same command (the contract's "read their screens").
    assert_eq!(app.krad(&["read", &id.to_string()]).stdout, out.stdout);

    let out = app.krad(&["close", &id.to_string()]);
    assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
    assert_eq!(exit_code(&app.krad(&["check", &id.to_string()])), 3);
    // With --json, the app's error is the one JSON value on stdout, its
    // message on stderr, the exit code the same.
    let out = app.krad(&["check", &id.to_string(), "--json"]);
    assert_eq!(exit_code(&out), 3);
    let error: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(error["Error"]["code"], "not_found", "{error}");
    assert_eq!(error["Error"]["detail"]["terminal"], id, "{error}");
    assert!(stderr(&out).contains("not_found"), "{}", stderr(&out));
    assert_eq!(exit_code(&app.krad(&["close", "--env", "main"])), 2);
    let out = app.krad(&["close", "--env", "main", "--json"]);
    assert_eq!(exit_code(&out), 2);
    let error: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(error["Error"]["code"], "invalid", "{error}");
    assert_eq!(exit_code(&app.krad(&["close"])), 2);
    // A failure of krad's own (no app answered) prints nothing on stdout.
    let out = app.krad(&["close", "--json"]);
    assert_eq!(exit_code(&out), 2);
    assert!(out.stdout.is_empty(), "{}", stdout(&out));
}

#[test]
fn spawn_reads_the_prompt_from_stdin() {
    let app = App::start();
    let out = app.krad_with_stdin(
        &[
            "spawn",
            "--json",
            "--profile",
            "exec",
            "--prompt",
            "-",
            "--",
            "echo",
            "got:",
        ],
        b"from stdin\n",
    );
    let id = spawned_id(&out);
    app.until_screen(id, "got: from stdin");
    // An empty standard input (`git diff` with no diff) is not a task: a
    // usage error, and nothing starts.
    for empty in [&b""[..], b"\n  \n"] {
        let out = app.krad_with_stdin(
            &["spawn", "--profile", "exec", "--prompt", "-", "--", "true"],
            empty,
        );
        assert_eq!(exit_code(&out), 2, "{}", stderr(&out));
        assert!(
            stderr(&out).contains("--prompt -: standard input was empty"),
            "{}",
            stderr(&out)
        );
    }
    assert_eq!(
        app.request(json!("List"))["Agents"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
}

#[test]
fn wait_exits_0_5_or_9() {
    let app = App::start();
    let ok = spawn_sh_cli(&app, "exit 0");
    let bad = spawn_sh_cli(&app, "exit 3");
    let busy = spawn_sh_cli(&app, "echo busy; sleep 60");
    assert_eq!(
        exit_code(&app.krad(&["wait", &ok.to_string(), "--exit"])),
        0
    );
    let out = app.krad(&["wait", &bad.to_string(), "--exit"]);
    assert_eq!(exit_code(&out), 9);
    assert!(stderr(&out).contains("code 3"), "{}", stderr(&out));
    // Said once: `… exited (process) with code 3`, not `exited … — exited …`.
    let line = stdout(&out);
    assert!(line.contains("exited (process) with code 3"), "{line}");
    assert_eq!(line.matches("exited").count(), 1, "{line}");
    app.until_state(busy, "working");
    let out = app.krad(&["wait", &busy.to_string(), "--timeout", "1"]);
    assert_eq!(exit_code(&out), 5, "{}", stderr(&out));
    let out = app.krad(&["wait", &busy.to_string(), "--timeout", "1", "--json"]);
    assert_eq!(exit_code(&out), 5, "{}", stderr(&out));
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer, "TimedOut");
    let out = app.krad(&["wait", &ok.to_string(), &bad.to_string(), "--json"]);
    assert_eq!(exit_code(&out), 9);
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["Agents"].as_array().unwrap().len(), 2);
    assert_eq!(exit_code(&app.krad(&["wait", "999"])), 3);
}

#[test]
fn report_outside_a_terminal_is_refused() {
    let app = App::start();
    let out = app.krad(&["report", "idle"]);
    assert_eq!(exit_code(&out), 4, "{}", stderr(&out));
}

#[test]
fn subscribe_prints_json_lines_until_the_app_stops() {
    let mut app = App::start();
    let mut child = Command::new(KRAD)
        .args(["subscribe"])
        .env("KRAD_ADE_API_JSON", &app.api_json)
        .env_remove("KRAD_ADE_ENDPOINT")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(first["Snapshot"]["fresh"], true);
    let id = app.spawn_sh("exit 0");
    let agent: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(agent["Agent"]["terminal"], id);
    assert_eq!(app.request(json!("Shutdown")), json!("Ok"));
    let mut last = Value::Null;
    for line in lines {
        last = serde_json::from_str(&line.unwrap()).unwrap();
    }
    assert_eq!(last, json!("ShuttingDown"));
    assert!(child.wait().unwrap().success());
    app.wait_exit(Duration::from_secs(15));
}

#[test]
fn watch_redraws_a_table_on_every_change() {
    let mut app = App::start();
    let id = app.spawn(json!({"profile": "exec", "name": "watched", "command": ["sh", "-c", "krad report asking -m 'which way?'; sleep 60"]}))
        ["terminal"]
        .as_u64()
        .unwrap();
    app.until_state(id, "asking");
    let child = Command::new(KRAD)
        .args(["watch"])
        .env("KRAD_ADE_API_JSON", &app.api_json)
        .env_remove("KRAD_ADE_ENDPOINT")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(app.request(json!("Shutdown")), json!("Ok"));
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = stdout(&out);
    assert!(
        text.contains("watched") && text.contains("asking") && text.contains("which way?"),
        "{text}"
    );
    assert!(text.contains("the app stopped"), "{text}");
    app.wait_exit(Duration::from_secs(15));
}

#[test]
fn hooks_never_fail_the_agent() {
    // Outside any terminal, with garbage input: silent, exit 0.
    let app = App::start();
    let mut child = Command::new(KRAD)
        .args(["hook", "claude"])
        .env("KRAD_ADE_API_JSON", app.dir.path().join("none.json"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"{not json").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
    let out = app.krad(&["hook", "codex", "{\"type\":\"agent-turn-complete\"}"]);
    assert_eq!(exit_code(&out), 0);
    assert!(out.stdout.is_empty());
}

/// Issue 48: there was no `krad output --follow` for a script to stream a
/// terminal's new output.
#[test]
fn output_follow_streams_what_the_program_prints_until_it_exits() {
    let app = App::start();
    let id = app.spawn_sh("echo first-line; read x; echo \"then-$x\"; sleep 0.2; exit 3");
    app.until_screen(id, "first-line");
    let mut child = app.krad_child(&["output", &id.to_string(), "--follow"]);
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    let mut line = String::new();
    while !seen.contains("first-line") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "ended early: {seen}");
        seen.push_str(&line);
    }
    let sent = app.request(json!({"Send": {"target": id, "text": "more", "enter": true}}));
    assert!(sent["Sent"].is_object(), "{sent}");
    while !seen.contains("then-more") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "ended early: {seen}");
        seen.push_str(&line);
    }
    // It ends with the program.
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{seen}");
}
