//! The pseudo-terminal host with real pseudo-terminals and real programs.

// The helpers outside `#[test]` functions fail tests the same way.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use krad_term::{
    ExitStatus, PtyHost, Snapshot, SpawnError, SpawnSpec, Terminal, TerminalEvent, TerminalHost,
};
use tokio::sync::mpsc;

const TIMEOUT: Duration = Duration::from_secs(15);

fn spec(argv: &[&str], cwd: &Path) -> SpawnSpec {
    SpawnSpec {
        id: 1,
        argv: argv.iter().map(|s| (*s).to_owned()).collect(),
        cwd: cwd.to_owned(),
        env: Vec::new(),
        env_remove: Vec::new(),
        cols: 80,
        rows: 24,
        transcript: None,
        scrollback_lines: 1000,
    }
}

fn sh(script: &str, cwd: &Path) -> SpawnSpec {
    spec(&["sh", "-c", script], cwd)
}

fn start(spec: SpawnSpec) -> (Arc<dyn Terminal>, mpsc::Receiver<TerminalEvent>) {
    start_with_room_for(64, spec)
}

/// Starts `spec` with an events channel of `capacity` (1: the app is behind).
fn start_with_room_for(
    capacity: usize,
    spec: SpawnSpec,
) -> (Arc<dyn Terminal>, mpsc::Receiver<TerminalEvent>) {
    let (events, receiver) = mpsc::channel(capacity);
    let terminal = PtyHost::new().spawn(spec, events).expect("spawn");
    (terminal, receiver)
}

/// Starts `script` in `dir` and waits until its screen reads `text`.
async fn showing(
    script: &str,
    dir: &Path,
    text: &str,
) -> (Arc<dyn Terminal>, mpsc::Receiver<TerminalEvent>) {
    let started = start(sh(script, dir));
    until_screen(&*started.0, |s| s.screen == text).await;
    started
}

/// Waits until process `pid` is gone (5 s at the most).
async fn until_dead(pid: i32) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !dead(pid) {
        assert!(Instant::now() < deadline, "process {pid} lives on");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The pid a test's program wrote to `pid` in `dir` — waited for: the file
/// may be there before the number is (the shell's `echo $! > pid` opens it
/// first).
async fn pid_written(dir: &Path) -> i32 {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let read = std::fs::read_to_string(dir.join("pid")).unwrap_or_default();
        if let Ok(pid) = read.trim().parse() {
            return pid;
        }
        assert!(Instant::now() < deadline, "the program never wrote the pid");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Reads events until `Exited`, which must be the last one; returns the ones before.
/// How the terminal's program ended (see [`until_exit`]).
async fn exit_of(events: &mut mpsc::Receiver<TerminalEvent>) -> ExitStatus {
    until_exit(events).await.1
}

async fn until_exit(
    events: &mut mpsc::Receiver<TerminalEvent>,
) -> (Vec<TerminalEvent>, ExitStatus) {
    let mut seen = Vec::new();
    let status = tokio::time::timeout(TIMEOUT, async {
        loop {
            match events
                .recv()
                .await
                .expect("the channel closed before Exited")
            {
                TerminalEvent::Exited(status) => return status,
                event => seen.push(event),
            }
        }
    })
    .await
    .expect("no Exited in time");
    // Nothing after Exited: the sender is gone and the channel is empty.
    assert_eq!(events.recv().await, None, "an event after Exited");
    (seen, status)
}

/// Polls the screen until `ok` holds.
async fn until_screen(terminal: &dyn Terminal, ok: impl Fn(&Snapshot) -> bool) -> Snapshot {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let snapshot = terminal.snapshot(1000);
        if ok(&snapshot) {
            return snapshot;
        }
        assert!(
            Instant::now() < deadline,
            "screen never matched: {snapshot:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn exited(code: i32) -> ExitStatus {
    ExitStatus {
        code: Some(code),
        signal: None,
    }
}

fn killed(signal: i32) -> ExitStatus {
    ExitStatus {
        code: None,
        signal: Some(signal),
    }
}

/// Whether process `pid` is gone (or a zombie nobody reaped yet).
fn dead(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
    }
}

#[tokio::test]
async fn output_reaches_the_screen() {
    let dir = tempfile::tempdir().unwrap();
    let (terminal, mut events) = start(sh("printf 'hello\\nworld'", dir.path()));
    assert!(terminal.pid().is_some());
    assert_eq!(terminal.id(), 1);
    let (seen, status) = until_exit(&mut events).await;
    assert_eq!(status, exited(0));
    assert!(seen.contains(&TerminalEvent::Output), "{seen:?}");
    let snapshot = terminal.snapshot(10);
    assert_eq!(snapshot.screen, "hello\nworld");
    assert_eq!(snapshot.cursor, (1, 5));
    assert_eq!(snapshot.size, (80, 24));
    assert_eq!(terminal.exit_status(), Some(exited(0)));
}

#[tokio::test]
async fn exit_code_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (terminal, mut events) = start(sh("exit 3", dir.path()));
    assert_eq!(terminal.exit_status(), None);
    assert_eq!(exit_of(&mut events).await, exited(3));
    assert_eq!(terminal.exit_status(), Some(exited(3)));
}

#[tokio::test]
async fn killing_signal_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (terminal, mut events) = start(sh("kill -TERM $$", dir.path()));
    assert_eq!(exit_of(&mut events).await, killed(libc_signal::TERM));
    assert_eq!(terminal.exit_status(), Some(killed(libc_signal::TERM)));
}

