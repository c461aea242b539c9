//! The program runner behind Code: one program run to completion without a
//! terminal, in its own process group, its output captured up to a cap; and
//! where Code runs it ([`run_code`]: here, or on the environment's SSH host).
//!
//! * stdin: the given text is written (from its own future, so a program that
//!   never reads it cannot hang the run), then closed; without text, stdin is
//!   `/dev/null`.
//! * stdout and stderr: kept up to [`OUTPUT_CAP`] bytes each; the rest is read
//!   and dropped (so the program never blocks on a full pipe) and `truncated`
//!   is set. Both are decoded as lossy UTF-8.
//! * The process group: SIGKILL to the whole group on timeout, when the run is
//!   dropped (the client left, the bus's deadline passed), and once the program
//!   itself exits — whatever it left running in its group goes with it.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use krad_bus::protocol::{ApiError, CodeResultInfo, ErrorCode, MAX_RESPONSE};
use krad_bus::request::code::Code;
use krad_ext::ProcessGroup;
use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;
use tokio::sync::watch;

use crate::environments::Environments;
use crate::hosts::CheckPidFile;
use crate::profile::shell_quote;

/// The most bytes of stdout, and of stderr, a Code answer carries.
pub(crate) const OUTPUT_CAP: usize = 1024 * 1024;

/// How long output is still read after the program exited (a process that left
/// its group may hold the pipes open).
const DRAIN: Duration = Duration::from_secs(2);

/// Room kept in a response for everything around stdout and stderr.
const ANSWER_ROOM: usize = 64 * 1024;

/// One program to run.
#[derive(Debug, Clone)]
pub(crate) struct Program {
    /// The argv; the first is the program (looked up on PATH).
    pub argv: Vec<String>,
    /// Where it runs.
    pub cwd: PathBuf,
    /// Written to its stdin, which is then closed.
    pub stdin: Option<String>,
    /// Killed after this long.
    pub timeout: Duration,
    /// Variables added to its environment.
    pub env: Vec<(String, String)>,
    /// Where its pid is written once it started (a check samples its usage).
    pub pid: Option<std::sync::Arc<std::sync::atomic::AtomicU32>>,
}

/// What was kept of one output stream.
#[derive(Default)]
struct Capture {
    bytes: Vec<u8>,
    truncated: bool,
}

/// Runs the program to completion. An error means it could not be started.
pub(crate) async fn run(program: Program) -> std::io::Result<CodeResultInfo> {
    let Some((name, args)) = program.argv.split_first() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "no program",
        ));
    };
    let mut command = Command::new(name);
    command
        .args(args)
        .current_dir(&program.cwd)
        .stdin(if program.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    // The app's own bus variables are not the program's business.
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("KRAD_ADE_") {
            command.env_remove::<OsString>(key);
        }
    }
    command.envs(program.env.iter().map(|(k, v)| (k, v)));
    let started = Instant::now();
    let mut child = command.spawn()?;
    if let (Some(slot), Some(pid)) = (&program.pid, child.id()) {
        slot.store(pid, std::sync::atomic::Ordering::Relaxed);
    }
    let group = ProcessGroup::of(child.id());
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let (exited_tx, exited_rx) = watch::channel(false);

    let waiting = async {
        let status = tokio::select! {
            status = child.wait() => status,
            () = tokio::time::sleep(program.timeout) => {
                group.kill();
                child.wait().await
            }
        };
        let duration = started.elapsed();
        // Whatever it left in its group goes with it.
        group.kill();
        let _ = exited_tx.send(true);
        (status, duration)
    };
    let mut out = Capture::default();
    let mut err = Capture::default();
    let reading = until_drained(exited_rx.clone(), async {
        tokio::join!(read_into(stdout, &mut out), read_into(stderr, &mut err));
    });
    let writing = until_drained(exited_rx, async {
        if let (Some(mut pipe), Some(text)) = (stdin, program.stdin.as_deref()) {
            // A program that exits without reading it gets EPIPE here: fine.
            let _ = pipe.write_all(text.as_bytes()).await;
            let _ = pipe.shutdown().await;
        }
    });
    let ((status, duration), (), ()) = tokio::join!(waiting, reading, writing);
    let status = status?;
    let mut stdout = text_of(&out);
    let mut stderr = text_of(&err);
    let cut = fit_pair(&mut stdout, &mut stderr, MAX_RESPONSE - ANSWER_ROOM);
    Ok(CodeResultInfo {
        exit_code: status.code(),
        signal: status.signal(),
        stdout,
        stderr,
        duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
        truncated: out.truncated || err.truncated || cut,
    })
}

