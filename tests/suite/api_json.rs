//! Section 4, api.json: written private and atomically, removed on every clean
//! stop, a stale one reported as "not running", never replaced while its app lives.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::{Value, json};

use crate::support::{App, exit_code, krad_cmd, stderr};

#[test]
fn api_json_is_0600_in_a_0700_directory_and_complete() {
    let app = App::start();
    let file = std::fs::metadata(&app.api_json).unwrap();
    assert_eq!(file.permissions().mode() & 0o777, 0o600);
    let dir = std::fs::metadata(app.api_json.parent().unwrap()).unwrap();
    assert_eq!(dir.permissions().mode() & 0o777, 0o700);
    let written: Value = serde_json::from_slice(&std::fs::read(&app.api_json).unwrap()).unwrap();
    assert_eq!(written["api_version"], 1);
    assert_eq!(written["endpoint"], app.endpoint.to_string());
    assert_eq!(written["pid"], app.pid);
    assert_eq!(written["token"].as_str().unwrap().len(), 32);
    assert!(written["root"].as_str().unwrap().ends_with("/repo"));
    assert!(written["started_at"].as_str().unwrap().ends_with('Z'));
    assert!(written["build"].is_string());
    // No temp file is left beside it.
    let leftovers: Vec<String> = std::fs::read_dir(app.api_json.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".tmp"))
        .collect();
    assert_eq!(leftovers, Vec::<String>::new());
}

#[test]
fn each_start_draws_a_new_token() {
    let a = App::start();
    let b = App::start();
    assert_ne!(a.token(), b.token());
    // a's token means nothing to b.
    let answer = b.call(&json!({"token": a.token(), "from": "Client", "request": "Hello"}));
    assert_eq!(answer["Error"]["code"], "unauthorized");
}

fn stops_cleanly_on(signal: Signal) {
    let mut app = App::start();
    app.signal(signal);
    let status = app.wait_exit(Duration::from_secs(10));
    assert!(status.success(), "{signal}: {status}");
    assert!(
        !app.api_json.exists(),
        "api.json left behind after {signal}"
    );
}

#[test]
fn sigterm_removes_api_json() {
    stops_cleanly_on(Signal::SIGTERM);
}

#[test]
fn sigint_removes_api_json() {
    stops_cleanly_on(Signal::SIGINT);
}

#[test]
fn shutdown_answers_ok_then_removes_api_json_and_exits() {
    let mut app = App::start();
    assert_eq!(app.request(json!({"Shutdown": {}})), json!("Ok"));
    let status = app.wait_exit(Duration::from_secs(10));
    assert!(status.success());
    assert!(!app.api_json.exists());
}

#[test]
fn a_stale_api_json_says_not_running_and_exits_7() {
    let mut app = App::start();
    let saved = std::fs::read(&app.api_json).unwrap();
    app.child.kill().unwrap();
    app.wait_exit(Duration::from_secs(10));
    // SIGKILL leaves api.json behind; put it back in case, and check it is seen as stale.
    std::fs::write(&app.api_json, &saved).unwrap();
    let started = std::time::Instant::now();
    let out = app.krad(&["api"]);
    assert_eq!(exit_code(&out), 7, "{}", stderr(&out));
    assert!(stderr(&out).contains("not running"), "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_port_that_refuses_is_not_running_too() {
    // The pid is alive (this test process) but nothing listens on the port.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("api.json");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    std::fs::write(
        &path,
        json!({"api_version":1,"endpoint":format!("127.0.0.1:{port}"),"token":"0".repeat(32),
               "pid":std::process::id(),"build":"0.1.0","started_at":"2026-01-01T00:00:00Z","root":"/"})
        .to_string(),
    )
    .unwrap();
    let out = krad_cmd(&path, &["api"], &[]);
    assert_eq!(exit_code(&out), 7, "{}", stderr(&out));
    assert!(stderr(&out).contains("not running"));
}

#[test]
fn a_second_app_does_not_replace_a_live_one() {
    let app = App::start();
    let repo = app.dir.path().join("repo");
    let out = std::process::Command::new(crate::support::KRAD)
        .arg("serve")
        .current_dir(&repo)
        .env("KRAD_ADE_API_JSON", &app.api_json)
        .output()
        .unwrap();
    assert_eq!(exit_code(&out), 1);
    assert!(stderr(&out).contains("already serves"), "{}", stderr(&out));
    // The first app's api.json is untouched and it still answers.
    assert!(app.request(json!("Hello"))["Hello"].is_object());
    let written: Value = serde_json::from_slice(&std::fs::read(&app.api_json).unwrap()).unwrap();
    assert_eq!(written["pid"], app.pid);
}

#[test]
fn a_stale_api_json_is_replaced_by_a_new_app() {
    let mut first = App::start();
    first.child.kill().unwrap();
    first.wait_exit(Duration::from_secs(10));
    assert!(first.api_json.exists());
    let repo = first.dir.path().join("repo");
    let mut second = std::process::Command::new(crate::support::KRAD)
        .args(["serve", "--json"])
        .current_dir(&repo)
        .env("KRAD_ADE_API_JSON", &first.api_json)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(second.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let out = first.krad(&["api", "--json"]);
    assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
    let _ = second.kill();
    let _ = second.wait();
}

#[test]
fn the_default_location_is_home_when_xdg_runtime_dir_is_unset() {
    let home = tempfile::tempdir().unwrap();
    let repo = crate::support::git_repo(home.path());
    let mut child = std::process::Command::new(crate::support::KRAD)
        .args(["serve", "--json"])
        .current_dir(&repo)
        .env_remove("KRAD_ADE_API_JSON")
        .env_remove("XDG_RUNTIME_DIR")
        .env("HOME", home.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let serving: Value = serde_json::from_str(&line).unwrap();
    let expected = home.path().join(".krad-ade").join("api.json");
    assert_eq!(serving["Serving"]["api_json"], json!(expected));
    assert!(expected.exists());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        Signal::SIGTERM,
    )
    .unwrap();
    child.wait().unwrap();
    assert!(!expected.exists());
}