mod libc_signal {
    pub(crate) const HUP: i32 = 1;
    pub(crate) const KILL: i32 = 9;
    pub(crate) const TERM: i32 = 15;
}

#[tokio::test]
async fn env_is_set_and_removed_and_term_defaults() {
    let dir = tempfile::tempdir().unwrap();
    // A variable this process has, to be removed.
    let removed = std::env::vars()
        .map(|(k, _)| k)
        .find(|k| {
            k != "PATH" && !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
        .expect("no environment variable to remove");
    let script = format!(
        "echo \"set=$KRAD_TEST_SET\"; echo \"removed=${{{removed}-gone}}\"; echo \"term=$TERM\""
    );
    let mut spec = sh(&script, dir.path());
    spec.env = vec![("KRAD_TEST_SET".into(), "value 1".into())];
    spec.env_remove = vec![removed.clone()];
    let (terminal, mut events) = start(spec);
    assert_eq!(exit_of(&mut events).await, exited(0));
    assert_eq!(
        terminal.snapshot(0).screen,
        "set=value 1\nremoved=gone\nterm=xterm-256color"
    );

    // TERM given by the spec wins.
    let mut spec = sh("echo \"term=$TERM\"", dir.path());
    spec.env = vec![("TERM".into(), "dumb".into())];
    let (terminal, mut events) = start(spec);
    until_exit(&mut events).await;
    assert_eq!(terminal.snapshot(0).screen, "term=dumb");
}

#[tokio::test]
async fn cwd_is_honoured() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().join("work dir");
    std::fs::create_dir(&cwd).unwrap();
    let mut spec = spec(&["pwd", "-P"], &cwd);
    spec.cols = 400;
    let (terminal, mut events) = start(spec);
    assert_eq!(exit_of(&mut events).await, exited(0));
    let expected = cwd.canonicalize().unwrap();
    assert_eq!(terminal.snapshot(0).screen, expected.to_str().unwrap());
}

#[tokio::test]
async fn input_is_written_and_echoed() {
    let dir = tempfile::tempdir().unwrap();
    let (terminal, mut events) = start(spec(&["cat"], dir.path()));
    let written = terminal.write(b"ping\n".to_vec());
    tokio::time::timeout(TIMEOUT, written)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    // The terminal echoes the line, then cat prints it.
    until_screen(&*terminal, |s| s.screen == "ping\nping").await;
    // Several writes arrive whole and in order.
    let writes: Vec<_> = ["a", "b", "c\n"]
        .iter()
        .map(|s| terminal.write(s.as_bytes().to_vec()))
        .collect();
    for written in writes {
        written.await.unwrap().unwrap();
    }
    until_screen(&*terminal, |s| s.screen == "ping\nping\nabc\nabc").await;
    // ^D: end of input, cat ends.
    terminal.write(vec![4]).await.unwrap().unwrap();
    assert_eq!(exit_of(&mut events).await, exited(0));
    // Once ended, writes and resizes fail.
    assert!(terminal.write(b"late".to_vec()).await.unwrap().is_err());
    assert!(terminal.resize(10, 10).is_err());
}

#[tokio::test]
async fn writes_do_not_block_when_the_program_does_not_read() {
    let dir = tempfile::tempdir().unwrap();
    // Raw and without echo: the terminal keeps the unread input (in canonical mode it
    // would drop what overflows a line) and nothing drains it.
    let (terminal, mut events) = showing(
        "stty raw -echo; echo ready; exec sleep 100",
        dir.path(),
        "ready",
    )
    .await;
    let started = Instant::now();
    // Far more than the terminal's input buffer (and within krad's bound).
    let mut first = terminal.write(vec![b'x'; 512 << 10]);
    let mut second = terminal.write(b"y".to_vec());
    assert!(started.elapsed() < Duration::from_millis(100));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        first.try_recv().is_err(),
        "the big write cannot have finished"
    );
    assert!(
        second.try_recv().is_err(),
        "the second write waits for the first"
    );
    terminal.close(Duration::from_secs(5));
    assert_eq!(exit_of(&mut events).await, killed(libc_signal::HUP));
    // The pending writes are settled once the terminal ended (written into the
    // terminal as the program went, or failed), and later ones fail.
    tokio::time::timeout(TIMEOUT, first)
        .await
        .unwrap()
        .unwrap()
        .ok();
    tokio::time::timeout(TIMEOUT, second)
        .await
        .unwrap()
        .unwrap()
        .ok();
    assert!(terminal.write(b"z".to_vec()).await.unwrap().is_err());
}

