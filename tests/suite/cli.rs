//! Section 7, the krad CLI: discovery, `--json`, and every exit code the bus can
//! produce today (the mapping of the others is unit-tested in `exit.rs`).

use std::os::unix::fs::PermissionsExt;

use serde_json::{Value, json};

use crate::support::{App, KRAD, exit_code, krad_cmd, stderr, stdout};

#[test]
fn api_prints_version_build_and_pid() {
    let app = App::start();
    let text = app.krad_ok(&["api"]);
    assert!(text.contains("agents API v1"), "{text}");
    assert!(text.contains(&format!("pid {}", app.pid)), "{text}");
    let out = app.krad(&["api", "--json"]);
    let hello: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(hello["Hello"]["pid"], app.pid);
    assert_eq!(hello["Hello"]["api_version"], 1);
}

#[test]
fn stats_prints_counters_as_text_and_json() {
    let app = App::start();
    let out = app.krad(&["stats"]);
    assert_eq!(exit_code(&out), 0);
    assert!(stdout(&out).contains("requests_total"));
    let out = app.krad(&["stats", "--json"]);
    let stats: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stats["Stats"]["agents"], 0);
}

#[test]
fn raw_prints_the_answer_line_and_maps_exit_codes() {
    let app = App::start();
    let out = app.krad(&["raw", "\"Hello\""]);
    assert_eq!(exit_code(&out), 0);
    let hello: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(hello["Hello"]["pid"], app.pid);
    // A bare name works too.
    assert_eq!(exit_code(&app.krad(&["raw", "Stats"])), 0);
    // 1: an error not listed (unknown_request).
    let out = app.krad(&["raw", "Teleport"]);
    assert_eq!(exit_code(&out), 1);
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["Error"]["code"], "unknown_request");
    // 2: bad_request.
    assert_eq!(
        exit_code(&app.krad(&["raw", r#"{"Shutdown":{"close_terminals":1}}"#])),
        2
    );
    // 2: the request is not JSON at all (local usage error).
    assert_eq!(exit_code(&app.krad(&["raw", "{nope"])), 2);
    // 6: another API version.
    let out = app.krad(&["raw", "--api-version", "2", "Hello"]);
    assert_eq!(exit_code(&out), 6);
    assert!(stdout(&out).contains("This app serves the agents API v1, not v2"));
}

#[test]
fn usage_errors_exit_2() {
    let out = krad_cmd(
        std::path::Path::new("/nonexistent/api.json"),
        &["no-such-command"],
        &[],
    );
    assert_eq!(exit_code(&out), 2);
    let out = krad_cmd(
        std::path::Path::new("/nonexistent/api.json"),
        &["serve", "--port", "x"],
        &[],
    );
    assert_eq!(exit_code(&out), 2);
    // An ask that does not say what kind of answer it wants.
    let out = krad_cmd(
        std::path::Path::new("/nonexistent/api.json"),
        &["ask", "Which database?"],
        &[],
    );
    assert_eq!(exit_code(&out), 2);
    assert!(stderr(&out).contains("--option"), "{}", stderr(&out));
    // The usage shows the arguments in the order they are taken.
    let out = krad_cmd(
        std::path::Path::new("/nonexistent/api.json"),
        &["rename"],
        &[],
    );
    assert_eq!(exit_code(&out), 2);
    assert!(
        stderr(&out).contains("krad rename [OPTIONS] <TARGET> <NAME|--clear>"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn no_app_exits_7_without_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let out = krad_cmd(&dir.path().join("api.json"), &["api"], &[]);
    assert_eq!(exit_code(&out), 7);
    assert!(stderr(&out).contains("not running"), "{}", stderr(&out));
    let out = krad_cmd(
        &dir.path().join("api.json"),
        &[
            "api",
            "--endpoint",
            "127.0.0.1:1",
            "--token-file",
            "/dev/null",
        ],
        &[],
    );
    assert_ne!(exit_code(&out), 0);
}

#[test]
fn a_wrong_token_exits_4() {
    let app = App::start();
    let token_file = app.dir.path().join("wrong-token");
    std::fs::write(&token_file, "0123456789abcdef0123456789abcdef\n").unwrap();
    let out = app.krad(&["api", "--token-file", token_file.to_str().unwrap()]);
    assert_eq!(exit_code(&out), 4, "{}", stderr(&out));
    assert!(stderr(&out).contains("unauthorized"));
}

#[test]
fn endpoint_and_token_file_override_api_json() {
    let app = App::start();
    let token_file = app.dir.path().join("token");
    std::fs::write(&token_file, app.token()).unwrap();
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = krad_cmd(
        &app.dir.path().join("elsewhere.json"),
        &[
            "api",
            "--json",
            "--endpoint",
            &app.endpoint.to_string(),
            "--token-file",
            token_file.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
}

#[test]
fn inside_a_terminal_the_krad_ade_variables_are_used_first() {
    let app = App::start();
    let token_file = app.dir.path().join("token");
    std::fs::write(&token_file, app.token()).unwrap();
    let nowhere = app.dir.path().join("no-api.json");
    let endpoint = app.endpoint.to_string();
    // Endpoint and token from the environment, no api.json: a Client caller.
    let env = [
        ("KRAD_ADE_ENDPOINT", endpoint.as_str()),
        ("KRAD_ADE_TOKEN_FILE", token_file.to_str().unwrap()),
    ];
    let out = krad_cmd(&nowhere, &["api"], &env);
    assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
    // KRAD_ADE_TOKEN works too.
    let env = [
        ("KRAD_ADE_ENDPOINT", endpoint.as_str()),
        ("KRAD_ADE_TOKEN", app.token()),
    ];
    assert_eq!(exit_code(&krad_cmd(&nowhere, &["api"], &env)), 0);
    // Naming a terminal makes the caller that terminal: the client token is not its token.
    let env = [
        ("KRAD_ADE_ENDPOINT", endpoint.as_str()),
        ("KRAD_ADE_TOKEN", app.token()),
        ("KRAD_ADE_ENVIRONMENT", "main"),
        ("KRAD_ADE_TERMINAL", "3"),
    ];
    assert_eq!(exit_code(&krad_cmd(&nowhere, &["api"], &env)), 4);
    // A bad terminal id is a clear local error.
    let env = [
        ("KRAD_ADE_ENDPOINT", endpoint.as_str()),
        ("KRAD_ADE_TOKEN", app.token()),
        ("KRAD_ADE_ENVIRONMENT", "main"),
        ("KRAD_ADE_TERMINAL", "three"),
    ];
    let out = krad_cmd(&nowhere, &["api"], &env);
    assert_eq!(exit_code(&out), 1);
    assert!(stderr(&out).contains("KRAD_ADE_TERMINAL"));
}

#[test]
fn stop_shuts_the_app_down_and_waits_for_it() {
    let mut app = App::start();
    let out = app.krad(&["stop", "--json"]);
    assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
    let stopped: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stopped["Stopped"]["pid"], app.pid);
    // `krad stop` returned only once the process was gone.
    assert!(!krad_bus::api_json::pid_alive(app.pid) || app.child.try_wait().unwrap().is_some());
    assert!(!app.api_json.exists());
    assert_eq!(exit_code(&app.krad(&["api"])), 7);
}

#[test]
fn serve_outside_a_git_repository_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(KRAD)
        .args(["serve", "--root"])
        .arg(dir.path())
        .env("KRAD_ADE_API_JSON", dir.path().join("api.json"))
        .output()
        .unwrap();
    assert_eq!(exit_code(&out), 1);
    assert!(
        stderr(&out).contains("not inside a git repository"),
        "{}",
        stderr(&out)
    );
    assert!(!dir.path().join("api.json").exists());
    // A bare repository is named as one, with what to do instead.
    let bare = dir.path().join("bare.git");
    let made = std::process::Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(&bare)
        .status()
        .unwrap();
    assert!(made.success());
    let out = std::process::Command::new(KRAD)
        .args(["serve", "--root"])
        .arg(&bare)
        .env("KRAD_ADE_API_JSON", dir.path().join("api.json"))
        .output()
        .unwrap();
    assert_eq!(exit_code(&out), 1);
    assert!(
        stderr(&out).contains("is a git directory with no work tree")
            && stderr(&out).contains("git worktree add"),
        "{}",
        stderr(&out)
    );
    assert!(!bare.join("krad").exists() && !dir.path().join("api.json").exists());
}

#[test]
fn serve_prints_the_endpoint_and_honours_port() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let app = App::start_with(&["--port", &port.to_string()]);
    assert_eq!(app.endpoint.port(), port);
}

#[test]
fn help_documents_every_exit_code_and_completions_generate() {
    let out = krad_cmd(std::path::Path::new("/x"), &["--help"], &[]);
    assert_eq!(exit_code(&out), 0);
    let help = stdout(&out);
    for code in 0..=9 {
        assert!(
            help.contains(&format!("\n  {code}  ")),
            "exit code {code} missing from --help"
        );
    }
    for shell in ["bash", "zsh", "fish"] {
        let out = krad_cmd(std::path::Path::new("/x"), &["completions", shell], &[]);
        assert_eq!(exit_code(&out), 0);
        assert!(stdout(&out).contains("serve"));
    }
}

/// Issue 48: `krad completions bash | head -1` panicked with a backtrace
/// (exit 101). Every command ends quietly on a closed pipe.
#[test]
fn a_closed_pipe_ends_every_printing_command_quietly() {
    for args in [
        &["completions", "bash"][..],
        &["completions", "zsh"][..],
        &["--help"][..],
        &["spawn", "--help"][..],
    ] {
        let mut child = std::process::Command::new(crate::support::KRAD)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The reader is gone before krad writes a byte.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.code().is_some_and(|c| c == 0),
            "krad {args:?}: {:?}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!said.contains("panicked"), "krad {args:?}: {said}");
    }
}

#[test]
fn the_token_never_reaches_logs_or_argv() {
    let mut app = App::start_logged(&[], "trace");
    let out = app.krad_env(&["api"], &[("RUST_LOG", "trace")]);
    assert!(!stderr(&out).contains(app.token()));
    app.call(&json!({"token": app.token(), "from": {"Terminal": {"environment": "main", "terminal": 2}}, "request": "Hello"}));
    app.call(&json!({"token": app.token(), "from": "Client", "request": "Nope"}));
    app.call(
        &json!({"token": app.token(), "from": "Client", "request": "Hello", "extra": app.token()}),
    );
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", app.pid)).unwrap();
    assert!(!String::from_utf8_lossy(&cmdline).contains(app.token()));
    assert_eq!(app.request(json!("Shutdown")), json!("Ok"));
    app.wait_exit(std::time::Duration::from_secs(10));
    let log = app.log();
    assert!(log.contains("request"), "trace logging is on: {log}");
    assert!(!log.contains(app.token()), "the token reached the log");
}

/// Issue 48: `krad serve --help` listed the client options `--endpoint` and
/// `--token-file`: serve starts the app, it connects to none. They are told
/// once, in `krad --help`, and still work on every client command.
#[test]
fn serve_help_lists_no_client_options_and_krad_help_tells_them() {
    let out = krad_cmd(std::path::Path::new("/x"), &["serve", "--help"], &[]);
    assert_eq!(exit_code(&out), 0);
    let help = stdout(&out);
    assert!(!help.contains("--endpoint"), "{help}");
    assert!(!help.contains("--token-file"), "{help}");
    let top = stdout(&krad_cmd(std::path::Path::new("/x"), &["--help"], &[]));
    assert!(
        top.contains("--endpoint") && top.contains("--token-file"),
        "{top}"
    );
    let app = App::start();
    let token = app.dir.path().join("token");
    std::fs::write(&token, app.token()).unwrap();
    let endpoint = app.endpoint.to_string();
    let out = krad_cmd(
        std::path::Path::new("/nowhere/api.json"),
        &[
            "ls",
            "--endpoint",
            &endpoint,
            "--token-file",
            token.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
}
