//! The app's handlers called in-process, with a terminal host of the test's
//! own: what needs a host that misbehaves on cue (a start that hangs until the
//! test lets it go) or time that the test moves (`tokio::time::pause`), which
//! the real binary cannot show. Everything else is tested through the real
//! `krad` binary (tests/suite).

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use krad_app::config::Config;
use krad_app::{EmbeddedApp, Settings};
use krad_bus::protocol::EncodedAnswer;
use krad_bus::protocol::{AgentRecord, AgentState, Waited};
use krad_bus::request::check::Check;
use krad_bus::request::list::List;
use krad_bus::request::spawn::Spawn;
use krad_bus::request::wait::{Wait, WaitFor};
use krad_bus::server::{self, Bus, CallContext, Handle, HandleEncoded, ServerConfig};
use krad_bus::token::{Principal, Secret};
use krad_term::{
    ExitStatus, Snapshot, SpawnError, SpawnSpec, Terminal, TerminalEvent, TerminalHost,
};
use tokio::sync::{mpsc, oneshot};

/// How long a held start waits for the test before it gives up by itself.
const HELD_AT_MOST: Duration = Duration::from_secs(20);

/// A terminal host whose starts the test can hold: each start says it began,
/// then waits until the test lets it go (or gives up after [`HELD_AT_MOST`]).
#[derive(Default)]
struct HeldHost {
    hold: AtomicBool,
    began: Mutex<Option<std::sync::mpsc::Sender<()>>>,
    go: Mutex<Option<std::sync::mpsc::Receiver<()>>>,
    gave_up: AtomicBool,
    /// The token file of the last terminal started.
    token_file: Mutex<Option<String>>,
}

impl HeldHost {
    /// Holds the next start; returns (it began, let it go).
    fn hold_next(&self) -> (std::sync::mpsc::Receiver<()>, std::sync::mpsc::Sender<()>) {
        let (began_tx, began) = std::sync::mpsc::channel();
        let (go, go_rx) = std::sync::mpsc::channel();
        *self.began.lock().unwrap() = Some(began_tx);
        *self.go.lock().unwrap() = Some(go_rx);
        self.hold.store(true, Ordering::SeqCst);
        (began, go)
    }
}

impl TerminalHost for HeldHost {
    fn spawn(
        &self,
        spec: SpawnSpec,
        events: mpsc::Sender<TerminalEvent>,
    ) -> Result<Arc<dyn Terminal>, SpawnError> {
        let token_file = spec.env.iter().find(|(k, _)| k == "KRAD_ADE_TOKEN_FILE");
        *self.token_file.lock().unwrap() = token_file.map(|(_, v)| v.clone());
        if self.hold.swap(false, Ordering::SeqCst) {
            if let Some(began) = self.began.lock().unwrap().take() {
                let _ = began.send(());
            }
            let go = self.go.lock().unwrap().take();
            if let Some(go) = go
                && go.recv_timeout(HELD_AT_MOST).is_err()
            {
                self.gave_up.store(true, Ordering::SeqCst);
                return Err(SpawnError::Host("held too long".into()));
            }
        }
        Ok(Arc::new(QuietTerminal {
            id: spec.id,
            size: (spec.cols, spec.rows),
            events,
            exit: Mutex::new(None),
        }))
    }

    fn restart_safe(&self) -> bool {
        false
    }
}

/// A terminal whose program prints nothing and runs until closed.
struct QuietTerminal {
    id: u64,
    size: (u16, u16),
    events: mpsc::Sender<TerminalEvent>,
    exit: Mutex<Option<ExitStatus>>,
}

impl Terminal for QuietTerminal {
    fn id(&self) -> u64 {
        self.id
    }

    fn pid(&self) -> Option<u32> {
        None
    }

    fn write(&self, _bytes: Vec<u8>) -> oneshot::Receiver<std::io::Result<()>> {
        let (done, written) = oneshot::channel();
        let _ = done.send(Ok(()));
        written
    }

    fn resize(&self, _cols: u16, _rows: u16) -> std::io::Result<()> {
        Ok(())
    }

    fn snapshot(&self, _scrollback_lines: usize) -> Snapshot {
        Snapshot::blank(self.size)
    }

    fn bracketed_paste(&self) -> bool {
        false
    }

    fn close(&self, _grace: Duration) {
        let status = ExitStatus {
            code: None,
            signal: Some(1),
        };
        *self.exit.lock().unwrap() = Some(status);
        let _ = self.events.try_send(TerminalEvent::Exited(status));
    }

    fn exit_status(&self) -> Option<ExitStatus> {
        *self.exit.lock().unwrap()
    }
}