#[tokio::test]
async fn bracketed_paste_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let (terminal, mut events) =
        showing("printf '\\033[?2004hready'; read x", dir.path(), "ready").await;
    assert!(terminal.bracketed_paste());
    assert!(terminal.snapshot(0).bracketed_paste);
    terminal.write(b"\n".to_vec());
    until_exit(&mut events).await;

    let (terminal, mut events) = start(sh("printf plain", dir.path()));
    until_exit(&mut events).await;
    assert!(!terminal.bracketed_paste());
}

#[tokio::test]
async fn bell_notifications_and_title_arrive_as_events() {
    let dir = tempfile::tempdir().unwrap();
    let script = "printf 'a\\007b'; \
        printf '\\033]9;nine\\007'; \
        printf '\\033]777;notify;Title;the body\\033\\\\'; \
        printf '\\033]2;my title\\007'";
    let (terminal, mut events) = start(sh(script, dir.path()));
    let (seen, status) = until_exit(&mut events).await;
    assert_eq!(status, exited(0));
    for expected in [
        TerminalEvent::Output,
        TerminalEvent::Bell,
        TerminalEvent::Notification {
            title: None,
            body: "nine".into(),
        },
        TerminalEvent::Notification {
            title: Some("Title".into()),
            body: "the body".into(),
        },
        TerminalEvent::Title("my title".into()),
    ] {
        assert!(seen.contains(&expected), "no {expected:?} in {seen:?}");
    }
    // The BELs ending OSC sequences are no bells.
    assert_eq!(
        seen.iter().filter(|e| **e == TerminalEvent::Bell).count(),
        1,
        "{seen:?}"
    );
    let snapshot = terminal.snapshot(0);
    assert_eq!(snapshot.screen, "ab");
    assert_eq!(snapshot.title, "my title");
}

#[tokio::test]
async fn scrollback_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = sh(
        "i=1; while [ $i -le 50 ]; do echo line$i; i=$((i+1)); done",
        dir.path(),
    );
    spec.rows = 3;
    spec.scrollback_lines = 5;
    let (terminal, mut events) = start(spec);
    until_exit(&mut events).await;
    let snapshot = terminal.snapshot(100);
    assert_eq!(snapshot.screen, "line49\nline50");
    assert_eq!(
        snapshot.scrollback,
        ["line44", "line45", "line46", "line47", "line48"]
    );
    assert!(!snapshot.truncated);
    let snapshot = terminal.snapshot(2);
    assert_eq!(snapshot.scrollback, ["line47", "line48"]);
    assert!(snapshot.truncated);
}

