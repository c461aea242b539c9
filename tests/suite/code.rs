//! Code: a program run to completion in an environment, without a terminal —
//! exit codes, stdin, the output cap, timeouts and clients that leave (the
//! whole process group dies), rights, and `krad code`.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{App, code, exit_code, stderr, stdout};

fn run(app: &App, fields: Value) -> Value {
    app.request(json!({ "Code": fields }))
}

fn result(answer: &Value) -> &Value {
    assert!(answer["CodeResult"].is_object(), "{answer}");
    &answer["CodeResult"]
}

/// A pid written to a file by a program (polls until the file is complete).
fn pid_in(path: &Path) -> i32 {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        assert!(Instant::now() < until, "{} never came", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// True while the process exists and is not a zombie.
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

fn until_gone(pid: i32) {
    let until = Instant::now() + Duration::from_secs(10);
    while alive(pid) {
        assert!(Instant::now() < until, "process {pid} survived");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_program_runs_in_the_environment_with_its_exit_code_and_output() {
    let app = App::start();
    let answer = run(
        &app,
        json!({"environment": "main", "command": ["sh", "-c", "echo out; echo err >&2; exit 3"]}),
    );
    let done = result(&answer);
    assert_eq!(done["exit_code"], 3);
    assert_eq!(done["signal"], Value::Null);
    assert_eq!(done["stdout"], "out\n");
    assert_eq!(done["stderr"], "err\n");
    assert_eq!(done["truncated"], false);
    assert!(done["duration_ms"].is_u64());

    let pwd = run(
        &app,
        json!({"environment": "main", "command": ["pwd", "-P"]}),
    );
    let repo = app.dir.path().join("repo").canonicalize().unwrap();
    assert_eq!(result(&pwd)["stdout"], format!("{}\n", repo.display()));

    let killed = run(
        &app,
        json!({"environment": "main", "command": ["sh", "-c", "kill -TERM $$"]}),
    );
    assert_eq!(result(&killed)["signal"], 15);
    assert_eq!(result(&killed)["exit_code"], Value::Null);
}

#[test]
fn stdin_is_written_then_closed() {
    let app = App::start();
    let cat = run(
        &app,
        json!({"environment": "main", "command": ["cat"], "stdin": "a\nb"}),
    );
    assert_eq!(result(&cat)["stdout"], "a\nb");
    assert_eq!(result(&cat)["exit_code"], 0);
    // A program that never reads its stdin does not hang the write.
    let deaf = run(
        &app,
        json!({"environment": "main", "command": ["true"], "stdin": "x".repeat(60_000)}),
    );
    assert_eq!(result(&deaf)["exit_code"], 0);
    // Without stdin, stdin is empty.
    let none = run(
        &app,
        json!({"environment": "main", "command": ["wc", "-c"]}),
    );
    assert_eq!(result(&none)["stdout"].as_str().unwrap().trim(), "0");
}

#[test]
fn output_is_capped_at_one_mib_each_and_marked() {
    let app = App::start();
    let answer = run(
        &app,
        json!({"environment": "main", "command": ["sh", "-c",
            "head -c 3000000 /dev/zero | tr '\\0' o; head -c 1500000 /dev/zero | tr '\\0' e >&2; echo done >&2"]}),
    );
    let done = result(&answer);
    assert_eq!(done["truncated"], true);
    assert_eq!(done["exit_code"], 0);
    assert_eq!(done["stdout"].as_str().unwrap().len(), 1024 * 1024);
    assert_eq!(done["stderr"].as_str().unwrap().len(), 1024 * 1024);
    let small = run(
        &app,
        json!({"environment": "main", "command": ["echo", "é"]}),
    );
    assert_eq!(result(&small)["truncated"], false);
    assert_eq!(result(&small)["stdout"], "é\n");
}

#[test]
fn a_timeout_kills_the_program_and_its_grandchildren() {
    let app = App::start();
    let pidfile = app.dir.path().join("grandchild.pid");
    let script = format!("sleep 300 & echo $! > {}; sleep 300", pidfile.display());
    let started = Instant::now();
    let answer = run(
        &app,
        json!({"environment": "main", "command": ["sh", "-c", script], "timeout_secs": 1}),
    );
    let done = result(&answer);
    assert_eq!(done["signal"], 9, "{answer}");
    assert_eq!(done["exit_code"], Value::Null);
    assert!(started.elapsed() < Duration::from_secs(30));
    until_gone(pid_in(&pidfile));
}

#[test]
fn a_program_is_killed_with_its_group_when_its_client_leaves() {
    let app = App::start();
    let parent = app.dir.path().join("parent.pid");
    let child = app.dir.path().join("child.pid");
    let script = format!(
        "echo $$ > {}; sleep 300 & echo $! > {}; wait",
        parent.display(),
        child.display()
    );
    let mut stream = app.connect();
    let envelope =
        app.envelope(json!({"Code": {"environment": "main", "command": ["sh", "-c", script]}}));
    let mut line = serde_json::to_vec(&envelope).unwrap();
    line.push(b'\n');
    stream.write_all(&line).unwrap();
    let (parent, child) = (pid_in(&parent), pid_in(&child));
    assert!(alive(parent) && alive(child));
    drop(stream);
    until_gone(parent);
    until_gone(child);
}

#[test]
fn a_plain_terminal_runs_code_only_in_its_own_environment() {
    let app = App::start();
    let (plain, token) = app.plain_terminal();
    let inside = app.call_as(
        plain,
        &token,
        json!({"Code": {"environment": "main", "command": ["echo", "ok"]}}),
    );
    assert_eq!(result(&inside)["stdout"], "ok\n");
    let outside = app.call_as(
        plain,
        &token,
        json!({"Code": {"environment": "elsewhere", "command": ["echo", "no"]}}),
    );
    assert_eq!(code(&outside), "forbidden", "{outside}");
    // Client may name any environment; one that does not exist is not found.
    let missing = run(
        &app,
        json!({"environment": "elsewhere", "command": ["true"]}),
    );
    assert_eq!(code(&missing), "not_found", "{missing}");
}

#[test]
fn a_program_that_cannot_start_fails_and_bad_fields_are_invalid() {
    let app = App::start();
    let answer = run(
        &app,
        json!({"environment": "main", "command": ["/nonexistent/krad-no-such-program"]}),
    );
    assert_eq!(code(&answer), "failed", "{answer}");
    let long = run(
        &app,
        json!({"environment": "main", "command": ["true"], "timeout_secs": 111}),
    );
    assert_eq!(code(&long), "invalid", "{long}");
    let empty = run(&app, json!({"environment": "main", "command": []}));
    assert_eq!(code(&empty), "invalid", "{empty}");
}

#[test]
fn krad_code_passes_output_through_and_exits_9_on_failure() {
    let app = App::start();
    let ok = app.krad(&["code", "--", "echo", "hi"]);
    assert_eq!(exit_code(&ok), 0, "{}", stderr(&ok));
    assert_eq!(stdout(&ok), "hi\n");

    let failed = app.krad(&[
        "code",
        "--env",
        "main",
        "--",
        "sh",
        "-c",
        "echo out; echo err >&2; exit 4",
    ]);
    assert_eq!(exit_code(&failed), 9);
    assert_eq!(stdout(&failed), "out\n");
    let err = stderr(&failed);
    assert!(err.starts_with("err\n"), "{err}");
    assert!(err.contains("exited with code 4"), "{err}");

    let timed_out = app.krad(&["code", "--timeout", "1", "--", "sleep", "30"]);
    assert_eq!(exit_code(&timed_out), 9);
    assert!(
        stderr(&timed_out).contains("signal 9"),
        "{}",
        stderr(&timed_out)
    );

    let as_json = app.krad(&["code", "--json", "--", "sh", "-c", "exit 2"]);
    assert_eq!(exit_code(&as_json), 9);
    let answer: Value = serde_json::from_str(stdout(&as_json).trim()).unwrap();
    assert_eq!(answer["CodeResult"]["exit_code"], 2);

    let input = app.dir.path().join("input.txt");
    std::fs::write(&input, "from a file\n").unwrap();
    let file = app.krad(&["code", "--stdin-file", input.to_str().unwrap(), "--", "cat"]);
    assert_eq!(stdout(&file), "from a file\n");

    let missing = app.krad(&["code", "--", "/nonexistent/krad-no-such-program"]);
    assert_eq!(exit_code(&missing), 1, "{}", stderr(&missing));
    let unknown = app.krad(&["code", "--env", "elsewhere", "--", "true"]);
    assert_eq!(exit_code(&unknown), 3);
}

#[test]
fn krad_code_reads_its_own_stdin_with_a_dash() {
    let app = App::start();
    let output = app.krad_with_stdin(
        &["code", "--stdin-file", "-", "--", "tr", "a-z", "A-Z"],
        b"piped in\n",
    );
    assert_eq!(exit_code(&output), 0, "{}", stderr(&output));
    assert_eq!(stdout(&output), "PIPED IN\n");
}

#[test]
fn krad_code_help_names_every_exit_code_it_can_end_with() {
    let app = App::start();
    let help = stdout(&app.krad(&["code", "--help"]));
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    for code in [
        "0 when", "9 when", "1 when", "2 for", "3 when", "4 when", "5 when", "7 when",
    ] {
        assert!(help.contains(code), "{code:?} missing from:\n{help}");
    }
    // What the help says of 3 holds.
    let out = app.krad(&["code", "--env", "no-such-env", "--", "true"]);
    assert_eq!(exit_code(&out), 3, "{}", stderr(&out));
}
