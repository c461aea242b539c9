//! The tmux host: [`TmuxHost`] runs each terminal in a tmux server of the app's
//! own (`tmux -L <socket>`), one session per terminal, so that terminals outlive
//! the app: a restarted app finds them again ([`TerminalHost::survivors`]) and
//! takes them back ([`TerminalHost::adopt`]) with their screens.
//!
//! Per terminal, one tmux client in control mode (`tmux -C attach-session`)
//! carries everything, read by a thread of its own:
//!
//! * the pane's output arrives as `%output` lines (bytes, with control characters
//!   and backslashes as octal escapes) and feeds the same output pipeline as the
//!   PTY host: screen, signals, transcript, attachers;
//! * input goes in with `send-keys -H` (each byte as hex), and a bracketed paste
//!   (what Send writes) through a tmux buffer and `paste-buffer -p`, which adds
//!   the paste markers only when the program asked for them — tmux knows, also
//!   for a terminal taken back after a restart, when krad could not have seen it;
//! * `resize-window` resizes; `%layout-change` tells when someone else did (a
//!   user attached with `tmux attach`), and the screen follows;
//! * commands are answered in order (`%begin` … `%end` / `%error`).
//!
//! Exits: the server runs with `remain-on-exit on` and a `pane-died` hook that
//! renames the window `krad-dead`. The client sees `%window-renamed`, reads the
//! pane's `pane_dead_status` / `pane_dead_signal`, takes the final screen from
//! tmux (tmux drops the output it had not yet passed to control clients when a
//! pane dies — a program's last words — but its screen has them), and once every
//! byte of output was parsed sends `Exited` and kills the session. A pane that
//! dies while the app is away stays dead, with its status and last screen, until
//! a restarted app takes it back.
//!
//! Starting a terminal: `new-session` with a placeholder program (`cat`), then
//! the control client attaches, then `respawn-pane -k` starts the real program
//! through that client — so its very first byte is seen, and the environment
//! (which may hold a token) travels on the client's stdin, never on a command
//! line. Taking a pane back: the client attaches, then asks in one command line
//! for the pane's cursor and modes and `capture-pane -p -e`; tmux queues pane
//! output and command answers in one order, so output before the answers is in
//! the capture and output after them is new: nothing is lost or shown twice.

use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::sync::{mpsc, oneshot};

use crate::output::{self, SharedScreen};
use crate::pty::DEFAULT_TERM;
use crate::screen::Screen;
use crate::{
    AdoptSpec, Attachment, ExitStatus, NativeAttach, Snapshot, SpawnError, SpawnSpec, Survivor,
    Terminal, TerminalEvent, TerminalHost,
};

/// Every terminal's session is named this, then its id.
const SESSION_PREFIX: &str = "krad-";
/// The pane option holding the app's id for the terminal.
const ID_OPTION: &str = "@krad-terminal";
/// The name the `pane-died` hook gives a window whose program ended.
const DEAD_NAME: &str = "krad-dead";
/// How long tmux may take to answer a command the host waits for.
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes per `send-keys -H` command.
const KEYS_PER_COMMAND: usize = 256;
/// Bytes per `set-buffer` command.
const PASTE_PER_COMMAND: usize = 2048;
/// Lines of tmux history a taken-back terminal's scrollback is rebuilt from, at most.
const HISTORY_LINES: usize = 10_000;

/// The settings of the app's own tmux server (it never reads the user's
/// `~/.tmux.conf`): panes stay after their program ends (so a restarted app
/// learns how it ended), and the `pane-died` hook tells the app (see
/// [`config`]).
const CONFIG: &str = "\
# Written by krad for its own tmux server; rewritten at each start.
set -g remain-on-exit on
set -g remain-on-exit-format ''
set -g automatic-rename off
set -g allow-rename off
set -g history-limit 10000
set -s escape-time 10
";

/// Runs terminals in a tmux server of the app's own.
///
/// One server per repository (`tmux -L <socket>`; [`TmuxHost::socket_for`]
/// derives the name), started on first use with krad's settings. The programs
/// inherit the tmux server's environment (the app's, when the app started it),
/// minus `spec.env_remove`, plus `spec.env`; `TERM` is
/// [`DEFAULT_TERM`](crate::pty::DEFAULT_TERM) unless the spec sets it.
///
/// Methods that talk to tmux block the calling thread for the few milliseconds
/// tmux takes to answer (they never wait on the async runtime).
#[derive(Debug)]
pub struct TmuxHost {
    socket: String,
    config: PathBuf,
    configured: std::sync::Once,
}

