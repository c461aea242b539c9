//! Attach (section 5): a terminal's screen and output, live, with input and
//! resizes going back — over the bus, and `krad attach` driven through a real
//! pseudo-terminal.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::fd::OwnedFd;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use nix::sys::termios::{LocalFlags, tcgetattr};
use serde_json::{Value, json};

use crate::support::{App, KRAD, code};

/// One Attach connection.
struct Attached {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    /// Output seen so far, decoded.
    output: Vec<u8>,
}

impl Attached {
    /// Attaches to `target` as Client and reads the first message.
    fn open(app: &App, target: u64) -> (Attached, Value) {
        Attached::open_with(app, app.envelope(json!({"Attach": {"target": target}})))
    }

    fn open_with(app: &App, envelope: Value) -> (Attached, Value) {
        let mut writer = app.connect();
        let mut line = serde_json::to_vec(&envelope).unwrap();
        line.push(b'\n');
        writer.write_all(&line).unwrap();
        let mut attached = Attached {
            reader: BufReader::new(writer.try_clone().unwrap()),
            writer,
            output: Vec::new(),
        };
        let first = attached.next().expect("a first message");
        (attached, first)
    }

    /// The next message; `None` once the app closed the stream.
    fn next(&mut self) -> Option<Value> {
        let mut line = String::new();
        if self.reader.read_line(&mut line).unwrap() == 0 {
            return None;
        }
        Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?}: {e}")))
    }

    fn send(&mut self, message: Value) {
        let mut line = serde_json::to_vec(&message).unwrap();
        line.push(b'\n');
        self.writer.write_all(&line).unwrap();
    }

    fn input(&mut self, bytes: &[u8]) {
        self.send(json!({"Input": {"data": BASE64.encode(bytes)}}));
    }

    fn resize(&mut self, cols: u16, rows: u16) {
        self.send(json!({"Resize": {"cols": cols, "rows": rows}}));
    }

    /// Reads messages until the output holds `text`; returns the other messages.
    fn until_output(&mut self, text: &str) -> Vec<Value> {
        let mut others = Vec::new();
        while !String::from_utf8_lossy(&self.output).contains(text) {
            let message = self.next().unwrap_or_else(|| {
                panic!(
                    "the stream ended before {text:?}; output: {:?}",
                    String::from_utf8_lossy(&self.output)
                )
            });
            match message["Output"]["data"].as_str() {
                Some(data) => self.output.extend(BASE64.decode(data).unwrap()),
                None => others.push(message),
            }
        }
        others
    }
}

/// The bytes of a `Screen` message, fed to a terminal of its size.
fn redraw(screen: &Value) -> vt100::Parser {
    let size = |key: &str| std::num::NonZeroU16::new(screen[key].as_u64().unwrap() as u16).unwrap();
    let mut parser = vt100::Parser::new(size("rows"), size("cols"), 0);
    parser.process(&BASE64.decode(screen["data"].as_str().unwrap()).unwrap());
    parser
}

#[test]
fn the_first_message_redraws_a_screen_that_already_had_content() {
    let app = App::start();
    let id = app.spawn_sh(
        "printf 'plain line\\n\\033[1;31mbold red\\033[0m and more\\033[?2004h\\033[?1h'; sleep 60",
    );
    let shown = app.until_screen(id, "and more");
    let (_attached, first) = Attached::open(&app, id);
    let screen = &first["Screen"];
    assert_eq!(screen["terminal"], id, "{first}");
    assert_eq!(
        (screen["cols"].as_u64(), screen["rows"].as_u64()),
        (Some(120), Some(40))
    );
    assert!(screen.get("tmux").is_none(), "{first}");
    let parser = redraw(screen);
    let redrawn = parser.screen();
    // The same text, where it was, with its attributes and the program's modes.
    assert_eq!(redrawn.contents(), shown);
    assert_eq!(redrawn.cursor_position(), (1, 17));
    let bold = redrawn.cell(1, 0).unwrap();
    assert!(bold.bold());
    assert_eq!(bold.fgcolor(), vt100::Color::Idx(1));
    assert!(!redrawn.cell(1, 9).unwrap().bold());
    assert!(redrawn.bracketed_paste());
    assert!(redrawn.application_cursor());
}

