//! Issue 22: secrets stay off command lines and out of logs. On each terminal
//! host (PTY, tmux, an SSH host), a Spawn `env` value and a prompt carry a
//! unique marker while another thread reads every `/proc/*/cmdline` as fast as
//! it can; the marker must never show there, nor in the app's log (at trace for
//! the environment, which also covers the default level for the prompt).

use std::collections::BTreeSet;
use std::process::{Child, Command};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::ssh::{Sshd, app_with_host_logged};
use crate::support::{App, Launch};
use crate::tmux::{TMUX, TmuxServer};

/// A marker no other test or process holds.
fn marker(what: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("krad-secret-{what}-{}-{nanos:x}", std::process::id())
}

/// Reads every process's command line, round after round, until stopped.
struct Sampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<(BTreeSet<String>, bool, u64)>,
    /// A process of the test's own with the control marker in its argv: proof
    /// that the sampler sees command lines at all.
    control: Child,
}

impl Sampler {
    fn start(needle: &str) -> Sampler {
        let control_marker = format!("{needle}-control");
        let control = Command::new("sh")
            .args(["-c", "sleep 60", &control_marker])
            .spawn()
            .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let needle = needle.as_bytes().to_vec();
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut hits = BTreeSet::new();
            let mut saw_control = false;
            let mut rounds = 0;
            while !flag.load(Ordering::SeqCst) {
                rounds += 1;
                let Ok(entries) = std::fs::read_dir("/proc") else {
                    continue;
                };
                for entry in entries.flatten() {
                    let name = entry.file_name();
                    if !name.as_encoded_bytes().iter().all(u8::is_ascii_digit) {
                        continue;
                    }
                    let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
                        continue;
                    };
                    let Some(at) = cmdline.windows(needle.len()).position(|w| w == needle) else {
                        continue;
                    };
                    if cmdline[at + needle.len()..].starts_with(b"-control") {
                        saw_control = true;
                    } else {
                        hits.insert(String::from_utf8_lossy(&cmdline).replace('\0', " "));
                    }
                }
            }
            (hits, saw_control, rounds)
        });
        Sampler {
            stop,
            thread,
            control,
        }
    }

    /// Stops; fails if the marker was seen in any command line.
    fn finish(mut self, what: &str) {
        self.stop.store(true, Ordering::SeqCst);
        let (hits, saw_control, rounds) = self.thread.join().unwrap();
        let _ = self.control.kill();
        let _ = self.control.wait();
        assert!(
            saw_control,
            "{what}: the sampler never saw its own control process ({rounds} rounds)"
        );
        assert!(
            hits.is_empty(),
            "{what}: the secret showed on command lines: {hits:#?}"
        );
    }
}

/// The Spawn fields that put a terminal where the host under test is.
fn placed(environment: Option<&str>, mut fields: Value) -> Value {
    if let Some(environment) = environment {
        fields["environment"] = json!(environment);
    }
    fields
}

/// A Spawn `env` value, a typed prompt (shell) and an argument prompt (exec),
/// each with a marker: none on any command line but the exec program's own
/// (the prompt is its argument by design), none in the log.
fn secrets_stay_hidden(app: &App, environment: Option<&str>, what: &str) {
    // The environment.
    let secret = marker("env");
    let sampler = Sampler::start(&secret);
    let id = app.spawn(placed(
        environment,
        json!({"profile": "exec", "env": {"MY_SECRET": secret},
               "command": ["sh", "-c", "test -n \"$MY_SECRET\" && echo \"has-$((40+2))\"; sleep 30"]}),
    ))["terminal"]
        .as_u64()
        .unwrap();
    app.until_screen(id, "has-42");
    sampler.finish(&format!("{what}: env"));

    // A typed prompt.
    let typed = marker("typed");
    let sampler = Sampler::start(&typed);
    let shell = app.spawn(placed(
        environment,
        json!({"profile": "shell", "prompt": format!(": {typed}; echo typed-$((40+2))")}),
    ))["terminal"]
        .as_u64()
        .unwrap();
    app.until_screen(shell, "typed-42");
    sampler.finish(&format!("{what}: typed prompt"));

    // A prompt passed as the program's last argument.
    let argument = marker("arg");
    let exec = app.spawn(placed(
        environment,
        json!({"profile": "exec", "prompt": argument,
               "command": ["sh", "-c", "test -n \"$1\" && echo \"arg-$((40+2))\"; sleep 30", "sh"]}),
    ))["terminal"]
        .as_u64()
        .unwrap();
    app.until_screen(exec, "arg-42");

    let log = app.log();
    assert!(!log.is_empty(), "{what}: the app logs at trace");
    for (name, value) in [
        ("env", &secret),
        ("typed prompt", &typed),
        ("prompt", &argument),
    ] {
        assert!(
            !log.contains(value.as_str()),
            "{what}: the {name} is in the app's log"
        );
    }
    for id in [id, shell, exec] {
        app.request(json!({"Close": {"target": id}}));
    }
}

#[test]
fn on_the_pty_host_secrets_stay_off_command_lines_and_out_of_the_log() {
    let app = App::start_logged(&[], "trace");
    secrets_stay_hidden(&app, None, "pty");
}

#[test]
fn on_the_tmux_host_secrets_stay_off_command_lines_and_out_of_the_log() {
    let app = App::launch(Launch {
        config: Some(TMUX),
        rust_log: "trace",
        ..Launch::default()
    });
    let first = app.spawn_sh("sleep 30");
    let _server = TmuxServer::of(&app, first);
    secrets_stay_hidden(&app, None, "tmux");
}

#[test]
fn on_an_ssh_host_secrets_stay_off_command_lines_and_out_of_the_log() {
    let sshd = Sshd::start();
    let (app, _remote) = app_with_host_logged(&sshd, "trace");
    let env = app.request(json!({"CreateWorktree": {"name": "far-secret", "host": "far"}}));
    assert_eq!(env["Environment"]["host"], "far", "{env}");
    secrets_stay_hidden(&app, Some("far-secret"), "ssh");
    // The launcher that held the values removed itself once read (in the
    // app's folders on the host: remote-<pid>, or its tmux folder).
    let base = sshd.dir.path().join("home/.krad-ade");
    let left: Vec<_> = std::fs::read_dir(&base)
        .unwrap()
        .flatten()
        .flat_map(|dir| std::fs::read_dir(dir.path()).unwrap().flatten())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".launch"))
        .collect();
    assert!(left.is_empty(), "launchers left on the host: {left:?}");
}