impl TmuxHost {
    /// A host for the server `socket` (`tmux -L`), with its settings written to
    /// `config`. Fails when tmux cannot be run.
    pub fn new(socket: impl Into<String>, config: impl Into<PathBuf>) -> Result<Self, SpawnError> {
        let socket = socket.into();
        let config = config.into();
        let version = Command::new("tmux")
            .arg("-V")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| {
                SpawnError::Host(format!(
                    "the tmux terminal host needs tmux, which cannot be run ({e}); install it \
                     (e.g. `apt-get install tmux`) or use the default host"
                ))
            })?;
        if !version.status.success() {
            return Err(SpawnError::Host("`tmux -V` failed".into()));
        }
        write_private(&config, self::config(&socket).as_bytes())
            .map_err(|e| SpawnError::Host(format!("cannot write {}: {e}", config.display())))?;
        Ok(Self {
            socket,
            config,
            configured: std::sync::Once::new(),
        })
    }

    /// The socket name for the repository at `root`: `krad-<directory name>-<hash
    /// of the path>`, so each repository's app has its own server.
    pub fn socket_for(root: &Path) -> String {
        let name: String = root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .take(24)
            .collect();
        let hash = fnv1a(root.as_os_str().as_encoded_bytes());
        format!("krad-{name}-{:08x}", hash & 0xffff_ffff)
    }

    /// The server's socket name (`tmux -L`).
    pub fn socket(&self) -> &str {
        &self.socket
    }

    /// A `tmux` command for this server.
    fn command(&self) -> Command {
        let mut command = Command::new("tmux");
        command
            .arg("-L")
            .arg(&self.socket)
            .arg("-f")
            .arg(&self.config)
            // Never nested in (or confused with) a tmux the app itself runs in.
            .env_remove("TMUX")
            .env_remove("TMUX_PANE")
            .stdin(Stdio::null());
        command
    }

    /// Runs tmux with `args`; its output, or what it said on stderr.
    fn run(&self, args: &[&str]) -> Result<String, String> {
        let output = self
            .command()
            .args(args)
            .output()
            .map_err(|e| format!("cannot run tmux: {e}"))?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&output.stderr).trim().to_owned())
        }
    }

    /// Once per host: a server that was already running (started by an earlier
    /// app) gets this app's settings too. A server started later reads them with
    /// `-f`.
    fn configure(&self) {
        self.configured.call_once(|| {
            let config = self.config.to_string_lossy().into_owned();
            if let Err(error) = self.run(&["source-file", &config])
                && !no_server(&error)
            {
                tracing::warn!(socket = %self.socket, %error, "cannot apply krad's tmux settings");
            }
        });
    }

    /// Every pane of the server that holds a krad terminal: id, pane, window,
    /// session, dead.
    fn panes(&self) -> Result<Vec<PaneInfo>, SpawnError> {
        self.configure();
        let format = format!(
            "#{{{ID_OPTION}}}\t#{{pane_id}}\t#{{window_id}}\t#{{session_name}}\t#{{pane_dead}}"
        );
        let listed = match self.run(&["list-panes", "-a", "-F", &format]) {
            Ok(listed) => listed,
            Err(error) if no_server(&error) => return Ok(Vec::new()),
            Err(error) => return Err(SpawnError::Host(format!("tmux list-panes: {error}"))),
        };
        Ok(listed
            .lines()
            .filter_map(|line| {
                let mut fields = line.split('\t');
                let id = fields.next()?.parse::<u64>().ok()?;
                let pane = fields.next()?.to_owned();
                let window = fields.next()?.to_owned();
                let session = fields.next()?.to_owned();
                let dead = fields.next()? == "1";
                Some(PaneInfo {
                    id,
                    pane,
                    window,
                    session,
                    dead,
                })
            })
            .collect())
    }

    fn spawn_terminal(
        &self,
        spec: SpawnSpec,
        events: mpsc::Sender<TerminalEvent>,
    ) -> Result<TmuxTerminal, SpawnError> {
        let Some(program) = spec.argv.first() else {
            return Err(SpawnError::Program {
                program: String::new(),
                source: io::Error::new(io::ErrorKind::InvalidInput, "no program given"),
            });
        };
        if !spec.cwd.is_dir() {
            return Err(SpawnError::NoDirectory(spec.cwd));
        }
        find_program(program, &spec.cwd, &spec.env)?;
        self.configure();
        let (cols, rows) = (spec.cols.max(1), spec.rows.max(1));
        let session = session_name(spec.id);
        // A session of this id can only be an orphan of a run that died while
        // starting it (ids are never reused).
        let _ = self.run(&["kill-session", "-t", &format!("={session}")]);
        let cwd = spec.cwd.to_string_lossy().replace('#', "##");
        let created = self
            .run(&[
                "new-session",
                "-d",
                "-s",
                &session,
                "-n",
                &session,
                "-x",
                &cols.to_string(),
                "-y",
                &rows.to_string(),
                "-c",
                &cwd,
                "-P",
                "-F",
                "#{pane_id}\t#{window_id}",
                "cat",
                ";",
                "set-option",
                "-p",
                "-t",
                &format!("={session}:"),
                ID_OPTION,
                &spec.id.to_string(),
            ])
            .map_err(|e| SpawnError::Host(format!("tmux new-session: {e}")))?;
        let mut ids = created.trim().split('\t');
        let (Some(pane), Some(window)) = (ids.next(), ids.next()) else {
            return Err(SpawnError::Host(format!(
                "tmux new-session printed {created:?}"
            )));
        };
        let info = PaneInfo {
            id: spec.id,
            pane: pane.to_owned(),
            window: window.to_owned(),
            session,
            dead: false,
        };
        let terminal = TmuxTerminal::start(
            self,
            &info,
            (cols, rows),
            spec.scrollback_lines,
            spec.transcript.clone(),
            events,
            false,
        )
        .inspect_err(|_| self.discard(spec.id))?;
        if let Err(error) = terminal.respawn(&spec, &cwd) {
            terminal.shared.detach();
            self.discard(spec.id);
            return Err(error);
        }
        tracing::debug!(terminal = spec.id, pid = ?terminal.pid(), argv = ?spec.argv, "tmux terminal started");
        Ok(terminal)
    }
}

impl TerminalHost for TmuxHost {
    fn spawn(
        &self,
        spec: SpawnSpec,
        events: mpsc::Sender<TerminalEvent>,
    ) -> Result<Arc<dyn Terminal>, SpawnError> {
        Ok(Arc::new(self.spawn_terminal(spec, events)?))
    }

    fn restart_safe(&self) -> bool {
        true
    }

    fn survivors(&self) -> Result<Vec<Survivor>, SpawnError> {
        Ok(self
            .panes()?
            .into_iter()
            .map(|p| Survivor {
                id: p.id,
                alive: !p.dead,
            })
            .collect())
    }

    fn adopt(
        &self,
        spec: AdoptSpec,
        events: mpsc::Sender<TerminalEvent>,
    ) -> Result<Arc<dyn Terminal>, SpawnError> {
        let Some(info) = self.panes()?.into_iter().find(|p| p.id == spec.id) else {
            return Err(SpawnError::Host(format!(
                "terminal {} is no longer in tmux",
                spec.id
            )));
        };
        let terminal = TmuxTerminal::start(
            self,
            &info,
            (80, 24),
            spec.scrollback_lines,
            spec.transcript,
            events,
            true,
        )?;
        tracing::debug!(terminal = spec.id, pid = ?terminal.pid(), dead = info.dead, "tmux terminal taken back");
        Ok(Arc::new(terminal))
    }