/// An app over a fresh git repository, with `host`.
struct Fixture {
    app: Arc<EmbeddedApp>,
    _dir: tempfile::TempDir,
}

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t.invalid"])
        .args(args)
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

async fn fixture(host: Arc<HeldHost>) -> Fixture {
    fixture_with(host, Arc::new(Secret::generate().unwrap())).await
}

async fn fixture_with(host: Arc<HeldHost>, secret: Arc<Secret>) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    std::fs::create_dir_all(&root).unwrap();
    git(&root, &["init", "-q", "-b", "main"]);
    git(&root, &["commit", "-q", "--allow-empty", "-m", "first"]);
    let settings = Settings {
        root: root.clone(),
        state_dir: dir.path().join("state"),
        token_dir: dir.path().join("tokens"),
        krad: std::path::PathBuf::from("/bin/true"),
        endpoint: "127.0.0.1:9".parse().unwrap(),
        config: Config::parse("").unwrap(),
    };
    let app = EmbeddedApp::new(settings, host, secret).unwrap();
    app.restore().await;
    Fixture {
        app: Arc::new(app),
        _dir: dir,
    }
}

fn client() -> CallContext {
    CallContext {
        principal: Principal::Client,
        request_id: None,
        once: None,
    }
}

fn spawn_request() -> Spawn {
    Spawn {
        command: Some(vec!["quiet".into()]),
        ..Spawn::default()
    }
}

/// The answer a List or Check gives (as the bytes it sends), as records.
fn decoded<T: serde::de::DeserializeOwned>(answer: &EncodedAnswer, name: &str) -> T {
    let mut value: serde_json::Value = serde_json::from_slice(answer.as_bytes()).unwrap();
    serde_json::from_value(value[name].take()).unwrap()
}

async fn list(app: &EmbeddedApp) -> Vec<AgentRecord> {
    let answer = HandleEncoded::<List>::handle_encoded(app, &client(), List::default())
        .await
        .unwrap();
    decoded(&answer, "Agents")
}

async fn check(app: &EmbeddedApp, target: u64, wait_secs: Option<u64>) -> AgentRecord {
    let check = Check {
        target,
        wait_secs,
        since_rev: None,
    };
    let answer = HandleEncoded::<Check>::handle_encoded(app, &client(), check)
        .await
        .unwrap();
    decoded(&answer, "Agent")
}

/// Waits (in the runtime, without holding it) for a std channel.
/// A Client's Spawn whose start `host` holds, once the start has begun: its
/// task, and what lets the start go on.
async fn held_spawn(
    fixture: &Fixture,
    host: &HeldHost,
) -> (
    tokio::task::JoinHandle<Result<AgentRecord, krad_bus::protocol::ApiError>>,
    std::sync::mpsc::Sender<()>,
) {
    let (began_rx, go) = host.hold_next();
    let app = fixture.app.clone();
    let spawning =
        tokio::spawn(
            async move { Handle::<Spawn>::handle(&*app, &client(), spawn_request()).await },
        );
    began(began_rx).await;
    (spawning, go)
}

async fn began(began: std::sync::mpsc::Receiver<()>) {
    tokio::task::spawn_blocking(move || began.recv_timeout(Duration::from_secs(60)))
        .await
        .unwrap()
        .expect("the start never began");
}

/// A terminal host may take its time to start a program (the tmux host waits
/// for tmux): on a runtime of a single thread, other requests are answered
/// meanwhile — the start never holds the thread.
#[tokio::test(flavor = "current_thread")]
async fn a_start_held_by_the_terminal_host_blocks_no_other_request() {
    let host = Arc::new(HeldHost::default());
    let fixture = fixture(host.clone()).await;
    let (spawning, go) = held_spawn(&fixture, &host).await;
    // The start is held: List is answered all the same, before it gives up.
    assert!(list(&fixture.app).await.is_empty());
    assert!(
        !host.gave_up.load(Ordering::SeqCst),
        "List was answered only once the held start gave up"
    );
    go.send(()).unwrap();
    let record = spawning.await.unwrap().unwrap();
    assert_eq!(record.state, AgentState::Starting);
    assert_eq!(list(&fixture.app).await.len(), 1);
}