/// Runs `work` until it ends, or until [`DRAIN`] after the program exited.
async fn until_drained(mut exited: watch::Receiver<bool>, work: impl Future<Output = ()>) {
    tokio::select! {
        () = work => {}
        () = async {
            let _ = exited.wait_for(|&done| done).await;
            tokio::time::sleep(DRAIN).await;
        } => {}
    }
}

/// Reads a pipe to its end, keeping up to [`OUTPUT_CAP`] bytes.
async fn read_into(pipe: Option<impl AsyncRead + Unpin>, capture: &mut Capture) {
    let Some(mut pipe) = pipe else {
        return;
    };
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let room = OUTPUT_CAP - capture.bytes.len();
                if n > room {
                    capture.truncated = true;
                }
                capture.bytes.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
}

/// Lossy UTF-8; a character cut at the cap is dropped rather than replaced.
fn text_of(capture: &Capture) -> String {
    let mut bytes = capture.bytes.as_slice();
    if capture.truncated {
        bytes = without_cut_char(bytes);
    }
    String::from_utf8_lossy(bytes).into_owned()
}

/// Drops an incomplete UTF-8 sequence at the very end.
fn without_cut_char(bytes: &[u8]) -> &[u8] {
    for back in 1..=3.min(bytes.len()) {
        let byte = bytes[bytes.len() - back];
        if byte & 0xC0 == 0x80 {
            continue; // a continuation byte: look further back
        }
        let needs = match byte {
            b if b & 0xE0 == 0xC0 => 2,
            b if b & 0xF0 == 0xE0 => 3,
            b if b & 0xF8 == 0xF0 => 4,
            _ => 1,
        };
        if needs > back {
            return &bytes[..bytes.len() - back];
        }
        break;
    }
    bytes
}

/// Cuts the two texts so that, as JSON strings, they take at most `budget`
/// bytes together (control characters escape to six bytes each). True if cut.
fn fit_pair(a: &mut String, b: &mut String, budget: usize) -> bool {
    let (la, lb) = (json_len(a), json_len(b));
    if la + lb <= budget {
        return false;
    }
    let half = budget / 2;
    let (ta, tb) = if la <= half {
        (la, budget - la)
    } else if lb <= half {
        (budget - lb, lb)
    } else {
        (half, budget - half)
    };
    shrink(a, ta);
    shrink(b, tb);
    true
}

/// Shortens `text` until it serializes to at most `target` bytes.
fn shrink(text: &mut String, target: usize) {
    loop {
        let size = json_len(text);
        if size <= target || text.is_empty() {
            return;
        }
        let scaled = (text.len() as u128 * target.saturating_sub(2) as u128
            / size.saturating_sub(2).max(1) as u128) as usize;
        let mut keep = scaled.min(text.len() - 1);
        while !text.is_char_boundary(keep) {
            keep -= 1;
        }
        text.truncate(keep);
    }
}

fn json_len(text: &str) -> usize {
    serde_json::to_string(text).map_or(usize::MAX, |s| s.len())
}

/// Runs Code's program in its environment: here, with the environment's
/// ports, or on its SSH host through the host's control connection, with the
/// host's own `timeout` so that the program there ends with the run.
pub(crate) async fn run_code(
    environments: &Environments,
    request: Code,
) -> Result<CodeResultInfo, ApiError> {
    let timeout = Duration::from_secs(request.timeout_secs());
    run_in(
        environments,
        &request.environment,
        &request.command,
        Extra {
            stdin: request.stdin.clone(),
            timeout,
            env: Vec::new(),
            pid: None,
            host: OnHost::default(),
        },
    )
    .await
}

/// What a run in an environment takes besides its argv.
#[derive(Debug, Default)]
pub(crate) struct Extra {
    /// Written to its stdin, which is then closed.
    pub stdin: Option<String>,
    /// Killed after this long.
    pub timeout: Duration,
    /// Variables added to its environment (here only).
    pub env: Vec<(String, String)>,
    /// Where its pid is written once it started (here only).
    pub pid: Option<std::sync::Arc<std::sync::atomic::AtomicU32>>,
    /// What it runs with on an SSH host besides (there only).
    pub host: OnHost,
}