    fn discard(&self, id: u64) {
        let _ = self.run(&["kill-session", "-t", &format!("={}", session_name(id))]);
    }
}

/// The server's settings: [`CONFIG`], and the `pane-died` hook. Commands a hook
/// runs notify no control client, so the hook runs a separate tmux client that
/// renames the window: its `%window-renamed` is what tells the app.
fn config(socket: &str) -> String {
    let tmux = std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("tmux"))
                .find(|p| p.is_file())
        })
        .map(|p| p.to_string_lossy().into_owned())
        .filter(|p| p.bytes().all(|b| b.is_ascii_alphanumeric() || b"/-_.+".contains(&b)))
        .unwrap_or_else(|| "tmux".to_owned());
    format!(
        "{CONFIG}set-hook -g pane-died \"run-shell -b '{tmux} -L {socket} rename-window -t \\\"#{{window_id}}\\\" {DEAD_NAME}'\"\n"
    )
}

/// A pane holding a krad terminal, as `list-panes` shows it.
#[derive(Debug, Clone)]
struct PaneInfo {
    id: u64,
    pane: String,
    window: String,
    session: String,
    dead: bool,
}

/// A terminal of a [`TmuxHost`].
#[derive(Debug)]
struct TmuxTerminal {
    id: u64,
    pane: String,
    window: String,
    session: String,
    socket: String,
    shared: Arc<Shared>,
}

/// What a terminal's handle and its reader thread share.
#[derive(Debug)]
struct Shared {
    screen: Arc<SharedScreen>,
    control: Control,
    exit: OnceLock<ExitStatus>,
    pid: OnceLock<u32>,
    /// The control client, until the reader thread reaps it.
    client: Mutex<Option<Child>>,
    /// The handle let go of a live terminal: its client ends, its program runs on.
    detached: AtomicBool,
}

impl Shared {
    /// Ends the control client without touching the pane (the program runs on).
    fn detach(&self) {
        self.detached.store(true, Ordering::SeqCst);
        self.control.close();
        if let Some(client) = lock(&self.client).as_mut() {
            let _ = client.kill();
        }
    }
}

impl TmuxTerminal {
    /// Attaches a control client to the pane's session and starts its reader.
    /// `adopting`: the pane runs (or ran) already; its screen is captured before
    /// this returns.
    fn start(
        host: &TmuxHost,
        info: &PaneInfo,
        (cols, rows): (u16, u16),
        scrollback_lines: usize,
        transcript: Option<PathBuf>,
        events: mpsc::Sender<TerminalEvent>,
        adopting: bool,
    ) -> Result<Self, SpawnError> {
        let screen = Arc::new(SharedScreen::new(Screen::new(cols, rows, scrollback_lines)));
        let mut client = host
            .command()
            .args(["-C", "attach-session", "-t", &format!("={}", info.session)])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| SpawnError::Host(format!("cannot start a tmux client: {e}")))?;
        let (Some(stdin), Some(stdout)) = (client.stdin.take(), client.stdout.take()) else {
            let _ = client.kill();
            return Err(SpawnError::Host("the tmux client has no pipes".into()));
        };
        let output = match output::start(info.id, Arc::clone(&screen), transcript, events.clone())
        {
            Ok(output) => output,
            Err(error) => {
                let _ = client.kill();
                let _ = client.wait();
                return Err(SpawnError::Host(format!(
                    "cannot start the output thread: {error}"
                )));
            }
        };
        let shared = Arc::new(Shared {
            screen,
            control: Control::new(stdin),
            exit: OnceLock::new(),
            pid: OnceLock::new(),
            client: Mutex::new(Some(client)),
            detached: AtomicBool::new(false),
        });
        let (seeded, seeded_rx) = std_mpsc::channel();
        let reader = Reader {
            id: info.id,
            pane: info.pane.clone(),
            window: info.window.clone(),
            session: info.session.clone(),
            shared: Arc::clone(&shared),
            chunks: Some(output.chunks),
            parsed: Some(output.parsed),
            events,
            skip_output: adopting,
            seed: None,
            seeded: adopting.then_some(seeded),
            scrollback_lines,
            exit_queries: 0,
            final_status: None,
        };
        let thread = std::thread::Builder::new()
            .name(format!("krad-tmux-{}", info.id))
            .spawn(move || reader.run(stdout));
        if let Err(error) = thread {
            shared.detach();
            return Err(SpawnError::Host(format!(
                "cannot start the tmux reader: {error}"
            )));
        }
        let terminal = Self {
            id: info.id,
            pane: info.pane.clone(),
            window: info.window.clone(),
            session: info.session.clone(),
            socket: host.socket.clone(),
            shared,
        };
        if adopting {
            let sent = terminal
                .shared
                .control
                .send(seed_commands(&terminal.pane, scrollback_lines));
            let result = match sent {
                Ok(()) => seeded_rx
                    .recv_timeout(REPLY_TIMEOUT)
                    .unwrap_or_else(|_| Err("tmux did not show the pane in time".into())),
                Err(error) => Err(error.to_string()),
            };
            if let Err(error) = result {
                terminal.shared.detach();
                return Err(SpawnError::Host(format!(
                    "cannot take terminal {} back: {error}",
                    info.id
                )));
            }
        }
        Ok(terminal)
    }

    /// Starts the real program in place of the placeholder, through the control
    /// client (so that the environment never shows on a command line).
    fn respawn(&self, spec: &SpawnSpec, cwd: &str) -> Result<(), SpawnError> {
        let mut commands = Vec::new();
        for key in &spec.env_remove {
            commands.push((
                format!(
                    "set-environment -t ={} -r {}",
                    self.session,
                    quote(key.as_bytes())
                ),
                Reply::Ignore,
            ));
        }
        let mut respawn = format!(
            "respawn-pane -k -t {} -c {}",
            self.pane,
            quote(cwd.as_bytes())
        );
        let names_term = spec.env_remove.iter().any(|k| k == "TERM")
            || spec.env.iter().any(|(k, _)| k == "TERM");
        if !names_term {
            respawn.push_str(&format!(" -e TERM={DEFAULT_TERM}"));
        }
        for (key, value) in &spec.env {
            respawn.push_str(" -e ");
            respawn.push_str(&quote(format!("{key}={value}").as_bytes()));
        }
        respawn.push_str(" --");
        // One argument would go through the shell; `env` runs it as it is.
        if spec.argv.len() == 1 {
            respawn.push_str(" env --");
        }
        for arg in &spec.argv {
            respawn.push(' ');
            respawn.push_str(&quote(arg.as_bytes()));
        }
        let (respawned, respawned_rx) = std_mpsc::channel();
        let (pid, pid_rx) = std_mpsc::channel();
        commands.push((respawn, Reply::Wait(respawned)));
        commands.push((
            format!("display-message -p -t {} '#{{pane_pid}}'", self.pane),
            Reply::Wait(pid),
        ));
        self.shared
            .control
            .send(commands)
            .map_err(|e| SpawnError::Host(format!("cannot talk to tmux: {e}")))?;
        let answer = |rx: std_mpsc::Receiver<_>| {
            rx.recv_timeout(REPLY_TIMEOUT)
                .unwrap_or_else(|_| Err("tmux did not answer in time".to_owned()))
        };
        answer(respawned_rx).map_err(|e| {
            SpawnError::Host(format!("cannot start {:?} in tmux: {e}", spec.argv[0]))
        })?;
        let pid = answer(pid_rx).map_err(SpawnError::Host)?;
        if let Some(pid) = pid
            .first()
            .and_then(|line| String::from_utf8_lossy(line).trim().parse().ok())
        {
            let _ = self.shared.pid.set(pid);
        }
        Ok(())
    }

    fn ended(&self) -> bool {
        self.shared.exit.get().is_some()
    }
}