#[test]
fn input_reaches_the_program_and_the_last_resize_sets_the_size() {
    let app = App::start();
    let id = app.spawn_sh("while read -r line; do echo \"got $line at $(stty size)\"; done");
    let (mut first, _) = Attached::open(&app, id);
    first.resize(100, 30);
    first.input(b"one\r");
    first.until_output("got one at 30 100");
    // A second attacher resizes; its size is the terminal's now, for both.
    // (Its input follows its resize on its own connection: the first's might
    // be taken before the second's resize.)
    let (mut second, _) = Attached::open(&app, id);
    second.resize(90, 20);
    second.input(b"two\r");
    first.until_output("got two at 20 90");
    second.until_output("got two at 20 90");
    // Keystrokes are keystrokes: the program's screen has them too.
    app.until_screen(id, "got two at 20 90");
}

#[test]
fn two_attachers_see_the_output_and_the_program_exiting_ends_both_streams() {
    let app = App::start();
    let id = app.spawn_sh("read -r x; echo \"bye $x\"; exit 4");
    let (mut one, _) = Attached::open(&app, id);
    let (mut two, _) = Attached::open(&app, id);
    one.input(b"now\r");
    for attached in [&mut one, &mut two] {
        let others = attached.until_output("bye now");
        assert!(others.is_empty(), "{others:?}");
        let mut last = attached.next().unwrap();
        while last.get("Output").is_some() {
            last = attached.next().unwrap();
        }
        assert_eq!(
            last,
            json!({"Exited": {"terminal": id, "exit_code": 4, "signal": null}})
        );
        assert_eq!(attached.next(), None, "the stream goes on after Exited");
    }
    // Attaching to an exited terminal: its last screen, then the end.
    let (mut late, first) = Attached::open(&app, id);
    assert!(
        redraw(&first["Screen"])
            .screen()
            .contents()
            .contains("bye now"),
        "{first}"
    );
    assert_eq!(late.next().unwrap()["Exited"]["exit_code"], 4);
    assert_eq!(late.next(), None);
}

#[test]
fn bad_lines_are_answered_and_the_stream_goes_on() {
    let app = App::start();
    let id = app.spawn_sh("while read -r line; do echo \"got $line\"; done");
    let (mut attached, _) = Attached::open(&app, id);
    attached.send(json!({"Teleport": {}}));
    let error = attached.next().unwrap();
    assert_eq!(error["Error"]["code"], "bad_request", "{error}");
    attached.send(json!({"Resize": {"cols": 0, "rows": 10}}));
    assert_eq!(attached.next().unwrap()["Error"]["code"], "invalid");
    attached.send(json!({"Input": {"data": "not base64!"}}));
    assert_eq!(attached.next().unwrap()["Error"]["code"], "bad_request");
    attached.input(b"still here\r");
    attached.until_output("got still here");
}

#[test]
fn attach_has_the_rights_of_send() {
    let app = App::start();
    let answer = app.request(json!({"Attach": {"target": 99}}));
    assert_eq!(code(&answer), "not_found", "{answer}");
    let one = app.spawn_sh("sleep 60");
    let two = app.spawn_sh("sleep 60");
    // A plain terminal may attach only to terminals it spawned.
    let answer = app.call_as(
        one,
        &app.terminal_token(one),
        json!({"Attach": {"target": two}}),
    );
    assert_eq!(code(&answer), "forbidden", "{answer}");
    assert_eq!(answer["Error"]["detail"]["request"], "Attach");
    // Hello lists it.
    let hello = app.request(json!("Hello"));
    assert!(
        hello["Hello"]["requests"]
            .as_array()
            .unwrap()
            .contains(&json!("Attach"))
    );
}

/// `krad attach` on a real pseudo-terminal, as a user runs it (also the
/// page's baseline in `ui_browser`'s measurement).
pub(crate) struct Pty {
    master: std::fs::File,
    slave: OwnedFd,
    seen: Arc<Mutex<Vec<u8>>>,
}