/// What a run on an SSH host adds around its command there (a variant's
/// check).
#[derive(Debug, Default)]
pub(crate) struct OnHost {
    /// Shell lines run first that set `"$@"` to a sandbox's command line:
    /// the command then runs as `"$@" COMMAND`.
    pub sandbox: Option<String>,
    /// A file written there with `<id> <pid> <run>` (the pid of the shell
    /// that runs the command), removed once it ended: the host's usage
    /// sampler counts the run's processes as terminal `id`'s, and notes what
    /// it saw of run `run` ([`crate::hosts::Host::check_usage`]).
    pub pid_file: Option<CheckPidFile>,
    /// Paths there removed once the command ended.
    pub remove: Vec<String>,
}

impl OnHost {
    fn is_empty(&self) -> bool {
        self.sandbox.is_none() && self.pid_file.is_none() && self.remove.is_empty()
    }
}

/// The script that runs `command` in `cwd` on a host with `exports` (the
/// environment's ports), ended by the host's `timeout` after `secs`, with
/// what `host` adds around it: its pid file and paths removed however the
/// script ends (a sandbox's lines that exit early too).
fn host_script(cwd: &str, exports: &str, secs: u64, command: &[String], host: &OnHost) -> String {
    let words: Vec<String> = command.iter().map(|word| shell_quote(word)).collect();
    let command = words.join(" ");
    let cwd = shell_quote(cwd);
    if host.is_empty() {
        return format!("cd {cwd} && {exports}exec timeout -s KILL {secs} {command}");
    }
    let mut script = format!("cd {cwd} || exit 1\n{exports}true\n");
    let mut remove: Vec<String> = host.remove.iter().map(|p| shell_quote(p)).collect();
    remove.extend(host.pid_file.iter().map(|file| shell_quote(&file.path)));
    if !remove.is_empty() {
        script += &format!(
            "krad_clean() {{ rm -rf -- {}; }}\ntrap krad_clean EXIT\n\
             trap 'exit 143' HUP INT TERM\n",
            remove.join(" ")
        );
    }
    if let Some(file) = &host.pid_file {
        script += &format!(
            "echo \"{} $$ {}\" > {} 2>/dev/null\n",
            file.terminal,
            file.run,
            shell_quote(&file.path)
        );
    }
    let sandboxed = match &host.sandbox {
        Some(lines) => {
            script += lines;
            "\"$@\" "
        }
        None => "",
    };
    script += &format!("timeout -s KILL {secs} {sandboxed}{command}\nexit $?\n");
    script
}