impl Drop for TmuxTerminal {
    fn drop(&mut self) {
        // The handle is gone (the app let go of the terminal, or is stopping):
        // the client goes, the program runs on in tmux.
        if !self.ended() {
            self.shared.detach();
        }
    }
}

impl Terminal for TmuxTerminal {
    fn id(&self) -> u64 {
        self.id
    }

    fn pid(&self) -> Option<u32> {
        self.shared.pid.get().copied()
    }

    fn write(&self, bytes: Vec<u8>) -> oneshot::Receiver<io::Result<()>> {
        let (reply, receiver) = oneshot::channel();
        if self.ended() {
            let _ = reply.send(Err(ended()));
            return receiver;
        }
        let mut lines = Vec::new();
        let (paste, keys) = split_paste(&bytes);
        if let Some(paste) = paste.filter(|p| !p.is_empty()) {
            let buffer = format!("krad-{}", self.id);
            for (i, part) in paste.chunks(PASTE_PER_COMMAND).enumerate() {
                let append = if i == 0 { "" } else { " -a" };
                lines.push(format!(
                    "set-buffer{append} -b {buffer} {}",
                    quote(part)
                ));
            }
            lines.push(format!(
                "paste-buffer -p -r -d -b {buffer} -t {}",
                self.pane
            ));
        }
        for part in keys.chunks(KEYS_PER_COMMAND) {
            let mut line = format!("send-keys -t {} -H", self.pane);
            for byte in part {
                line.push_str(&format!(" {byte:02x}"));
            }
            lines.push(line);
        }
        if lines.is_empty() {
            let _ = reply.send(Ok(()));
            return receiver;
        }
        let state = Arc::new(WriteState {
            reply: Mutex::new(Some(reply)),
        });
        let count = lines.len();
        let commands = lines
            .into_iter()
            .enumerate()
            .map(|(i, line)| {
                (
                    line,
                    Reply::Write {
                        state: Arc::clone(&state),
                        last: i + 1 == count,
                    },
                )
            })
            .collect();
        // A failure already answered the receiver.
        let _ = self.shared.control.send(commands);
        receiver
    }

    fn resize(&self, cols: u16, rows: u16) -> io::Result<()> {
        let (cols, rows) = (cols.max(1), rows.max(1));
        if self.ended() {
            return Err(ended());
        }
        // The screen first, as on the PTY host: the program's redraw for the new
        // size must land on a screen of that size.
        self.shared.screen.with(|screen| screen.resize(cols, rows));
        self.shared.control.send(vec![(
            format!("resize-window -t {} -x {cols} -y {rows}", self.window),
            Reply::Ignore,
        )])
    }

    fn snapshot(&self, scrollback_lines: usize) -> Snapshot {
        self.shared
            .screen
            .with(|screen| screen.snapshot(scrollback_lines))
    }

    /// Always true: a paste is handed to tmux (`paste-buffer -p`), which brackets
    /// it only if the program asked for bracketed paste.
    fn bracketed_paste(&self) -> bool {
        true
    }