#[tokio::test]
async fn transcript_has_all_output_and_is_private() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("transcripts/deeper/1.log");
    let mut spec = sh(
        "printf 'abc\\ndef\\n'; head -c 300000 /dev/zero | tr '\\0' y; printf '\\033]2;t\\007end'",
        dir.path(),
    );
    spec.transcript = Some(path.clone());
    let (terminal, mut events) = start(spec);
    assert_eq!(exit_of(&mut events).await, exited(0));
    let transcript = std::fs::read(&path).unwrap();
    // Raw bytes, as the terminal gave them (it turns \n into \r\n).
    let mut expected = b"abc\r\ndef\r\n".to_vec();
    expected.extend(std::iter::repeat_n(b'y', 300_000));
    expected.extend(b"\x1b]2;t\x07end");
    assert!(
        transcript == expected,
        "the transcript differs ({} bytes)",
        transcript.len()
    );
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    // 300000 y fill 3750 rows of 80 exactly: "end" starts a row.
    assert!(
        terminal
            .snapshot(0)
            .screen
            .ends_with(&format!("{}\nend", "y".repeat(80)))
    );
}

/// A program that never prints costs no transcript file and no screen work:
/// its pipeline starts at the first output. Its screen still answers (empty,
/// at its size, resized on demand) and its end is reported as any other.
#[tokio::test]
async fn a_terminal_that_never_prints_has_an_empty_screen_and_no_transcript() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("transcripts/2.log");
    let mut spec = sh("read x; exit 4", dir.path());
    spec.transcript = Some(path.clone());
    let (terminal, mut events) = start(spec);
    // Nothing is typed (it would echo); the program ends with the close below.
    let snapshot = terminal.snapshot(100);
    assert_eq!(snapshot.screen, "");
    assert!(snapshot.scrollback.is_empty());
    assert_eq!(snapshot.size, (80, 24));
    terminal.resize(100, 30).unwrap();
    assert_eq!(terminal.snapshot(0).size, (100, 30));
    terminal.close(Duration::from_secs(5));
    let (_, status) = until_exit(&mut events).await;
    assert!(
        status.code.is_some() || status.signal.is_some(),
        "{status:?}"
    );
    assert!(
        !path.exists(),
        "a transcript for a terminal that printed nothing"
    );
    assert_eq!(terminal.snapshot(0).screen, "");
}

#[tokio::test]
async fn an_unwritable_transcript_does_not_stop_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"").unwrap();
    let mut spec = sh("printf works", dir.path());
    spec.transcript = Some(file.join("under-a-file.log"));
    let (terminal, mut events) = start(spec);
    assert_eq!(exit_of(&mut events).await, exited(0));
    assert_eq!(terminal.snapshot(0).screen, "works");
}

#[tokio::test]
async fn resize_reaches_the_program() {
    let dir = tempfile::tempdir().unwrap();
    let (terminal, mut events) = showing("stty size; read x; stty size", dir.path(), "24 80").await;
    terminal.resize(100, 30).unwrap();
    assert_eq!(terminal.snapshot(0).size, (100, 30));
    terminal.write(b"\n".to_vec()).await.unwrap().unwrap();
    assert_eq!(exit_of(&mut events).await, exited(0));
    let snapshot = terminal.snapshot(0);
    assert_eq!(snapshot.screen, "24 80\n\n30 100");
    assert_eq!(snapshot.size, (100, 30));
}

#[tokio::test]
async fn resize_sends_sigwinch() {
    let dir = tempfile::tempdir().unwrap();
    let (terminal, mut events) = showing(
        "trap 'stty size; exit 0' WINCH; echo ready; while :; do sleep 0.05; done",
        dir.path(),
        "ready",
    )
    .await;
    terminal.resize(90, 20).unwrap();
    assert_eq!(exit_of(&mut events).await, exited(0));
    assert_eq!(terminal.snapshot(0).screen, "ready\n20 90");
}

#[tokio::test]
async fn close_hangs_up_first() {
    let dir = tempfile::tempdir().unwrap();
    let (terminal, mut events) = start(spec(&["sleep", "100"], dir.path()));
    let started = Instant::now();
    terminal.close(Duration::from_secs(10));
    assert_eq!(exit_of(&mut events).await, killed(libc_signal::HUP));
    assert!(started.elapsed() < Duration::from_secs(5));
    // Closing an ended terminal does nothing.
    terminal.close(Duration::ZERO);
}

#[tokio::test]
async fn close_kills_after_the_grace() {
    let dir = tempfile::tempdir().unwrap();
    let (terminal, mut events) =
        showing("trap '' HUP; echo ready; sleep 100", dir.path(), "ready").await;
    let grace = Duration::from_millis(400);
    let started = Instant::now();
    terminal.close(grace);
    assert_eq!(exit_of(&mut events).await, killed(libc_signal::KILL));
    assert!(started.elapsed() >= grace, "killed before the grace");
}