/// A caller that leaves while its terminal starts leaves no orphan: the
/// terminal is recorded (and closable) all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_whose_caller_left_still_records_its_terminal() {
    let host = Arc::new(HeldHost::default());
    let fixture = fixture(host.clone()).await;
    let (spawning, go) = held_spawn(&fixture, &host).await;
    spawning.abort();
    assert!(spawning.await.unwrap_err().is_cancelled());
    go.send(()).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let agents = list(&fixture.app).await;
        if let [agent] = agents.as_slice() {
            assert_eq!(agent.command, ["quiet"]);
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the terminal started for a caller that left was never recorded"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The most a Wait handler's future may take (it is held by every waiting
/// connection, up to 30 minutes, 10,000 at a time in the benchmark): 392
/// bytes in the test build on 2026-12-07, 848 with a group's wait inline.
const HELD_WAIT_BYTES: usize = 512;

/// Wait and Check with long timeouts answer when their time is up, in the
/// runtime's (paused) time: `TimedOut`, and the unchanged record. (The Wait is
/// for the exit of a program that never ends; the Check comes after it, when
/// the quiet program's state has long settled.)
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn waits_end_at_their_timeouts() {
    let fixture = fixture(Arc::new(HeldHost::default())).await;
    let record = Handle::<Spawn>::handle(&*fixture.app, &client(), spawn_request())
        .await
        .unwrap();
    let id = record.terminal;

    let started = tokio::time::Instant::now();
    let caller = client();
    let waiting = Handle::<Wait>::handle(
        &*fixture.app,
        &caller,
        Wait {
            target: Some(id),
            for_: Some(WaitFor::Exit),
            timeout_secs: Some(1800),
            ..Wait::default()
        },
    );
    // What every held Wait keeps for as long as it waits: its watches, its
    // condition and deadline — not room for the other ways a Wait can go (a
    // group's wait inline made every held Wait larger: docs/PERFORMANCE.md).
    let held = std::mem::size_of_val(&waiting);
    assert!(
        held <= HELD_WAIT_BYTES,
        "a held Wait's future: {held} bytes"
    );
    let waited = waiting.await.unwrap();
    let took = started.elapsed();
    assert_eq!(waited, Waited::TimedOut);
    assert!(
        (Duration::from_secs(1800)..Duration::from_secs(1801)).contains(&took),
        "Wait of 1800 s answered after {took:?}"
    );

    let now = check(&fixture.app, id, None).await;
    let started = tokio::time::Instant::now();
    let checked = check(&fixture.app, id, Some(600)).await;
    let took = started.elapsed();
    assert_eq!(checked.rev, now.rev, "nothing changed");
    assert!(
        (Duration::from_secs(600)..Duration::from_secs(601)).contains(&took),
        "Check of 600 s answered after {took:?}"
    );
}

/// A program may call the bus in its very first instant (Claude Code's
/// SessionStart hook does), before the app has recorded its terminal: the
/// request waits for the record and is answered — never `unauthorized`.
#[test]
fn a_terminal_calling_before_it_is_recorded_is_answered_once_it_is() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let host = Arc::new(HeldHost::default());
    let secret = Arc::new(Secret::generate().unwrap());
    let fixture = runtime.block_on(fixture_with(host.clone(), secret.clone()));
    let bus = Arc::new(Bus::new(secret, ServerConfig::default()));
    let listener = runtime.block_on(server::bind(0)).unwrap();
    let endpoint = listener.local_addr().unwrap();
    runtime.spawn(server::serve(listener, bus, fixture.app.clone()));

    let (began_rx, go) = host.hold_next();
    let app = fixture.app.clone();
    let spawning = runtime
        .spawn(async move { Handle::<Spawn>::handle(&*app, &client(), spawn_request()).await });
    began_rx.recv_timeout(Duration::from_secs(60)).unwrap();
    // The program's token is out; its terminal is not recorded yet.
    let token_file = host.token_file.lock().unwrap().clone().unwrap();
    let token = std::fs::read_to_string(token_file).unwrap();
    let envelope = serde_json::json!({
        "api_version": 1,
        "from": {"Terminal": {"environment": "main", "terminal": 1}},
        "token": token.trim(),
        "request": {"Report": {"state": "working"}},
    });
    let mut stream = TcpStream::connect(endpoint).unwrap();
    let mut line = serde_json::to_vec(&envelope).unwrap();
    line.push(b'\n');
    stream.write_all(&line).unwrap();
    // While the start is held there is no answer (an `unauthorized` would
    // come at once)...
    stream
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut byte = [0u8; 1];
    let early = loop {
        match stream.read(&mut byte) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => break other,
        }
    };
    match early {
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) => {}
        other => {
            let mut rest = String::new();
            let _ = stream.read_to_string(&mut rest);
            panic!(
                "answered before the terminal was recorded: {other:?} {}{rest}",
                String::from_utf8_lossy(&byte)
            );
        }
    }
    // ...and once the terminal is recorded, the Report is taken.
    go.send(()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert_eq!(answer.trim_end(), "\"Ok\"", "the early Report");
    let record = runtime.block_on(spawning).unwrap().unwrap();
    assert_eq!(record.terminal, 1);
    let agents = runtime.block_on(list(&fixture.app));
    assert_eq!(agents[0].state, AgentState::Working);
}