    fn close(&self, grace: Duration) {
        if self.ended() {
            return;
        }
        let Some(pid) = self.pid().and_then(pgid) else {
            return;
        };
        let id = self.id;
        tracing::debug!(terminal = id, "closing the tmux terminal: SIGHUP");
        if let Err(error) = signal_group(pid, Signal::SIGHUP) {
            tracing::debug!(terminal = id, %error, "cannot send SIGHUP");
        }
        let shared = Arc::clone(&self.shared);
        let spawned = std::thread::Builder::new()
            .name(format!("krad-tmux-close-{id}"))
            .spawn(move || {
                let deadline = Instant::now() + grace;
                while Instant::now() < deadline {
                    if shared.exit.get().is_some() && killpg(pid, None) == Err(Errno::ESRCH) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                match signal_group(pid, Signal::SIGKILL) {
                    Ok(()) => {
                        tracing::debug!(terminal = id, "still there after the grace: SIGKILL")
                    }
                    Err(Errno::ESRCH) => {}
                    Err(error) => tracing::debug!(terminal = id, %error, "cannot send SIGKILL"),
                }
            });
        if let Err(error) = spawned {
            tracing::warn!(terminal = id, %error, "cannot wait for the grace; SIGKILL now");
            let _ = signal_group(pid, Signal::SIGKILL);
        }
    }

    fn exit_status(&self) -> Option<ExitStatus> {
        self.shared.exit.get().copied()
    }

    fn attach(&self) -> Option<Attachment> {
        Some(self.shared.screen.attach())
    }

    fn native_attach(&self) -> Option<NativeAttach> {
        Some(NativeAttach::Tmux {
            socket: self.socket.clone(),
            session: self.session.clone(),
        })
    }
}

/// What becomes of the answer to a command sent to the control client.
#[derive(Debug)]
enum Reply {
    /// Nothing.
    Ignore,
    /// Handed to a thread that waits for it.
    Wait(std_mpsc::Sender<Result<Vec<Vec<u8>>, String>>),
    /// One command of a write: an error answers the write; the last one's
    /// success does.
    Write { state: Arc<WriteState>, last: bool },
    /// The pane's exit status, asked once its window was renamed `krad-dead`.
    Dead,
    /// The pane's size, cursor and modes, to take it back or once it ended.
    SeedInfo,
    /// The pane's screen (`capture-pane`), after [`Reply::SeedInfo`].
    Seed,
}

impl Reply {
    /// The command could not be sent, or its client ended.
    fn fail(self, why: &str) {
        match self {
            Reply::Wait(sender) => {
                let _ = sender.send(Err(why.to_owned()));
            }
            Reply::Write { state, .. } => state.answer(Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                why.to_owned(),
            ))),
            Reply::Ignore | Reply::Dead | Reply::SeedInfo | Reply::Seed => {}
        }
    }
}

/// The pending answer of one write.
#[derive(Debug)]
struct WriteState {
    reply: Mutex<Option<oneshot::Sender<io::Result<()>>>>,
}

impl WriteState {
    fn answer(&self, result: io::Result<()>) {
        if let Some(reply) = lock(&self.reply).take() {
            let _ = reply.send(result);
        }
    }
}

/// The control client's input, and the answers its commands are owed, in order.
#[derive(Debug)]
struct Control {
    inner: Mutex<ControlInner>,
}

#[derive(Debug)]
struct ControlInner {
    stdin: Option<ChildStdin>,
    pending: VecDeque<Reply>,
}

impl Control {
    fn new(stdin: ChildStdin) -> Self {
        Self {
            inner: Mutex::new(ControlInner {
                stdin: Some(stdin),
                pending: VecDeque::new(),
            }),
        }
    }

    /// Sends commands, one a line, together. An empty line adds no command: its
    /// reply is owed by the line before (a command sequence answers once per
    /// command). Fails them all if the client is gone.
    fn send(&self, commands: Vec<(String, Reply)>) -> io::Result<()> {
        let mut inner = lock(&self.inner);
        let inner = &mut *inner;
        let Some(stdin) = inner.stdin.as_mut() else {
            for (_, reply) in commands {
                reply.fail("the tmux terminal has ended");
            }
            return Err(ended());
        };
        let mut text = String::new();
        for (line, _) in &commands {
            if !line.is_empty() {
                text.push_str(line);
                text.push('\n');
            }
        }
        // The replies are owed before the reader can see an answer: it takes
        // them under the same lock.
        let count = commands.len();
        let mut replies = Vec::with_capacity(count);
        for (_, reply) in commands {
            replies.push(reply);
        }
        inner.pending.extend(replies);
        match stdin.write_all(text.as_bytes()).and_then(|()| stdin.flush()) {
            Ok(()) => Ok(()),
            Err(error) => {
                inner.stdin = None;
                let at = inner.pending.len() - count;
                for reply in inner.pending.drain(at..) {
                    reply.fail("cannot write to the tmux client");
                }
                Err(error)
            }
        }
    }

    /// The reply owed to the next answer.
    fn next_reply(&self) -> Option<Reply> {
        lock(&self.inner).pending.pop_front()
    }

    /// No more commands; every reply still owed fails.
    fn close(&self) {
        let pending: Vec<Reply> = {
            let mut inner = lock(&self.inner);
            inner.stdin = None;
            inner.pending.drain(..).collect()
        };
        for reply in pending {
            reply.fail("the tmux terminal has ended");
        }
    }
}

/// The pane's state when it is taken back.
#[derive(Debug, Default)]
struct SeedInfo {
    size: (u16, u16),
    cursor: (u16, u16),
    pid: Option<u32>,
    dead: Option<ExitStatus>,
    alternate: bool,
    application_cursor: bool,
    application_keypad: bool,
    cursor_visible: bool,
}

/// The reader thread of one terminal's control client.
struct Reader {
    id: u64,
    pane: String,
    window: String,
    session: String,
    shared: Arc<Shared>,
    /// To the output pipeline; dropped once the program ended.
    chunks: Option<mpsc::Sender<Vec<u8>>>,
    /// Resolves once every chunk sent was parsed.
    parsed: Option<oneshot::Receiver<()>>,
    events: mpsc::Sender<TerminalEvent>,
    /// Taking the pane back: its output so far is in the capture to come.
    skip_output: bool,
    seed: Option<SeedInfo>,
    /// Told once a taken-back pane's screen is in place.
    seeded: Option<std_mpsc::Sender<Result<(), String>>>,
    scrollback_lines: usize,
    /// How many times the exit status was asked for.
    exit_queries: u32,
    /// The program ended with this; its final screen is on its way.
    final_status: Option<ExitStatus>,
}