impl Pty {
    pub(crate) fn open() -> Pty {
        Pty::open_sized(None)
    }

    /// A pseudo-terminal of `cols` × `rows` (`None`: 0 × 0, as under `script`).
    pub(crate) fn open_sized(size: Option<(u16, u16)>) -> Pty {
        let size = size.map(|(cols, rows)| nix::pty::Winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        });
        let pty = nix::pty::openpty(size.as_ref(), None).unwrap();
        let master = std::fs::File::from(pty.master);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut reader = master.try_clone().unwrap();
        let sink = Arc::clone(&seen);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Pty {
            master,
            slave: pty.slave,
            seen,
        }
    }

    /// Runs `krad attach ARGS` with the pseudo-terminal as its stdin, stdout and stderr.
    pub(crate) fn krad_attach(&self, app: &App, args: &[&str]) -> Child {
        let mut all = vec!["attach"];
        all.extend_from_slice(args);
        self.krad(app, &all)
    }

    /// Runs `krad ARGS` with the pseudo-terminal as its stdin, stdout and stderr.
    pub(crate) fn krad(&self, app: &App, args: &[&str]) -> Child {
        let io = || Stdio::from(self.slave.try_clone().unwrap());
        Command::new(KRAD)
            .args(args)
            .env("KRAD_ADE_API_JSON", &app.api_json)
            .env_remove("KRAD_ADE_ENDPOINT")
            .env_remove("KRAD_ADE_TOKEN_FILE")
            .env_remove("KRAD_ADE_TERMINAL")
            .env_remove("TMUX")
            .stdin(io())
            .stdout(io())
            .stderr(io())
            .spawn()
            .unwrap()
    }

    pub(crate) fn type_keys(&mut self, bytes: &[u8]) {
        self.master.write_all(bytes).unwrap();
    }

    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.seen.lock().unwrap()).into_owned()
    }

    /// How many bytes the pseudo-terminal has shown so far.
    pub(crate) fn seen_len(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    pub(crate) fn until(&self, text: &str) {
        let until = Instant::now() + Duration::from_secs(20);
        while !self.text().contains(text) {
            assert!(
                Instant::now() < until,
                "{text:?} never showed: {:?}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn raw(&self) -> bool {
        let local = tcgetattr(&self.slave).unwrap().local_flags;
        !local.contains(LocalFlags::ICANON) && !local.contains(LocalFlags::ECHO)
    }
}

fn wait(child: &mut Child) -> std::process::ExitStatus {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < until, "krad attach did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Issue 48: `krad attach` from a terminal that reports 0×0 left the agent's
/// terminal 1×1 after the detach (its screen read two characters a line). A
/// 0 size is never sent, and the size the attach found comes back at detach.
#[test]
fn an_attach_leaves_the_agent_s_size_as_it_found_it() {
    let app = App::start();
    let id = app.spawn_sh("echo READY; while read -r x; do echo \"size $(stty size)\"; done");
    app.until_screen(id, "READY");
    for size in [None, Some((100, 30))] {
        let mut pty = Pty::open_sized(size);
        let mut child = pty.krad_attach(&app, &[&id.to_string()]);
        pty.until("READY");
        if size.is_some() {
            // While attached, the agent has the user's size.
            pty.type_keys(b"\r");
            pty.until("size 30 100");
        }
        pty.type_keys(b"\x1c");
        assert!(wait(&mut child).success());
        let sizes = |app: &App| {
            let output = app.request(json!({"Output": {"target": id}}));
            let screen = output["Output"]["screen"].as_str().unwrap_or("").to_owned();
            screen
                .lines()
                .filter(|l| l.starts_with("size "))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        let before = sizes(&app).len();
        let sent = app.request(json!({"Send": {"target": id, "text": "", "enter": true}}));
        assert!(sent["Sent"].is_object(), "{sent}");
        crate::support::wait_until(Duration::from_secs(20), || sizes(&app).len() > before);
        let last = sizes(&app).pop();
        assert_eq!(last.as_deref(), Some("size 40 120"), "{:?}", sizes(&app));
    }
}

#[test]
fn krad_attach_restores_the_terminal_after_detach_exit_and_sigterm() {
    let app = App::start();
    let id = app.spawn_sh("echo READY; read -r x; echo \"got $x\"; read -r y; exit 3");
    app.until_screen(id, "READY");
    let mut pty = Pty::open();
    let before = tcgetattr(&pty.slave).unwrap();
    assert!(!pty.raw());

    // Detach with Ctrl-\ after typing into the program.
    let mut child = pty.krad_attach(&app, &[&id.to_string()]);
    pty.until("READY");
    assert!(pty.raw(), "the terminal is raw while attached");
    pty.type_keys(b"hello\r");
    pty.until("got hello");
    pty.type_keys(b"\x1c");
    assert!(wait(&mut child).success());
    pty.until(&format!("detached from terminal {id}"));
    let after = tcgetattr(&pty.slave).unwrap();
    assert_eq!(after.local_flags, before.local_flags);
    assert_eq!(after.input_flags, before.input_flags);
    assert_eq!(after.output_flags, before.output_flags);
    assert!(
        pty.text().contains("\x1b[?1049l"),
        "left the alternate screen"
    );
    assert_eq!(
        app.record(id)["state"],
        "working",
        "detaching leaves it running"
    );

    // SIGTERM: put back too.
    let mut child = pty.krad_attach(&app, &[&id.to_string(), "--detach-key", "ctrl-]"]);
    let until = Instant::now() + Duration::from_secs(20);
    while !pty.raw() {
        assert!(Instant::now() < until, "never raw");
        std::thread::sleep(Duration::from_millis(20));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(wait(&mut child).success());
    assert!(!pty.raw());
    assert_eq!(
        tcgetattr(&pty.slave).unwrap().local_flags,
        before.local_flags
    );

    // The program's end ends it, and it says how.
    let mut child = pty.krad_attach(&app, &[&id.to_string()]);
    let until = Instant::now() + Duration::from_secs(20);
    while !pty.raw() {
        assert!(Instant::now() < until, "never raw");
        std::thread::sleep(Duration::from_millis(20));
    }
    pty.type_keys(b"bye\r");
    assert!(wait(&mut child).success());
    pty.until(&format!("the program of terminal {id} exited with code 3"));
    assert_eq!(
        tcgetattr(&pty.slave).unwrap().local_flags,
        before.local_flags
    );
}

#[test]
fn krad_attach_wants_a_terminal() {
    let app = App::start();
    let id = app.spawn_sh("sleep 60");
    let out = app.krad(&["attach", &id.to_string()]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

#[test]
fn an_attacher_that_fell_behind_as_the_program_ended_gets_its_last_screen() {
    let app = App::start();
    let id = app.spawn_sh("read -r go; seq 1 3000000; echo the-end");
    let (mut attached, first) = Attached::open(&app, id);
    assert!(first["Screen"].is_object(), "{first}");
    // The attacher reads nothing while the program prints millions of lines and ends.
    app.request(json!({"Send": {"target": id, "text": "go", "enter": true}}));
    let waited = app.request(json!({"Wait": {"target": id, "for": "exit", "timeout_secs": 120}}));
    assert_eq!(waited["Agent"]["exit_code"], 0, "{waited}");
    let mut last_screen = None;
    let mut after_screen = Vec::new();
    let mut exited = None;
    while let Some(message) = attached.next() {
        if message["Screen"].is_object() {
            last_screen = Some(message);
            after_screen.clear();
        } else if let Some(data) = message["Output"]["data"].as_str() {
            after_screen.extend(BASE64.decode(data).unwrap());
        } else if message["Exited"].is_object() {
            exited = Some(message);
            break;
        }
    }
    let screen = last_screen.expect("a fresh screen instead of the output it missed");
    let mut parser = redraw(&screen["Screen"]);
    parser.process(&after_screen);
    let shown = parser.screen().contents();
    assert!(
        shown.contains("3000000") && shown.contains("the-end"),
        "{shown}"
    );
    assert_eq!(exited.expect("Exited")["Exited"]["exit_code"], 0);
}
