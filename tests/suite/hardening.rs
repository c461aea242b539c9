//! Hardening: the app under bad input and under pressure — malformed lines, slow
//! and vanishing clients, a tiny open-file limit, agents killed by signals, and
//! the app itself killed with SIGKILL. After each, the app still answers and
//! nothing it recorded is lost. (docs/RELIABILITY.md tells what was tried.)

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{App, KRAD, Launch, code, git_repo, read_all};

/// Polls `f` every 20 ms until it is true (at most `limit`).
fn eventually(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let until = Instant::now() + limit;
    while !f() {
        assert!(Instant::now() < until, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn hello_ok(app: &App) -> bool {
    app.request(json!("Hello"))["Hello"]["api_version"] == 1
}

/// Makes sure this process may open `n` files (sockets), raising its own soft
/// limit with `prlimit` when it is lower.
pub(crate) fn allow_open_files(n: u64) {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
    let soft: u64 = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse().ok())
        .unwrap_or(u64::MAX);
    if soft < n {
        let status = Command::new("prlimit")
            .arg(format!("--pid={}", std::process::id()))
            .arg(format!("--nofile={n}:"))
            .status()
            .unwrap();
        assert!(status.success(), "cannot raise the open-file limit to {n}");
    }
}

#[test]
fn forty_malformed_inputs_get_their_expected_errors_and_the_app_goes_on() {
    let app = App::start();
    let t = app.token();
    let mut deep = String::new();
    for _ in 0..200 {
        deep.push('[');
    }
    // (bytes sent, the expected error code, a word its message must hold)
    let ok_line = |request: &str| {
        format!(r#"{{"api_version":1,"token":"{t}","from":"Client","request":{request}}}"#)
    };
    let cases: Vec<(Vec<u8>, &str, &str)> = vec![
        // Step 1: the line.
        (b"\n".to_vec(), "bad_request", "JSON"),
        (b"\r\n".to_vec(), "bad_request", "JSON"),
        (b"   \n".to_vec(), "bad_request", "JSON"),
        (b"null\n".to_vec(), "bad_request", "object"),
        (b"42\n".to_vec(), "bad_request", "object"),
        (b"true\n".to_vec(), "bad_request", "object"),
        (b"\"Hello\"\n".to_vec(), "bad_request", "object"),
        (b"[]\n".to_vec(), "bad_request", "object"),
        (b"{\n".to_vec(), "bad_request", "JSON"),
        (b"}\n".to_vec(), "bad_request", "JSON"),
        (b"{}\n".to_vec(), "bad_request", "token"),
        (b"\x00\x01\x02\xff\xfe\n".to_vec(), "bad_request", "JSON"),
        (b"\xef\xbb\xbf{}\n".to_vec(), "bad_request", "JSON"),
        (format!("{deep}\n").into_bytes(), "bad_request", "JSON"),
        (format!("{} x\n", ok_line("\"Hello\"")).into_bytes(), "bad_request", "JSON"),
        (format!("{}{}\n", ok_line("\"Hello\""), ok_line("\"Hello\"")).into_bytes(), "bad_request", "JSON"),
        (format!(r#"{{"token":"{t}\ud800","from":"Client","request":"Hello"}}"#).into_bytes().into_iter().chain(*b"\n").collect(), "bad_request", "JSON"),
        (format!(r#"{{"token":"{t}","from":"Client","request":"Hel"#).into_bytes().into_iter().chain([0xc3, b'\n']).collect(), "bad_request", "JSON"),
        (format!(r#"{{"api_version":"1","token":"{t}","from":"Client","request":"Hello"}}"#).into_bytes().into_iter().chain(*b"\n").collect(), "bad_request", "api_version"),
        (format!(r#"{{"api_version":1.5,"token":"{t}","from":"Client","request":"Hello"}}"#).into_bytes().into_iter().chain(*b"\n").collect(), "bad_request", "api_version"),
        (format!(r#"{{"api_version":18446744073709551616,"token":"{t}","from":"Client","request":"Hello"}}"#).into_bytes().into_iter().chain(*b"\n").collect(), "bad_request", "api_version"),
        (format!(r#"{{"api_version":1e400,"token":"{t}","from":"Client","request":"Hello"}}"#).into_bytes().into_iter().chain(*b"\n").collect(), "bad_request", "JSON"),
        (b"{\"token\":null,\"from\":\"Client\",\"request\":\"Hello\"}\n".to_vec(), "bad_request", "token"),
        (b"{\"token\":[\"x\"],\"from\":\"Client\",\"request\":\"Hello\"}\n".to_vec(), "bad_request", "token"),
        (format!(r#"{{"token":"{t}","from":"Server","request":"Hello"}}"#).into_bytes().into_iter().chain(*b"\n").collect(), "bad_request", "from"),
        (format!(r#"{{"token":"{t}","from":{{}},"request":"Hello"}}"#).into_bytes().into_iter().chain(*b"\n").collect(), "bad_request", "from"),
        (format!(r#"{{"token":"{t}","from":{{"Terminal":{{"environment":"","terminal":1}}}},"request":"Hello"}}"#).into_bytes().into_iter().chain(*b"\n").collect(), "bad_request", "from"),
        (format!(r#"{{"token":"{t}","from":{{"Terminal":{{"environment":"main","terminal":"1"}}}},"request":"Hello"}}"#).into_bytes().into_iter().chain(*b"\n").collect(), "bad_request", "from"),
        (format!(r#"{{"token":"{t}","from":{{"Terminal":{{"environment":"main","terminal":1}},"Client":1}},"request":"Hello"}}"#).into_bytes().into_iter().chain(*b"\n").collect(), "bad_request", "from"),
        (format!(r#"{{"token":"{t}","from":"Client","request":null}}"#).into_bytes().into_iter().chain(*b"\n").collect(), "bad_request", "request"),
        (format!(r#"{{"token":"{t}","from":"Client","request":["Hello"]}}"#).into_bytes().into_iter().chain(*b"\n").collect(), "bad_request", "request"),
        (format!(r#"{{"token":"{t}","from":"Client","request":"Hello","request_id":7}}"#).into_bytes().into_iter().chain(*b"\n").collect(), "bad_request", "request_id"),
        (format!(r#"{{"token":"{t}","from":"Client","request":"Hello","request_id":"tab\there"}}"#).into_bytes().into_iter().chain(*b"\n").collect(), "bad_request", "request_id"),
        (format!(r#"{{"token":"{t}","from":"Client","request":"Hello","request_id":"é"}}"#).into_bytes().into_iter().chain(*b"\n").collect(), "bad_request", "request_id"),
        // Step 2: the token.
        (b"{\"token\":\"\",\"from\":\"Client\",\"request\":\"Hello\"}\n".to_vec(), "unauthorized", "token"),
        (format!(r#"{{"token":"{}","from":"Client","request":"Hello"}}"#, t.to_uppercase()).into_bytes().into_iter().chain(*b"\n").collect(), "unauthorized", "token"),
        (format!(r#"{{"token":"{t}","from":{{"Terminal":{{"environment":"main","terminal":1}}}},"request":"Hello"}}"#).into_bytes().into_iter().chain(*b"\n").collect(), "unauthorized", "token"),
        (format!(r#"{{"api_version":2,"token":"{}","from":"Client","request":"Hello"}}"#, "0".repeat(32)).into_bytes().into_iter().chain(*b"\n").collect(), "unauthorized", "token"),
        // Step 3: the version.
        (format!(r#"{{"api_version":2,"token":"{t}","from":"Client","request":"NoSuchThing"}}"#).into_bytes().into_iter().chain(*b"\n").collect(), "unsupported_api_version", "v2"),
        (format!(r#"{{"api_version":-1,"token":"{t}","from":"Client","request":"Hello"}}"#).into_bytes().into_iter().chain(*b"\n").collect(), "unsupported_api_version", "v-1"),
        (format!(r#"{{"api_version":0,"token":"{t}","from":"Client","request":"Hello"}}"#).into_bytes().into_iter().chain(*b"\n").collect(), "unsupported_api_version", "v0"),
        // Step 4: the request.
        (format!("{}\n", ok_line("\"Frobnicate\"")).into_bytes(), "unknown_request", "Frobnicate"),
        (format!("{}\n", ok_line("\"hello\"")).into_bytes(), "unknown_request", "hello"),
        (format!("{}\n", ok_line(r#"{"Wait":{}}"#)).into_bytes(), "bad_request", "Wait"),
        (format!("{}\n", ok_line(r#"{"Wait":{"target":"four"}}"#)).into_bytes(), "bad_request", "target"),
        (format!("{}\n", ok_line(r#"{"Wait":{"target":-4}}"#)).into_bytes(), "bad_request", "target"),
        (format!("{}\n", ok_line(r#"{"Wait":{"target":4,"timeout_secs":1801}}"#)).into_bytes(), "invalid", "timeout_secs"),
        (format!("{}\n", ok_line(r#"{"Wait":{"target":4,"until":"most"}}"#)).into_bytes(), "bad_request", "until"),
        (format!("{}\n", ok_line(r#"{"Check":{"target":4,"wait_secs":5000}}"#)).into_bytes(), "invalid", "wait_secs"),
        (format!("{}\n", ok_line(r#"{"Output":{"target":1,"lines":10001}}"#)).into_bytes(), "invalid", "lines"),
        (format!("{}\n", ok_line(r#"{"Spawn":{"cols":"wide"}}"#)).into_bytes(), "bad_request", "cols"),
        (format!("{}\n", ok_line(r#"{"Spawn":{"cols":70000}}"#)).into_bytes(), "bad_request", "cols"),
        (format!("{}\n", ok_line(r#"{"Spawn":{"rows":0}}"#)).into_bytes(), "invalid", "rows"),
        (format!("{}\n", ok_line(r#"{"Spawn":{"profile":"exec","command":[]}}"#)).into_bytes(), "invalid", "command"),
        (format!("{}\n", ok_line(r#"{"Spawn":{"env":{"KRAD_ADE_TOKEN":"x"}}}"#)).into_bytes(), "invalid", "env"),
        (format!("{}\n", ok_line(&format!(r#"{{"Send":{{"target":1,"text":"{}"}}}}"#, "x".repeat(40_000)))).into_bytes(), "invalid", "text"),
        (format!("{}\n", ok_line(r#"{"Report":{"state":"idle"}}"#)).into_bytes(), "forbidden", "Report"),
        (format!("{}\n", ok_line(r#"{"Close":{"target":4040}}"#)).into_bytes(), "not_found", "4040"),
        (format!("{}\n", ok_line(r#"{"Check":{"target":4040}}"#)).into_bytes(), "not_found", "4040"),
        (format!("{}\n", ok_line(r#"{"List":{"environment":"nope"}}"#)).into_bytes(), "not_found", "nope"),
    ];
    assert!(cases.len() >= 40, "{} cases", cases.len());
    for (bytes, want, word) in &cases {
        let answer = app.send_raw(bytes);
        let shown = String::from_utf8_lossy(&bytes[..bytes.len().min(160)]).into_owned();
        let value: Value = serde_json::from_str(answer.trim_end())
            .unwrap_or_else(|e| panic!("{shown:?} → {answer:?}: {e}"));
        assert_eq!(code(&value), *want, "{shown:?} → {value}");
        let message = value["Error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(word),
            "{shown:?} → {message:?} does not mention {word:?}"
        );
        assert!(!message.contains(t), "the token was echoed for {shown:?}");
        assert_eq!(answer.matches('\n').count(), 1, "one line for {shown:?}");
    }
    // The app took all of it in its stride, and counted every answer.
    assert!(hello_ok(&app));
    let stats = app.request(json!("Stats"))["Stats"].clone();
    assert!(
        stats["requests_total"].as_u64().unwrap() > cases.len() as u64,
        "{stats}"
    );
    assert!(
        stats["errors_by_code"]["bad_request"].as_u64().unwrap() >= 30,
        "{stats}"
    );
}

#[test]
fn a_thousand_slow_connections_are_timed_out_while_others_are_served() {
    allow_open_files(4096);
    let app = App::start_with(&["--line-timeout-ms", "6000"]);
    let line = {
        let mut l = serde_json::to_vec(&app.envelope(json!("Hello"))).unwrap();
        l.push(b'\n');
        l
    };
    // 1,000 connections that each send a few bytes of a line, then nothing more.
    let opening = Instant::now();
    let mut slow: Vec<TcpStream> = (0..1000)
        .map(|i| {
            let mut s = app.connect();
            s.write_all(&line[..1 + i % 20]).unwrap();
            s
        })
        .collect();
    // All open at once — unless a loaded machine took so long to open them that
    // the first ones already reached their line timeout.
    if opening.elapsed() < Duration::from_secs(2) {
        eventually(
            Duration::from_secs(3),
            "1,000 slow connections open",
            || {
                app.request(json!("Stats"))["Stats"]["connections_open"]
                    .as_u64()
                    .unwrap()
                    >= 1000
            },
        );
    }
    // Meanwhile everyone else is served at once.
    for _ in 0..20 {
        let started = Instant::now();
        assert!(hello_ok(&app));
        assert!(started.elapsed() < Duration::from_secs(5));
    }
    // Each slow one gets its bad_request when its time is up, and is closed.
    for (i, s) in slow.iter_mut().enumerate() {
        s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        let answer: Value = serde_json::from_str(read_all(s).trim_end())
            .unwrap_or_else(|e| panic!("slow connection {i}: {e}"));
        assert_eq!(code(&answer), "bad_request", "{answer}");
        assert!(
            answer["Error"]["message"]
                .as_str()
                .unwrap()
                .contains("within")
        );
    }
    drop(slow);
    eventually(
        Duration::from_secs(10),
        "the slow connections closed",
        || app.request(json!("Stats"))["Stats"]["connections_open"] == 1,
    );
    assert!(hello_ok(&app));
}

/// An app started under `prlimit --nofile=N`.
struct Limited {
    child: Child,
    endpoint: SocketAddr,
    token: String,
    _dir: tempfile::TempDir,
}

impl Limited {
    fn start(nofile: u32) -> Limited {
        let dir = tempfile::tempdir().unwrap();
        let repo = git_repo(dir.path());
        let api_json = dir.path().join("run").join("api.json");
        let mut child = Command::new("prlimit")
            .arg(format!("--nofile={nofile}:{nofile}"))
            .arg(KRAD)
            .args(["serve", "--json"])
            .current_dir(&repo)
            .env("KRAD_ADE_API_JSON", &api_json)
            .env("RUST_LOG", "error")
            .env_remove("KRAD_ADE_ENDPOINT")
            .env_remove("KRAD_CONFIG")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let first = crate::support::first_line(&mut child);
        let serving: Value = serde_json::from_str(&first).unwrap();
        let endpoint = serving["Serving"]["endpoint"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let written: Value = serde_json::from_slice(&std::fs::read(&api_json).unwrap()).unwrap();
        Limited {
            child,
            endpoint,
            token: written["token"].as_str().unwrap().to_owned(),
            _dir: dir,
        }
    }

    fn request(&self, request: Value) -> Value {
        let mut stream = TcpStream::connect(self.endpoint).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut line =
            serde_json::to_vec(&json!({"token": self.token, "from": "Client", "request": request}))
                .unwrap();
        line.push(b'\n');
        stream.write_all(&line).unwrap();
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        serde_json::from_str(answer.trim_end()).unwrap_or(Value::Null)
    }
}

impl Drop for Limited {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn out_of_file_descriptors_the_app_answers_busy_and_recovers() {
    let app = Limited::start(64);
    assert_eq!(app.request(json!("Hello"))["Hello"]["api_version"], 1);
    // Hold far more idle connections than the app has descriptors for.
    let held: Vec<TcpStream> = (0..120)
        .map(|_| TcpStream::connect(app.endpoint).unwrap())
        .collect();
    // New requests are refused with busy, at once — not left hanging, no crash.
    let started = Instant::now();
    let mut busy = 0;
    for _ in 0..5 {
        let answer = app.request(json!("Hello"));
        if code(&answer) == "busy" {
            assert_eq!(answer["Error"]["retryable"], true, "{answer}");
            busy += 1;
        }
    }
    assert!(busy > 0, "no busy while out of descriptors");
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(app.child.id() > 0);
    drop(held);
    // Once the pressure is gone, it serves again — the same process.
    let until = Instant::now() + Duration::from_secs(15);
    loop {
        let answer = app.request(json!("Hello"));
        if answer["Hello"]["api_version"] == 1 {
            break;
        }
        assert!(Instant::now() < until, "never recovered: {answer}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let stats = app.request(json!("Stats"));
    assert!(
        stats["Stats"]["errors_by_code"]["busy"].as_u64().unwrap() >= 1,
        "{stats}"
    );
    let mut child = app;
    assert!(child.child.try_wait().unwrap().is_none(), "the app exited");
}

#[test]
fn agents_killed_by_signals_are_recorded_and_the_app_goes_on() {
    use nix::sys::signal::{Signal, kill, killpg};
    use nix::unistd::Pid;
    let app = App::start();
    let cases = [
        (Signal::SIGKILL, 9),
        (Signal::SIGTERM, 15),
        (Signal::SIGINT, 2),
        (Signal::SIGUSR1, 10),
    ];
    let mut ids = Vec::new();
    for _ in cases {
        let record = app.spawn(json!({"profile": "exec", "command": ["sleep", "60"]}));
        ids.push((
            record["terminal"].as_u64().unwrap(),
            record["pid"].as_u64().unwrap(),
        ));
    }
    // A whole process group killed at once, the agent's children included.
    let group =
        app.spawn(json!({"profile": "exec", "command": ["sh", "-c", "sleep 60 & sleep 60; wait"]}));
    let group_id = group["terminal"].as_u64().unwrap();
    for (&(_, pid), (signal, _)) in ids.iter().zip(cases) {
        kill(Pid::from_raw(pid as i32), signal).unwrap();
    }
    killpg(
        Pid::from_raw(group["pid"].as_u64().unwrap() as i32),
        Signal::SIGKILL,
    )
    .unwrap();
    for (&(id, _), (_, number)) in ids.iter().zip(cases) {
        let answer =
            app.request(json!({"Wait": {"target": id, "for": "exit", "timeout_secs": 20}}));
        assert_eq!(answer["Agent"]["state"], "exited", "{answer}");
        assert_eq!(answer["Agent"]["signal"], number, "{answer}");
        assert_eq!(answer["Agent"]["exit_code"], Value::Null, "{answer}");
    }
    let answer =
        app.request(json!({"Wait": {"target": group_id, "for": "exit", "timeout_secs": 20}}));
    assert_eq!(answer["Agent"]["signal"], 9, "{answer}");
    // Still serving, still spawning, and List remembers every one of them.
    assert!(hello_ok(&app));
    let id = app.spawn_sh("exit 3");
    let answer = app.request(json!({"Wait": {"target": id, "for": "exit", "timeout_secs": 20}}));
    assert_eq!(answer["Agent"]["exit_code"], 3);
    let listed = app.request(json!("List"))["Agents"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(listed, cases.len() + 2);
}

#[test]
fn the_app_killed_with_sigkill_restarts_and_nothing_recorded_is_lost() {
    let mut app = App::start();
    let first = app.spawn_sh("echo before-the-kill; sleep 60");
    app.until_screen(first, "before-the-kill");
    // The transcript is written as the output is parsed; give it a moment.
    std::thread::sleep(Duration::from_millis(300));
    let second = app.spawn_sh("exit 7");
    app.until_state(second, "exited");
    let last_rev = app.record(second)["rev"].as_u64().unwrap();
    let pid = app.pid;
    app.signal(nix::sys::signal::Signal::SIGKILL);
    app.wait_exit(Duration::from_secs(10));
    // The stale api.json is still there; krad says so rather than hanging.
    assert!(app.api_json.exists());
    let out = app.krad(&["api"]);
    assert_eq!(crate::support::exit_code(&out), 7, "{out:?}");
    let dir = std::mem::replace(&mut app.dir, tempfile::tempdir().unwrap());
    drop(app);
    let app = App::launch(Launch {
        reuse: Some(dir),
        ..Launch::default()
    });
    assert_ne!(app.pid, pid);
    assert!(hello_ok(&app));
    // The global rev never goes back, terminal ids are never reused...
    let mut stream = app.connect();
    let mut line =
        serde_json::to_vec(&app.envelope(json!({"SubscribeAgents": {"since_rev": last_rev}})))
            .unwrap();
    line.push(b'\n');
    stream.write_all(&line).unwrap();
    let mut reader = BufReader::new(stream);
    let mut snapshot = String::new();
    reader.read_line(&mut snapshot).unwrap();
    let snapshot: Value = serde_json::from_str(&snapshot).unwrap();
    assert!(
        snapshot["Snapshot"]["rev"].as_u64().unwrap() > last_rev,
        "{snapshot}"
    );
    // ...a rev from before the restart cannot be resumed: the whole state, fresh.
    assert_eq!(snapshot["Snapshot"]["fresh"], true, "{snapshot}");
    let third = app.spawn_sh("sleep 60");
    assert!(third > second, "terminal id {third} reused (had {second})");
    assert!(app.record(third)["rev"].as_u64().unwrap() > last_rev);
    // ...and what the killed terminal printed is still in its transcript.
    let transcripts = app.dir.path().join("repo/.git/krad/transcripts");
    let transcript = std::fs::read_to_string(transcripts.join(format!("{first}.log"))).unwrap();
    assert!(transcript.contains("before-the-kill"), "{transcript:?}");
}

#[test]
fn subscribers_vanishing_mid_stream_cost_nothing_and_lose_nothing() {
    let app = App::start();
    let envelope = {
        let mut l = serde_json::to_vec(&app.envelope(json!({"SubscribeAgents": {}}))).unwrap();
        l.push(b'\n');
        l
    };
    let open = || {
        let mut s = app.connect();
        s.write_all(&envelope).unwrap();
        let mut reader = BufReader::new(s);
        let mut first = String::new();
        reader.read_line(&mut first).unwrap();
        assert!(first.starts_with("{\"Snapshot\""), "{first}");
        reader
    };
    // Twenty subscribers, each vanishing in its own way while changes stream.
    let mut subscribers: Vec<_> = (0..20).map(|_| open()).collect();
    let script = "i=0; while [ $i -lt 100 ]; do krad report working -m \"step $i\" >/dev/null; i=$((i+1)); done; krad report idle -m final; sleep 60";
    let ids: Vec<u64> = (0..3).map(|_| app.spawn_sh(script)).collect();
    for (i, reader) in subscribers.iter_mut().enumerate().take(10) {
        // Half read a little first: they vanish mid-message or between messages.
        for _ in 0..i {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
        }
    }
    for (i, reader) in subscribers.drain(..).enumerate() {
        let stream = reader.into_inner();
        if i % 2 == 0 {
            // Half only stop sending, then go.
            stream.shutdown(std::net::Shutdown::Write).unwrap();
        }
        drop(stream); // unread data: the kernel resets the connection
    }
    for &id in &ids {
        app.until(id, Duration::from_secs(60), |r| r["message"] == "final");
    }
    eventually(
        Duration::from_secs(20),
        "the vanished subscribers gone",
        || app.request(json!("Stats"))["Stats"]["subscribers"] == 0,
    );
    // A new subscriber sees every agent's final state: nothing was lost.
    let mut again = app.connect();
    again.write_all(&envelope).unwrap();
    let mut reader = BufReader::new(again);
    let mut snapshot = String::new();
    reader.read_line(&mut snapshot).unwrap();
    let snapshot: Value = serde_json::from_str(&snapshot).unwrap();
    let finals: Vec<&Value> = snapshot["Snapshot"]["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| &a["message"])
        .collect();
    assert_eq!(finals, vec![&json!("final"); ids.len()], "{snapshot}");
    assert!(hello_ok(&app));
    assert_eq!(app.request(json!("Stats"))["Stats"]["subscribers"], 1);
    drop(reader);
}

#[test]
fn a_killed_app_s_token_folder_is_removed_by_the_next_app() {
    let mut app = App::start();
    let id = app.spawn_sh("sleep 60");
    let pid = app.pid;
    let folder = app
        .api_json
        .parent()
        .unwrap()
        .join(format!("terminals-{pid}"));
    assert!(
        folder.join(format!("{id}.token")).exists(),
        "{}",
        folder.display()
    );
    app.signal(nix::sys::signal::Signal::SIGKILL);
    app.wait_exit(Duration::from_secs(10));
    assert!(folder.exists(), "a killed app cannot clean up");
    let dir = std::mem::replace(&mut app.dir, tempfile::tempdir().unwrap());
    drop(app);
    let app = App::launch(Launch {
        reuse: Some(dir),
        ..Launch::default()
    });
    assert!(
        !folder.exists(),
        "the next app removes what the dead one left"
    );
    let own = app
        .api_json
        .parent()
        .unwrap()
        .join(format!("terminals-{}", app.pid));
    assert!(own.is_dir(), "its own stays");
}

/// The app's store (`state.db`): a damaged one stops the start with what to
/// do, and is left as it was; the JSON state of an earlier krad is imported.
#[test]
fn a_damaged_store_is_refused_and_an_old_json_state_is_imported() {
    let app = App::launch(Launch::default());
    let id = app.spawn_sh("sleep 60");
    let dir = app.stop_keep_dir();
    let state_dir = dir.path().join("repo/.git/krad");
    let db = state_dir.join("state.db");
    assert!(db.exists());
    let serve = |dir: &std::path::Path| {
        Command::new(KRAD)
            .args(["serve", "--json"])
            .current_dir(dir.join("repo"))
            .env("KRAD_ADE_API_JSON", dir.join("run/api.json"))
            .envs(crate::support::private_home(dir))
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    for leftover in ["state.db-wal", "state.db-shm"] {
        let _ = std::fs::remove_file(state_dir.join(leftover));
    }
    std::fs::write(&db, b"not a database at all, and not to be lost").unwrap();
    let out = serve(dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("state.db is damaged"), "{stderr}");
    assert!(stderr.contains("Move it aside"), "{stderr}");
    assert_eq!(
        std::fs::read(&db).unwrap(),
        b"not a database at all, and not to be lost"
    );
    // Moved aside, with an earlier krad's JSON state beside it: imported.
    std::fs::rename(&db, state_dir.join("state.db.damaged")).unwrap();
    std::fs::write(
        state_dir.join("state.json"),
        r#"{"rev_reserved": 90000, "next_terminal": 500}"#,
    )
    .unwrap();
    let app = App::launch(Launch {
        reuse: Some(dir),
        ..Launch::default()
    });
    let next = app.spawn_sh("true");
    assert!(
        next >= 500 && next > id,
        "ids continue from the import: {next}"
    );
    let rev = app.record(next)["rev"].as_u64().unwrap();
    assert!(rev > 90_000, "revs continue from the import: {rev}");
    assert!(state_dir.join("state.json.imported").exists());
}

/// A Send under a request id cut by a crash while it writes (its program shows
/// nothing of the text, so Send waits for it before the Enter) is answered on
/// its retry — not sent again — and the answer says the text may have reached
/// the terminal.
#[test]
fn a_send_cut_by_a_crash_is_answered_on_its_retry_not_sent_again() {
    let mut app = App::launch(Launch::default());
    let id = app.spawn_sh("stty -echo; echo ready; sleep 600");
    app.until_screen(id, "ready");
    let mut envelope =
        app.envelope(json!({"Send": {"target": id, "text": "hello", "enter": true}}));
    envelope["request_id"] = json!("send-cut");
    let first = envelope.clone();
    let endpoint = app.endpoint;
    let sender = std::thread::spawn(move || {
        let mut stream = TcpStream::connect(endpoint).unwrap();
        let _ = stream.write_all(format!("{first}\n").as_bytes());
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
    });
    // The Send's intent is in the store: it is writing.
    let db = app.dir.path().join("repo/.git/krad/state.db");
    crate::support::wait_until(Duration::from_secs(20), || {
        rusqlite::Connection::open(&db)
            .and_then(|c| {
                c.query_row(
                    "SELECT count(*) FROM records WHERE kind = 'intent' AND value LIKE '%\"send\"%'",
                    [],
                    |row| row.get::<_, i64>(0),
                )
            })
            .is_ok_and(|n| n == 1)
    });
    app.signal(nix::sys::signal::Signal::SIGKILL);
    app.wait_exit(Duration::from_secs(10));
    sender.join().unwrap();
    let app = app.again(None);
    envelope["token"] = app.envelope(json!("List"))["token"].clone();
    let retried = app.call(&envelope);
    assert_eq!(code(&retried), "failed", "{retried}");
    let message = retried["Error"]["message"].as_str().unwrap();
    assert!(message.contains("may have reached it"), "{message}");
    assert!(message.contains("not sent again"), "{message}");
    assert_eq!(retried["Error"]["detail"]["terminal"], id);
    let again = app.call(&envelope);
    assert_eq!(again["Error"]["replayed"], true, "{again}");
}