impl Reader {
    fn run(mut self, stdout: ChildStdout) {
        let mut stdout = BufReader::new(stdout);
        let mut line = Vec::new();
        // The lines of the answer being read, and whether it answers us.
        let mut block: Option<(bool, Vec<Vec<u8>>)> = None;
        loop {
            line.clear();
            match stdout.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if line.last() == Some(&b'\n') {
                line.pop();
            }
            if let Some((ours, lines)) = &mut block {
                let end = line.starts_with(b"%end ");
                if end || line.starts_with(b"%error ") {
                    let (ours, lines) = (*ours, std::mem::take(lines));
                    block = None;
                    if ours {
                        self.answer(end, lines);
                    }
                } else {
                    lines.push(line.clone());
                }
                continue;
            }
            if let Some(rest) = line.strip_prefix(b"%begin ") {
                // `%begin time number flags`: flags 1 for the client's own commands.
                let ours = rest
                    .rsplit(|&b| b == b' ')
                    .next()
                    .and_then(|f| std::str::from_utf8(f).ok())
                    .and_then(|f| f.parse::<u32>().ok())
                    .is_some_and(|f| f & 1 == 1);
                block = Some((ours, Vec::new()));
            } else if let Some(rest) = line.strip_prefix(b"%output ") {
                self.output(rest);
            } else if let Some(rest) = line.strip_prefix(b"%window-renamed ") {
                let text = String::from_utf8_lossy(rest);
                if let Some((window, name)) = text.split_once(' ')
                    && window == self.window
                    && name == DEAD_NAME
                {
                    self.ask_exit();
                }
            } else if let Some(rest) = line.strip_prefix(b"%layout-change ") {
                self.layout(&String::from_utf8_lossy(rest));
            }
        }
        // The client ended: the session was killed (after the exit, or by someone
        // else), the server went away, or the handle let go of the terminal.
        self.shared.control.close();
        if let Some(mut client) = lock(&self.shared.client).take() {
            let _ = client.kill();
            let _ = client.wait();
        }
        if let Some(seeded) = self.seeded.take() {
            let _ = seeded.send(Err("the tmux client ended".into()));
        }
        if self.shared.exit.get().is_none() && !self.shared.detached.load(Ordering::SeqCst) {
            tracing::debug!(
                terminal = self.id,
                "the tmux session ended without an exit status"
            );
            let status = self.final_status.take().unwrap_or(ExitStatus {
                code: None,
                signal: None,
            });
            self.finish(status, None);
        }
    }

    fn output(&mut self, rest: &[u8]) {
        let Some(space) = rest.iter().position(|&b| b == b' ') else {
            return;
        };
        if &rest[..space] != self.pane.as_bytes() || self.skip_output {
            return;
        }
        let bytes = unescape(&rest[space + 1..]);
        if let Some(chunks) = &self.chunks
            && !bytes.is_empty()
        {
            // Back-pressure: tmux keeps the output while the parser catches up.
            let _ = chunks.blocking_send(bytes);
        }
    }

    fn layout(&self, rest: &str) {
        // `@window layout visible-layout flags`, a layout being `csum,WxH,x,y…`.
        let mut fields = rest.split(' ');
        if fields.next() != Some(self.window.as_str()) {
            return;
        }
        let size = fields
            .next()
            .and_then(|layout| layout.split(',').nth(1))
            .and_then(|size| size.split_once('x'))
            .and_then(|(c, r)| Some((c.parse::<u16>().ok()?, r.parse::<u16>().ok()?)));
        if let Some((cols, rows)) = size {
            self.shared.screen.with(|screen| {
                if screen.size() != (cols, rows) {
                    screen.resize(cols, rows);
                }
            });
        }
    }

    fn ask_exit(&mut self) {
        self.exit_queries += 1;
        let _ = self.shared.control.send(vec![(
            format!(
                "display-message -p -t {} '#{{pane_dead}}\t#{{pane_dead_status}}\t#{{pane_dead_signal}}'",
                self.pane
            ),
            Reply::Dead,
        )]);
    }

    /// An answer came: `ok` unless `%error`.
    fn answer(&mut self, ok: bool, lines: Vec<Vec<u8>>) {
        let Some(reply) = self.shared.control.next_reply() else {
            return;
        };
        match reply {
            Reply::Ignore => {}
            Reply::Wait(sender) => {
                let result = if ok {
                    Ok(lines)
                } else {
                    Err(lossy_lines(&lines))
                };
                let _ = sender.send(result);
            }
            Reply::Write { state, last } => {
                if !ok {
                    state.answer(Err(io::Error::other(format!(
                        "tmux: {}",
                        lossy_lines(&lines)
                    ))));
                } else if last {
                    state.answer(Ok(()));
                }
            }
            Reply::Dead => self.dead(ok, &lines),
            Reply::SeedInfo => match ok.then(|| parse_seed_info(&lines)).flatten() {
                Some(info) => self.seed = Some(info),
                None => self.seed_failed(format!(
                    "tmux could not describe the pane: {}",
                    lossy_lines(&lines)
                )),
            },
            Reply::Seed => {
                if ok {
                    self.seed(&lines);
                } else {
                    self.seed_failed(format!(
                        "tmux could not capture the pane: {}",
                        lossy_lines(&lines)
                    ));
                }
            }
        }
    }

    fn seed_failed(&mut self, why: String) {
        if let Some(seeded) = self.seeded.take() {
            let _ = seeded.send(Err(why));
        }
        if let Some(status) = self.final_status.take() {
            self.finish(status, None);
        }
    }