#[tokio::test]
async fn close_kills_the_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let (terminal, mut events) = showing(
        "sleep 100 & echo $! > pid; echo started; wait",
        dir.path(),
        "started",
    )
    .await;
    let grandchild = pid_written(dir.path()).await;
    assert!(!dead(grandchild));
    terminal.close(Duration::from_millis(500));
    let (_, status) = until_exit(&mut events).await;
    assert!(status.signal.is_some(), "{status:?}");
    until_dead(grandchild).await;
}

/// A grandchild ignoring SIGHUP outlives the program: SIGKILL after the grace
/// still reaches it, through the process group.
#[tokio::test]
async fn close_kills_what_the_program_leaves_in_its_group() {
    let dir = tempfile::tempdir().unwrap();
    // The grandchild says it is ready once it ignores SIGHUP.
    let (terminal, mut events) = start(sh(
        "sh -c 'trap \"\" HUP; echo ready > ready; exec sleep 100' & echo $! > pid; wait",
        dir.path(),
    ));
    let deadline = Instant::now() + TIMEOUT;
    while !dir.path().join("ready").exists() {
        assert!(Instant::now() < deadline, "the grandchild never got ready");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let grandchild = pid_written(dir.path()).await;
    let grace = Duration::from_millis(1500);
    let started = Instant::now();
    terminal.close(grace);
    // The shell dies of the SIGHUP...
    assert_eq!(exit_of(&mut events).await, killed(libc_signal::HUP));
    if started.elapsed() < grace {
        assert!(!dead(grandchild), "the grandchild ignores SIGHUP");
    }
    // ...the grandchild of the SIGKILL after the grace.
    until_dead(grandchild).await;
    assert!(started.elapsed() >= grace);
}

#[tokio::test]
async fn exited_comes_after_the_final_output() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..5 {
        let (terminal, mut events) = start(sh(
            "i=0; while [ $i -lt 300 ]; do echo l$i; i=$((i+1)); done; printf 'last line'; exit 4",
            dir.path(),
        ));
        assert_eq!(exit_of(&mut events).await, exited(4));
        // Taken right after Exited: the whole output is on the screen.
        let snapshot = terminal.snapshot(1000);
        assert!(
            snapshot.screen.ends_with("l298\nl299\nlast line"),
            "round {round}: {snapshot:#?}"
        );
        assert_eq!(snapshot.scrollback.first().map(String::as_str), Some("l0"));
    }
}

#[tokio::test]
async fn exited_is_delivered_when_events_pile_up() {
    let dir = tempfile::tempdir().unwrap();
    // A channel of one: output events are dropped while nobody reads, Exited waits.
    let bells_and_lines = "i=0; while [ $i -lt 200 ]; do printf '\\007l%d\\n' $i; i=$((i+1)); done";
    let (terminal, mut events) = start_with_room_for(1, sh(bells_and_lines, dir.path()));
    // Let it finish without reading the events.
    let deadline = Instant::now() + TIMEOUT;
    while terminal.exit_status().is_none() {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (seen, status) = until_exit(&mut events).await;
    assert_eq!(status, exited(0));
    assert!(seen.len() <= 1, "{seen:?}");
    assert!(terminal.snapshot(0).screen.ends_with("l199"));
}

#[tokio::test]
async fn announced_states_are_never_dropped_when_the_app_is_behind() {
    let dir = tempfile::tempdir().unwrap();
    // A channel of one, read slowly: bells may be dropped, announcements may not.
    let announcements =
        "i=0; while [ $i -lt 30 ]; do printf '\\007\\033]7501;state=s%d\\007' $i; i=$((i+1)); done";
    let (_terminal, mut events) = start_with_room_for(1, sh(announcements, dir.path()));
    let mut announced = Vec::new();
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let event = tokio::time::timeout_at(deadline.into(), events.recv())
            .await
            .expect("the terminal never exited")
            .expect("the channel closed before Exited");
        match event {
            TerminalEvent::AgentState(state) => announced.push(state),
            TerminalEvent::Exited(_) => break,
            _ => {}
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let expected: Vec<String> = (0..30).map(|i| format!("s{i}")).collect();
    assert_eq!(announced, expected);
}

/// The program leads a session of its own whose controlling terminal is its
/// terminal (its group in the foreground), with no signal blocked and SIGPIPE
/// not ignored, and gets its argv as given.
#[tokio::test]
async fn the_program_leads_a_session_on_its_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let script = "read -r stat < /proc/$$/stat; echo \"stat: $stat\"; \
                  grep -E '^Sig(Blk|Ign)' /proc/$$/status | tr '\\t' ' '; \
                  echo \"tty: $(tty)\"; echo \"arg0: $0\"";
    let (terminal, mut events) = start(spec(&["sh", "-c", script, "my-name"], dir.path()));
    let pid = terminal.pid().unwrap().to_string();
    assert_eq!(exit_of(&mut events).await, exited(0));
    let screen = terminal.snapshot(100).screen;
    let line = |prefix: &str| {
        screen
            .lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} in {screen:?}"))
            .trim()
            .to_owned()
    };
    // pid (comm) state ppid pgrp session tty_nr tpgid
    let stat = line("stat: ");
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    assert_eq!(fields[2], pid, "process group: {stat}");
    assert_eq!(fields[3], pid, "session: {stat}");
    assert_ne!(fields[4], "0", "no controlling terminal: {stat}");
    assert_eq!(
        fields[5], pid,
        "not the terminal's foreground group: {stat}"
    );
    assert!(line("tty: ").starts_with("/dev/pts/"), "{screen}");
    assert_eq!(line("SigBlk: "), "0000000000000000");
    let ignored = u64::from_str_radix(&line("SigIgn: "), 16).unwrap();
    assert_eq!(ignored & (1 << (13 - 1)), 0, "SIGPIPE ignored: {screen}");
    assert_eq!(line("arg0: "), "my-name");
}

