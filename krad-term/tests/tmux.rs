//! The tmux host with a real tmux server: terminals that outlive the host that
//! started them, and attachers on both hosts.

// The helpers outside `#[test]` functions fail tests the same way.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use krad_term::{
    AdoptSpec, ExitStatus, NativeAttach, PtyHost, Snapshot, SpawnSpec, Survivor, Terminal,
    TerminalEvent, TerminalHost, TmuxHost,
};
use tokio::sync::mpsc;

const TIMEOUT: Duration = Duration::from_secs(15);

/// A tmux server of the test's own, killed when the test ends.
struct Server {
    socket: String,
    dir: tempfile::TempDir,
}

impl Server {
    fn new() -> Server {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let socket = format!(
            "krad-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        );
        Server {
            socket,
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// A host on this server (a second one stands for a restarted app).
    fn host(&self) -> TmuxHost {
        TmuxHost::new(&self.socket, self.dir.path().join("tmux.conf")).unwrap()
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // kill-server, and SIGKILL for a server that does not go (tmux 3.3 can
        // wait forever for a control client that is gone).
        let pid = self
            .tmux(&["display-message", "-p", "#{pid}"])
            .trim()
            .parse::<i32>()
            .ok()
            .map(nix::unistd::Pid::from_raw);
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
        if let Some(pid) = pid {
            let until = Instant::now() + Duration::from_millis(300);
            while nix::sys::signal::kill(pid, None).is_ok() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        }
        // tmux leaves its socket file behind.
        let dir = std::env::var_os("TMUX_TMPDIR").unwrap_or_else(|| "/tmp".into());
        let _ = std::fs::remove_file(
            Path::new(&dir)
                .join(format!("tmux-{}", nix::unistd::getuid()))
                .join(&self.socket),
        );
    }
}

fn sh(id: u64, script: &str, cwd: &Path) -> SpawnSpec {
    SpawnSpec {
        id,
        argv: vec!["sh".into(), "-c".into(), script.into()],
        cwd: cwd.to_owned(),
        env: vec![("KRAD_TEST_VALUE".into(), "a $b #{c} 'd'".into())],
        env_remove: Vec::new(),
        cols: 100,
        rows: 30,
        transcript: None,
        scrollback_lines: 1000,
    }
}

fn start(
    host: &dyn TerminalHost,
    spec: SpawnSpec,
) -> (Arc<dyn Terminal>, mpsc::Receiver<TerminalEvent>) {
    let (events, receiver) = mpsc::channel(64);
    (host.spawn(spec, events).expect("spawn"), receiver)
}

async fn until_exit(events: &mut mpsc::Receiver<TerminalEvent>) -> ExitStatus {
    tokio::time::timeout(TIMEOUT, async {
        loop {
            match events.recv().await.expect("no Exited before the end") {
                TerminalEvent::Exited(status) => return status,
                _ => continue,
            }
        }
    })
    .await
    .expect("no Exited in time")
}

async fn until_screen(terminal: &dyn Terminal, text: &str) -> Snapshot {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let snapshot = terminal.snapshot(1000);
        if snapshot.screen.contains(text) {
            return snapshot;
        }
        assert!(
            Instant::now() < deadline,
            "{text:?} never showed: {snapshot:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn write(terminal: &dyn Terminal, bytes: &[u8]) {
    tokio::time::timeout(TIMEOUT, terminal.write(bytes.to_vec()))
        .await
        .expect("write in time")
        .expect("write answered")
        .expect("written");
}

#[tokio::test]
async fn a_terminal_runs_prints_reads_resizes_and_exits_with_its_code() {
    let server = Server::new();
    let dir = tempfile::tempdir().unwrap();
    let host = server.host();
    let (terminal, mut events) = start(
        &host,
        sh(
            1,
            "echo \"size $(stty size) value $KRAD_TEST_VALUE term $TERM\"; \
             while read -r x; do [ \"$x\" = end ] && exit 3; echo \"got $x size $(stty size)\"; done",
            dir.path(),
        ),
    );
    assert!(terminal.pid().is_some());
    until_screen(
        terminal.as_ref(),
        "size 30 100 value a $b #{c} 'd' term xterm-256color",
    )
    .await;
    terminal.resize(90, 20).unwrap();
    assert_eq!(terminal.snapshot(0).size, (90, 20));
    // tmux passes a resize on to the program shortly after (it spaces them out).
    let deadline = Instant::now() + TIMEOUT;
    while !terminal.snapshot(0).screen.contains("size 20 90") {
        assert!(Instant::now() < deadline, "{:#?}", terminal.snapshot(0));
        write(terminal.as_ref(), b"there\r").await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    until_screen(terminal.as_ref(), "got there size 20 90").await;
    write(terminal.as_ref(), b"end\r").await;
    assert_eq!(
        until_exit(&mut events).await,
        ExitStatus {
            code: Some(3),
            signal: None
        }
    );
    assert_eq!(terminal.exit_status().unwrap().code, Some(3));
    // The ended terminal's window goes.
    let deadline = Instant::now() + TIMEOUT;
    while !host.survivors().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "the ended window stayed");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(terminal.write(b"x".to_vec()).await.unwrap().is_err());
}

#[tokio::test]
async fn pastes_go_through_tmux_bracketed_only_when_the_program_asked() {
    let server = Server::new();
    let dir = tempfile::tempdir().unwrap();
    let host = server.host();
    let script = "stty raw -echo; printf 'ready\\r\\n'; head -c 15 | od -An -tx1 | tr -d ' \\n'; \
                  printf '\\r\\n'; printf '\\033[?2004hon\\r\\n'; head -c 15 | od -An -tx1 | tr -d ' \\n'; sleep 5";
    let (terminal, _events) = start(&host, sh(1, script, dir.path()));
    until_screen(terminal.as_ref(), "ready").await;
    // Without bracketed paste: the text, then the keys after it.
    write(terminal.as_ref(), b"\x1b[200~a\nb $c\x1b[201~\rxxxxxxxx").await;
    until_screen(terminal.as_ref(), "610a622024630d7878787878787878").await;
    until_screen(terminal.as_ref(), "on").await;
    write(terminal.as_ref(), b"\x1b[200~a\nb\x1b[201~\r").await;
    until_screen(terminal.as_ref(), "1b5b3230307e610a621b5b3230317e").await;
    terminal.close(Duration::from_secs(5));
}

#[tokio::test]
async fn a_new_host_takes_back_a_live_terminal_with_its_screen() {
    let server = Server::new();
    let dir = tempfile::tempdir().unwrap();
    let first = server.host();
    let (terminal, _events) = start(
        &first,
        sh(
            7,
            "printf '\\033[1mone\\033[0m\\ntwo\\n'; read -r x; echo \"got $x\"; exit 7",
            dir.path(),
        ),
    );
    until_screen(terminal.as_ref(), "two").await;
    let pid = terminal.pid();
    // The app goes away: its handles go, the program runs on.
    drop(terminal);
    drop(first);
    let second = server.host();
    assert_eq!(
        second.survivors().unwrap(),
        [Survivor { id: 7, alive: true }]
    );
    let (events, mut receiver) = mpsc::channel(64);
    let terminal = second
        .adopt(
            AdoptSpec {
                id: 7,
                transcript: None,
                scrollback_lines: 1000,
            },
            events,
        )
        .unwrap();
    assert_eq!(terminal.pid(), pid);
    let snapshot = terminal.snapshot(10);
    assert!(snapshot.screen.starts_with("one\ntwo"), "{snapshot:#?}");
    assert_eq!(snapshot.size, (100, 30));
    assert_eq!(snapshot.cursor, (2, 0));
    match terminal.native_attach() {
        Some(NativeAttach::Tmux {
            socket,
            session,
            window,
        }) => {
            assert_eq!(socket, server.socket);
            assert_eq!(session, "krad");
            assert_eq!(
                server.tmux(&["display-message", "-p", "-t", &window, "#{window_name}"]),
                "krad-7\n"
            );
        }
        other => panic!("{other:?}"),
    }
    write(terminal.as_ref(), b"x\r").await;
    until_screen(terminal.as_ref(), "got x").await;
    assert_eq!(until_exit(&mut receiver).await.code, Some(7));
}

#[tokio::test]
async fn a_terminal_that_died_while_away_is_taken_back_dead_with_its_status() {
    let server = Server::new();
    let dir = tempfile::tempdir().unwrap();
    let first = server.host();
    let (terminal, _events) = start(&first, sh(3, "echo last words; sleep 600", dir.path()));
    until_screen(terminal.as_ref(), "last words").await;
    let pid = terminal.pid().unwrap();
    drop(terminal);
    drop(first);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let second = server.host();
    let deadline = Instant::now() + TIMEOUT;
    while second.survivors().unwrap()
        != [Survivor {
            id: 3,
            alive: false,
        }]
    {
        assert!(Instant::now() < deadline, "{:?}", second.survivors());
        std::thread::sleep(Duration::from_millis(20));
    }
    let (events, mut receiver) = mpsc::channel(64);
    let terminal = second
        .adopt(
            AdoptSpec {
                id: 3,
                transcript: None,
                scrollback_lines: 1000,
            },
            events,
        )
        .unwrap();
    assert_eq!(
        until_exit(&mut receiver).await,
        ExitStatus {
            code: None,
            signal: Some(15)
        }
    );
    assert!(terminal.snapshot(0).screen.contains("last words"));
    // Once taken back and recorded, tmux forgets it.
    let deadline = Instant::now() + TIMEOUT;
    while !second.survivors().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "the dead pane stayed");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test]
async fn close_hangs_up_and_discard_ends_orphans() {
    let server = Server::new();
    let dir = tempfile::tempdir().unwrap();
    let host = server.host();
    let (terminal, mut events) = start(&host, sh(1, "sleep 600", dir.path()));
    // At once: the program may not have its own process group yet.
    terminal.close(Duration::from_secs(5));
    assert_eq!(until_exit(&mut events).await.signal, Some(1));
    let (orphan, _events) = start(&host, sh(2, "sleep 600", dir.path()));
    drop(orphan);
    assert_eq!(host.survivors().unwrap().len(), 1);
    host.discard(2);
    assert_eq!(host.survivors().unwrap(), []);
}

/// Both hosts: an attacher's screen redraws what was there, and the output that
/// follows is every byte after it.
#[tokio::test]
async fn attachers_get_the_screen_then_the_output_on_both_hosts() {
    let server = Server::new();
    let dir = tempfile::tempdir().unwrap();
    let tmux = server.host();
    let hosts: [&dyn TerminalHost; 2] = [&PtyHost::new(), &tmux];
    for host in hosts {
        let (terminal, _events) = start(
            host,
            sh(
                9,
                "printf '\\033[31mred\\033[0m plain'; read -r x; printf 'after %s' \"$x\"; sleep 600",
                dir.path(),
            ),
        );
        until_screen(terminal.as_ref(), "red plain").await;
        let mut attachment = terminal.attach().unwrap();
        assert_eq!(attachment.size, (100, 30));
        let size = |n| std::num::NonZeroU16::new(n).unwrap();
        let mut redraw = vt100::Parser::new(size(30), size(100), 0);
        redraw.process(&attachment.screen);
        assert_eq!(redraw.screen().contents(), "red plain");
        assert_eq!(redraw.screen().cursor_position(), (0, 9));
        assert_eq!(
            redraw.screen().cell(0, 0).unwrap().fgcolor(),
            vt100::Color::Idx(1)
        );
        write(terminal.as_ref(), b"now\r").await;
        let mut seen = Vec::new();
        while !String::from_utf8_lossy(&seen).contains("after now") {
            let chunk = tokio::time::timeout(TIMEOUT, attachment.output.recv())
                .await
                .unwrap()
                .unwrap();
            seen.extend_from_slice(&chunk);
        }
        redraw.process(&seen);
        assert!(redraw.screen().contents().contains("red plain"));
        terminal.close(Duration::from_secs(5));
    }
}

/// tmux 3.3 crashes when control clients attach while sessions are made, and
/// misses some exits when one is attached: many terminals at once must all run,
/// and all be seen ending, with their status.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_terminals_started_at_once_all_report_their_exit() {
    let server = Server::new();
    let dir = tempfile::tempdir().unwrap();
    let host = Arc::new(server.host());
    for round in 0..4u64 {
        let mut tasks = Vec::new();
        for i in 0..12u64 {
            let host = Arc::clone(&host);
            let cwd = dir.path().to_owned();
            tasks.push(tokio::task::spawn_blocking(move || {
                start(
                    host.as_ref(),
                    sh(round * 100 + i + 1, "echo hi; sleep 0.2; exit 7", &cwd),
                )
            }));
        }
        for task in tasks {
            let (_terminal, mut events) = task.await.unwrap();
            assert_eq!(until_exit(&mut events).await.code, Some(7));
        }
    }
}