    /// Puts the pane's screen, as tmux has it, in place: when taking a pane back
    /// (then follows its output), and when its program ended.
    fn seed(&mut self, lines: &[Vec<u8>]) {
        let Some(info) = self.seed.take() else {
            return;
        };
        if let Some(pid) = info.pid {
            let _ = self.shared.pid.set(pid);
        }
        let (_, rows) = info.size;
        let mut bytes = Vec::new();
        if info.alternate {
            bytes.extend_from_slice(b"\x1b[?1049h");
        }
        // History lines first scroll off into the scrollback; the last `rows`
        // lines are the screen.
        let keep = lines.len().min(self.scrollback_lines + usize::from(rows));
        for (i, line) in lines[lines.len() - keep..].iter().enumerate() {
            if i > 0 {
                bytes.extend_from_slice(b"\r\n");
            }
            bytes.extend_from_slice(line);
        }
        bytes.extend_from_slice(b"\x1b[0m");
        bytes.extend_from_slice(
            format!("\x1b[{};{}H", info.cursor.1 + 1, info.cursor.0 + 1).as_bytes(),
        );
        if info.application_cursor {
            bytes.extend_from_slice(b"\x1b[?1h");
        }
        if info.application_keypad {
            bytes.extend_from_slice(b"\x1b=");
        }
        if !info.cursor_visible {
            bytes.extend_from_slice(b"\x1b[?25l");
        }
        if let Some(seeded) = self.seeded.take() {
            // Taking the pane back: its screen, then its output from here on.
            self.replace_screen(info.size, &bytes);
            self.skip_output = false;
            let _ = seeded.send(Ok(()));
            if let Some(status) = info.dead {
                self.finish(status, None);
            }
        } else if let Some(status) = self.final_status.take() {
            self.finish(status, Some((info.size, bytes)));
        }
    }

    /// Replaces the screen with one of `size` showing `bytes` (the title stays).
    fn replace_screen(&self, (cols, rows): (u16, u16), bytes: &[u8]) {
        let scrollback = self.scrollback_lines;
        self.shared.screen.with(|screen| {
            let title = screen.title().to_owned();
            *screen = Screen::new(cols, rows, scrollback);
            screen.process(bytes);
            if !title.is_empty() {
                screen.process(format!("\x1b]2;{title}\x07").as_bytes());
            }
        });
    }

    fn dead(&mut self, ok: bool, lines: &[Vec<u8>]) {
        let text = lines.first().map(|l| String::from_utf8_lossy(l).into_owned());
        let Some(text) = text.filter(|_| ok) else {
            return;
        };
        let mut fields = text.split('\t');
        if fields.next() != Some("1") {
            // A rename of a live pane (its placeholder's end): name it back.
            let _ = self.shared.control.send(vec![(
                format!("rename-window -t {} {}", self.window, self.session),
                Reply::Ignore,
            )]);
            return;
        }
        let status = ExitStatus {
            code: fields.next().and_then(|c| c.parse().ok()),
            signal: fields.next().and_then(|s| s.parse().ok()),
        };
        // tmux may see the end of the output before the process's status: ask
        // again, briefly.
        if status.code.is_none() && status.signal.is_none() && self.exit_queries < 40 {
            std::thread::sleep(Duration::from_millis(25));
            self.ask_exit();
            return;
        }
        // tmux drops the output it had not yet passed to control clients when a
        // pane dies, but its screen has it: the final screen comes from there.
        self.final_status = Some(status);
        if self
            .shared
            .control
            .send(seed_commands(&self.pane, self.scrollback_lines))
            .is_err()
        {
            self.finish(status, None);
        }
    }

    /// The program ended: once its output is parsed (and the final screen, if
    /// given, is in place), records the status, sends `Exited` (last) and lets
    /// tmux forget the pane.
    fn finish(&mut self, status: ExitStatus, screen: Option<((u16, u16), Vec<u8>)>) {
        if self.shared.exit.get().is_some() {
            return;
        }
        drop(self.chunks.take());
        if let Some(parsed) = self.parsed.take() {
            // Resolves (with an error) once the output thread is done.
            let _ = parsed.blocking_recv();
        }
        if let Some((size, bytes)) = screen {
            self.replace_screen(size, &bytes);
        }
        let _ = self.shared.exit.set(status);
        tracing::debug!(terminal = self.id, ?status, "tmux terminal ended");
        let _ = self.events.blocking_send(TerminalEvent::Exited(status));
        let _ = self.shared.control.send(vec![(
            format!("kill-session -t ={}", self.session),
            Reply::Ignore,
        )]);
    }
}

fn seed_commands(pane: &str, scrollback_lines: usize) -> Vec<(String, Reply)> {
    let format = [
        "#{pane_width}",
        "#{pane_height}",
        "#{cursor_x}",
        "#{cursor_y}",
        "#{pane_pid}",
        "#{pane_dead}",
        "#{pane_dead_status}",
        "#{pane_dead_signal}",
        "#{alternate_on}",
        "#{keypad_cursor_flag}",
        "#{keypad_flag}",
        "#{cursor_flag}",
    ]
    .join("\t");
    let history = scrollback_lines.min(HISTORY_LINES);
    let line = format!(
        "display-message -p -t {pane} {format} ; capture-pane -p -e -t {pane} -S -{history}",
        format = quote(format.as_bytes()),
    );
    vec![(line, Reply::SeedInfo), (String::new(), Reply::Seed)]
}

fn parse_seed_info(lines: &[Vec<u8>]) -> Option<SeedInfo> {
    let text = String::from_utf8_lossy(lines.first()?).into_owned();
    let fields: Vec<&str> = text.split('\t').collect();
    let number = |i: usize| fields.get(i).and_then(|f| f.parse::<u16>().ok());
    let flag = |i: usize| fields.get(i) == Some(&"1");
    let dead = flag(5).then(|| ExitStatus {
        code: fields.get(6).and_then(|c| c.parse().ok()),
        signal: fields.get(7).and_then(|s| s.parse().ok()),
    });
    Some(SeedInfo {
        size: (number(0)?, number(1)?),
        cursor: (number(2).unwrap_or(0), number(3).unwrap_or(0)),
        pid: fields.get(4).and_then(|p| p.parse().ok()),
        dead,
        alternate: flag(8),
        application_cursor: flag(9),
        application_keypad: flag(10),
        cursor_visible: fields.get(11) != Some(&"0"),
    })
}