/// The program is found on the PATH the spec gives it, and an executable
/// without `#!` runs with the shell, as `execvp` does.
#[tokio::test]
async fn the_program_is_found_on_its_own_path() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let tool = bin.join("krad-test-tool");
    std::fs::write(&tool, "echo \"tool ran in $(pwd) as $0\"\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut spec = spec(&["krad-test-tool"], dir.path());
    spec.env = vec![(
        "PATH".to_owned(),
        format!("{}:/usr/bin:/bin", bin.display()),
    )];
    let (terminal, mut events) = start(spec);
    assert_eq!(exit_of(&mut events).await, exited(0));
    let screen = terminal.snapshot(100).screen;
    let cwd = dir.path().canonicalize().unwrap();
    assert!(
        screen.contains(&format!(
            "tool ran in {} as {}",
            cwd.display(),
            tool.display()
        )),
        "{screen:?}"
    );
}

#[tokio::test]
async fn spawn_errors() {
    let dir = tempfile::tempdir().unwrap();
    let host = PtyHost::new();
    let (events, _receiver) = mpsc::channel(4);

    let missing = dir.path().join("missing");
    match host.spawn(spec(&["sh"], &missing), events.clone()) {
        Err(SpawnError::NoDirectory(path)) => assert_eq!(path, missing),
        other => panic!("{:?}", other.map(|t| t.id())),
    }

    match host.spawn(spec(&["no-such-program-krad"], dir.path()), events.clone()) {
        Err(SpawnError::Program { program, .. }) => assert_eq!(program, "no-such-program-krad"),
        other => panic!("{:?}", other.map(|t| t.id())),
    }

    let script = dir.path().join("not-executable");
    std::fs::write(&script, "#!/bin/sh\n").unwrap();
    let path = script.to_str().unwrap();
    match host.spawn(spec(&[path], dir.path()), events.clone()) {
        Err(SpawnError::Program { program, .. }) => assert_eq!(program, path),
        other => panic!("{:?}", other.map(|t| t.id())),
    }

    match host.spawn(spec(&[], dir.path()), events) {
        Err(SpawnError::Program { .. }) => {}
        other => panic!("{:?}", other.map(|t| t.id())),
    }
}