/// Runs `command` to completion in `environment`: here, with the
/// environment's ports, or on its SSH host through the host's control
/// connection, with the host's own `timeout` so that the program there ends
/// with the run. `failed` when it cannot start.
pub(crate) async fn run_in(
    environments: &Environments,
    environment: &str,
    command: &[String],
    extra: Extra,
) -> Result<CodeResultInfo, ApiError> {
    let cwd = environments.path(environment)?;
    let timeout = extra.timeout;
    let host = environments.host_of(environment)?;
    let mut env = extra.env;
    let (argv, cwd, pid) = match host {
        None => {
            crate::environments::ports::add_env(&mut env, &environments.ports(environment));
            (command.to_vec(), cwd, extra.pid)
        }
        // On a host: through its control connection, with the host's own
        // `timeout` so that the program there ends with the run.
        Some(host) => {
            host.connect().await?;
            let exports =
                crate::environments::ports::shell_exports(&environments.ports(environment));
            let script = host_script(
                &cwd.display().to_string(),
                &exports,
                timeout.as_secs() + 1,
                command,
                &extra.host,
            );
            let mut argv = vec!["ssh".to_owned()];
            argv.extend(host.ssh_args(false));
            argv.push("--".to_owned());
            // Several lines (a sandbox's among them): run by sh there,
            // whatever the login shell.
            argv.push(if extra.host.is_empty() {
                script
            } else {
                format!("sh -c {}", shell_quote(&script))
            });
            env.clear();
            (argv, environments.root().to_path_buf(), None)
        }
    };
    let job = Program {
        argv,
        cwd,
        stdin: extra.stdin,
        timeout,
        env,
        pid,
    };
    match run(job).await {
        Ok(result) => Ok(result),
        Err(e) => Err(ApiError::new(
            ErrorCode::Failed,
            format!(
                "cannot start {:?} in environment {:?}: {e}",
                command.first().map(String::as_str).unwrap_or_default(),
                environment
            ),
        )
        .with_detail(json!({
            "environment": environment,
            "command": command.first(),
        }))),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A host's script (run here by `sh`): the command's status, its pid
    /// file written while it runs, and the pid file and paths removed after
    /// it — a sandbox's lines that exit early too.
    #[tokio::test]
    async fn a_host_script_notes_its_pid_and_cleans_up_however_it_ends() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("7-0.check-pid").display().to_string();
        let home = dir.path().join("home");
        for (sandbox, command, status) in [
            (None, "cat \"$0\"; exit 3", Some(3)),
            (Some("set -- env\n"), "cat \"$0\"", Some(0)),
            (Some("exit 127\n"), "echo never", Some(127)),
        ] {
            std::fs::create_dir_all(&home).unwrap();
            let on = OnHost {
                sandbox: sandbox.map(str::to_owned),
                pid_file: Some(CheckPidFile {
                    path: pid_file.clone(),
                    terminal: 7,
                    run: 12,
                }),
                remove: vec![home.display().to_string()],
            };
            let argv = [
                "sh".to_owned(),
                "-c".to_owned(),
                command.to_owned(),
                pid_file.clone(),
            ];
            let script = host_script(&dir.path().display().to_string(), "", 20, &argv, &on);
            let done = run(program(&["sh", "-c", &script])).await.unwrap();
            assert_eq!(done.exit_code, status, "{script}\n{}", done.stderr);
            if status == Some(127) {
                assert!(!done.stdout.contains("never"), "{}", done.stdout);
            } else {
                let noted: Vec<&str> = done.stdout.split_whitespace().collect();
                assert_eq!((noted[0], noted[2]), ("7", "12"), "{}", done.stdout);
                assert!(noted[1].parse::<u32>().is_ok(), "{}", done.stdout);
            }
            assert!(!std::path::Path::new(&pid_file).exists(), "{script}");
            assert!(!home.exists(), "{script}");
        }
    }

    fn program(argv: &[&str]) -> Program {
        Program {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            cwd: std::env::temp_dir(),
            stdin: None,
            timeout: Duration::from_secs(20),
            env: Vec::new(),
            pid: None,
        }
    }

    #[tokio::test]
    async fn exit_codes_signals_and_output() {
        let done = run(program(&["sh", "-c", "echo out; echo err >&2; exit 3"]))
            .await
            .unwrap();
        assert_eq!(done.exit_code, Some(3));
        assert_eq!(done.signal, None);
        assert_eq!(done.stdout, "out\n");
        assert_eq!(done.stderr, "err\n");
        assert!(!done.truncated);
        let killed = run(program(&["sh", "-c", "kill -TERM $$"])).await.unwrap();
        assert_eq!(killed.exit_code, None);
        assert_eq!(killed.signal, Some(15));
    }

    #[tokio::test]
    async fn a_background_child_holding_the_pipes_does_not_hold_the_run() {
        let started = Instant::now();
        let done = run(program(&["sh", "-c", "sleep 30 & echo started"]))
            .await
            .unwrap();
        assert_eq!(done.stdout, "started\n");
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[tokio::test]
    async fn stdin_is_written_then_closed_and_never_hangs_the_run() {
        let mut cat = program(&["cat"]);
        cat.stdin = Some("hello\nworld".into());
        assert_eq!(run(cat).await.unwrap().stdout, "hello\nworld");
        let mut deaf = program(&["sh", "-c", "exit 0"]);
        deaf.stdin = Some("x".repeat(1024 * 1024));
        assert_eq!(run(deaf).await.unwrap().exit_code, Some(0));
    }

    #[tokio::test]
    async fn a_missing_program_cannot_start() {
        assert!(run(program(&["/nonexistent/krad-nothing"])).await.is_err());
    }

    #[test]
    fn a_cut_character_is_dropped() {
        let e = "é".as_bytes(); // C3 A9
        assert_eq!(without_cut_char(&[b'a', e[0]]), b"a");
        assert_eq!(without_cut_char(&[b'a', e[0], e[1]]), &[b'a', e[0], e[1]]);
        let euro = "€".as_bytes(); // 3 bytes
        assert_eq!(without_cut_char(&[b'a', euro[0], euro[1]]), b"a");
        assert_eq!(without_cut_char(b"abc"), b"abc");
    }

    #[test]
    fn escaped_output_is_cut_to_the_response_limit() {
        let mut a = "\u{1}".repeat(1000);
        let mut b = "ok".to_owned();
        assert!(fit_pair(&mut a, &mut b, 600));
        assert_eq!(b, "ok");
        assert!(json_len(&a) + json_len(&b) <= 600);
        assert!(!a.is_empty());
        let mut c = "short".to_owned();
        let mut d = "also".to_owned();
        assert!(!fit_pair(&mut c, &mut d, 600));
    }
}