/// Splits what a write carries into a bracketed paste (its text, without the
/// markers) and the keys around it (before it nothing is expected; after it, the
/// Enter that Send may add).
fn split_paste(bytes: &[u8]) -> (Option<&[u8]>, Vec<u8>) {
    const START: &[u8] = b"\x1b[200~";
    const END: &[u8] = b"\x1b[201~";
    if let Some(rest) = bytes.strip_prefix(START)
        && let Some(end) = rest.windows(END.len()).position(|w| w == END)
    {
        return (Some(&rest[..end]), rest[end + END.len()..].to_vec());
    }
    (None, bytes.to_vec())
}

/// A tmux command-language string: double-quoted, every byte but plain ASCII
/// letters, digits and a few safe marks written as an octal escape (so that no
/// `$`, `~`, `#`, quote or newline means anything to tmux).
fn quote(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 2);
    out.push('"');
    for &b in bytes {
        if b.is_ascii_alphanumeric() || b"-_./:=,+%@^ ".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("\\{b:03o}"));
        }
    }
    out.push('"');
    out
}

/// The bytes of an `%output` value: `\ooo` octal escapes, everything else as is.
fn unescape(value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len());
    let mut i = 0;
    while i < value.len() {
        if value[i] == b'\\'
            && let Some(digits) = value.get(i + 1..i + 4)
            && digits.iter().all(|d| (b'0'..=b'7').contains(d))
        {
            let byte = digits
                .iter()
                .fold(0u32, |n, d| n * 8 + u32::from(d - b'0'));
            out.push(byte as u8);
            i += 4;
        } else {
            out.push(value[i]);
            i += 1;
        }
    }
    out
}

fn lossy_lines(lines: &[Vec<u8>]) -> String {
    lines
        .iter()
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect::<Vec<_>>()
        .join("; ")
}

fn session_name(id: u64) -> String {
    format!("{SESSION_PREFIX}{id}")
}

/// Whether tmux said no server runs on the socket.
fn no_server(error: &str) -> bool {
    error.contains("no server running") || error.contains("error connecting")
}

/// Checks that `program` can be run, as the PTY host finds out by running it:
/// tmux would only show a dead pane.
fn find_program(
    program: &str,
    cwd: &Path,
    env: &[(String, String)],
) -> Result<(), SpawnError> {
    use std::os::unix::fs::PermissionsExt as _;
    let runnable = |path: &Path| {
        std::fs::metadata(path)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let found = if program.contains('/') {
        runnable(&cwd.join(program))
    } else {
        let path = env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| std::ffi::OsString::from(v))
            .or_else(|| std::env::var_os("PATH"))
            .unwrap_or_default();
        std::env::split_paths(&path).any(|dir| runnable(&cwd.join(dir).join(program)))
    };
    if found {
        Ok(())
    } else {
        Err(SpawnError::Program {
            program: program.to_owned(),
            source: io::Error::new(io::ErrorKind::NotFound, "no such program"),
        })
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)
}

/// FNV-1a, 64 bits: a hash that stays the same across builds.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn ended() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "the terminal has ended")
}

/// Signals the program's process group — or the program alone, when it has no
/// group yet (tmux's child between `fork` and `setsid`; the signal waits for it).
fn signal_group(pid: Pid, signal: Signal) -> nix::Result<()> {
    match killpg(pid, signal) {
        Err(Errno::ESRCH) => nix::sys::signal::kill(pid, signal),
        other => other,
    }
}

/// The process group of the program with `pid` (tmux makes it lead its own).
fn pgid(pid: u32) -> Option<Pid> {
    i32::try_from(pid)
        .ok()
        .filter(|&p| p > 0)
        .map(Pid::from_raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_values_unescape() {
        assert_eq!(unescape(b"a\\015\\012b\\134c"), b"a\r\nb\\c");
        assert_eq!(unescape(b"\\033[31mred"), b"\x1b[31mred");
        // Not an escape: kept as it is.
        assert_eq!(unescape(b"x\\9y\\"), b"x\\9y\\");
        assert_eq!(unescape("é".as_bytes()), "é".as_bytes());
    }

    #[test]
    fn quoting_leaves_tmux_nothing_to_expand() {
        assert_eq!(quote(b"A=b c"), "\"A=b c\"");
        assert_eq!(quote(b"$HOME ~ #{x} \"'\n"), "\"\\044HOME \\176 \\043\\173x\\175 \\042\\047\\012\"");
        assert_eq!(quote("é".as_bytes()), "\"\\303\\251\"");
    }

    #[test]
    fn pastes_are_split_from_keys() {
        let (paste, keys) = split_paste(b"\x1b[200~a\nb\x1b[201~\r");
        assert_eq!(paste, Some(&b"a\nb"[..]));
        assert_eq!(keys, b"\r");
        let (paste, keys) = split_paste(b"ls\r");
        assert_eq!(paste, None);
        assert_eq!(keys, b"ls\r");
        let (paste, keys) = split_paste(b"\x1b[200~unterminated");
        assert_eq!(paste, None);
        assert_eq!(keys, b"\x1b[200~unterminated");
    }

    #[test]
    fn socket_names_are_stable_and_safe() {
        let a = TmuxHost::socket_for(Path::new("/home/me/src/my app"));
        assert_eq!(a, TmuxHost::socket_for(Path::new("/home/me/src/my app")));
        assert!(a.starts_with("krad-my_app-"), "{a}");
        assert_ne!(a, TmuxHost::socket_for(Path::new("/other/my app")));
    }

    #[test]
    fn seed_info_parses() {
        let info =
            parse_seed_info(&[b"100\t30\t5\t2\t4242\t1\t\t15\t0\t1\t0\t1".to_vec()]).unwrap();
        assert_eq!(info.size, (100, 30));
        assert_eq!(info.cursor, (5, 2));
        assert_eq!(info.pid, Some(4242));
        assert_eq!(
            info.dead,
            Some(ExitStatus {
                code: None,
                signal: Some(15)
            })
        );
        assert!(info.application_cursor && !info.application_keypad && info.cursor_visible);
    }
}