/// Programs printing as fast as they can must not slow down the runtime, snapshots,
/// or other terminals. As many floods as the runtime has workers: parsing on the
/// workers would leave no worker free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_output_blocks_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut floods = Vec::new();
    for n in 0..2 {
        let mut spec = sh("head -c 100000000 /dev/zero | tr '\\0' x", dir.path());
        spec.transcript = Some(dir.path().join(format!("flood{n}.log")));
        // A small channel nobody reads during the flood.
        let (events, receiver) = mpsc::channel(4);
        floods.push((PtyHost::new().spawn(spec, events).unwrap(), receiver));
    }
    let flood = &floods[0].0;

    // Another task of the runtime: how late do its 10 ms sleeps wake up?
    let sleeper = tokio::spawn(async {
        let mut worst = Duration::ZERO;
        let until = Instant::now() + Duration::from_secs(3);
        while Instant::now() < until {
            let asked = Instant::now();
            tokio::time::sleep(Duration::from_millis(10)).await;
            worst = worst.max(asked.elapsed().saturating_sub(Duration::from_millis(10)));
        }
        worst
    });

    // Snapshots of a flooding terminal stay quick.
    let mut worst_snapshot = Duration::ZERO;
    let mut snapshots = 0;
    let started = Instant::now();
    let mut other_took = None;
    while started.elapsed() < Duration::from_secs(3) {
        let asked = Instant::now();
        let snapshot = flood.snapshot(100);
        worst_snapshot = worst_snapshot.max(asked.elapsed());
        snapshots += 1;
        assert_eq!(snapshot.size, (80, 24));
        // Meanwhile another terminal starts, runs and ends.
        if other_took.is_none() && started.elapsed() > Duration::from_secs(1) {
            let (other, mut other_events) = start(sh("printf 'other terminal'", dir.path()));
            let (_, status) = until_exit(&mut other_events).await;
            assert_eq!(status, exited(0));
            assert_eq!(other.snapshot(0).screen, "other terminal");
            other_took = Some(asked.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let worst_sleep = sleeper.await.unwrap();
    let other_took = other_took.unwrap();

    // The floods were really flooding.
    let snapshot = flood.snapshot(100);
    assert!(snapshot.screen.contains("xxxxxxxxxx"), "{snapshot:#?}");
    assert_eq!(snapshot.scrollback.len(), 100);
    // Past 64 MiB a transcript moves aside to `.1` (once at most: a flood is
    // 100 MB), which a fast flood reaches within the 3 s.
    let parsed: Vec<u64> = (0..2)
        .map(|n| {
            [format!("flood{n}.log"), format!("flood{n}.log.1")]
                .iter()
                .filter_map(|name| std::fs::metadata(dir.path().join(name)).ok())
                .map(|metadata| metadata.len())
                .sum()
        })
        .collect();
    eprintln!(
        "floods: {parsed:?} bytes in the transcripts after ~3 s, {snapshots} snapshots, \
         worst snapshot {worst_snapshot:?}, worst sleep lateness {worst_sleep:?}, \
         other terminal {other_took:?}"
    );
    for bytes in &parsed {
        assert!(*bytes > 500_000, "only {bytes} bytes parsed");
    }
    // Neither flood is left unread while the other runs.
    let (least, most) = (parsed[0].min(parsed[1]), parsed[0].max(parsed[1]));
    assert!(least * 4 >= most, "one flood starved: {parsed:?}");

    assert!(
        worst_snapshot < Duration::from_millis(500),
        "a snapshot took {worst_snapshot:?}"
    );
    assert!(
        worst_sleep < Duration::from_millis(500),
        "a sleep woke {worst_sleep:?} late"
    );
    assert!(
        other_took < Duration::from_secs(5),
        "the other terminal took {other_took:?}"
    );

    for (flood, events) in &mut floods {
        flood.close(Duration::from_millis(200));
        let (_, status) = until_exit(events).await;
        assert!(status.signal.is_some() || status.code.is_some());
    }
}

#[tokio::test]
async fn input_a_program_never_reads_is_bounded_and_the_next_write_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    // No echo and no line editing: the kernel's input buffer fills, then krad's queue.
    let (terminal, _events) = start(sh("stty -echo raw; sleep 60", dir.path()));
    until_screen(terminal.as_ref(), |_| true).await;
    let chunk = vec![b'x'; 256 * 1024];
    // Queued whole, never answered while the program does not read.
    let mut pending = Vec::new();
    for _ in 0..4 {
        pending.push(terminal.write(chunk.clone()));
    }
    let refused = tokio::time::timeout(Duration::from_secs(5), terminal.write(chunk.clone()))
        .await
        .expect("a refusal comes at once")
        .unwrap()
        .unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::WouldBlock, "{refused}");
    assert!(refused.to_string().contains("not read"), "{refused}");
    terminal.close(Duration::from_millis(100));
    drop(pending);
}
