//! The tmux host: [`TmuxHost`] runs each terminal in a window of a tmux server of
//! the app's own (`tmux -L <socket>`, session `krad`), so that terminals outlive
//! the app: a restarted app finds them again ([`TerminalHost::survivors`]) and
//! takes them back ([`TerminalHost::adopt`]) with their screens.
//!
//! One tmux client in control mode (`tmux -C attach-session -t krad`) carries
//! everything, read by a thread of its own. (One client for all terminals: tmux
//! 3.3 crashes when control clients attach while sessions are being made.)
//!
//! * a pane's output arrives as `%output` lines (bytes, with control characters
//!   and backslashes as octal escapes) and feeds that terminal's output pipeline,
//!   the same as the PTY host's: screen, signals, transcript, attachers;
//! * input goes in with `send-keys -H` (each byte as hex), and a bracketed paste
//!   (what Send writes) through a tmux buffer and `paste-buffer -p`, which adds
//!   the paste markers only when the program asked for them — tmux knows, also
//!   for a terminal taken back after a restart, when krad could not have seen it;
//! * `resize-window` resizes; `%layout-change` tells when someone else did (a
//!   user attached with `tmux attach`), and the screen follows;
//! * commands are answered in order, one `%begin` … `%end` / `%error` block per
//!   command; a command that fails ends its command line.
//!
//! Starting a terminal: one command line through the control client opens its
//! window (so the client sees the program's very first byte, and the
//! environment, which may hold a token, never shows on a command line), sizes it
//! and tags its pane with the terminal's id. Taking a pane back: one command line
//! asks for the pane's size, cursor and modes and `capture-pane -p -e`; tmux
//! queues pane output and command answers in one order, so output before the
//! answers is in the capture and output after them is new: nothing is lost or
//! shown twice.
//!
//! Exits: the server runs with `remain-on-exit on` and a `pane-died` hook that
//! renames the window `krad-dead` (through a separate client: commands a hook
//! runs notify no control client). The client sees `%window-renamed`, reads the
//! pane's `pane_dead_status` / `pane_dead_signal`, takes the final screen from
//! tmux (tmux drops the output it had not yet passed to control clients when a
//! pane dies — a program's last words — but its screen has them), and once every
//! byte of output was parsed sends `Exited` and closes the window. A pane that
//! dies while the app is away stays dead, with its status and last screen, until
//! a restarted app takes it back.
//!
//! The one reader waits for each terminal's parser (back-pressure): a terminal
//! printing faster than it can be parsed delays the others' output (tmux keeps
//! it meanwhile), never their programs.

use std::collections::{HashMap, VecDeque};
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

/// The session every terminal's window lives in.
const SESSION: &str = "krad";
/// Every terminal's window is named this, then its id.
const WINDOW_PREFIX: &str = "krad-";
/// The pane option holding the app's id for the terminal.
const ID_OPTION: &str = "@krad-terminal";
/// The session's first window, which keeps it alive when no terminal does.
const PLACEHOLDER: &str = "krad-wait";
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
/// `~/.tmux.conf`): panes stay after their program ends, so that the app (or a
/// restarted one) learns how it ended; see [`config`] for the hook that tells.
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
/// derives the name), started on first use with krad's settings; every terminal
/// is a window of its session `krad`. The programs inherit the tmux server's
/// environment (the app's, when the app started it), minus `spec.env_remove`,
/// plus `spec.env`; `TERM` is [`DEFAULT_TERM`](crate::pty::DEFAULT_TERM) unless
/// the spec sets it.
///
/// Methods that talk to tmux block the calling thread for the few milliseconds
/// tmux takes to answer (they never wait on the async runtime).
#[derive(Debug)]
pub struct TmuxHost {
    socket: String,
    config: PathBuf,
    configured: std::sync::Once,
    /// The control client, once started (a new one if the last ended).
    connection: Mutex<Option<Arc<Connection>>>,
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
            connection: Mutex::new(None),
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

    /// Runs tmux with `args`; its output, or what it said on stderr. A server
    /// that was exiting as we came (its last session just ended) is started
    /// again.
    fn run(&self, args: &[&str]) -> Result<String, String> {
        let mut tries = 0;
        loop {
            let output = self
                .command()
                .args(args)
                .output()
                .map_err(|e| format!("cannot run tmux: {e}"))?;
            if output.status.success() {
                return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
            }
            let error = String::from_utf8_lossy(&output.stderr).trim().to_owned();
            tries += 1;
            if !error.contains("server exited unexpectedly") || tries == 5 {
                return Err(error);
            }
            std::thread::sleep(Duration::from_millis(20));
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

    /// The control client, started (with the server and its session) if need be.
    fn connection(&self) -> Result<Arc<Connection>, SpawnError> {
        let mut connection = lock(&self.connection);
        if let Some(live) = connection.as_ref().filter(|c| !c.ended()) {
            return Ok(Arc::clone(live));
        }
        self.configure();
        if self
            .run(&["has-session", "-t", &format!("={SESSION}")])
            .is_err()
        {
            self.run(&["new-session", "-d", "-s", SESSION, "-n", PLACEHOLDER, "cat"])
                .map_err(|e| SpawnError::Host(format!("tmux new-session: {e}")))?;
        }
        let started = Connection::start(self)?;
        *connection = Some(Arc::clone(&started));
        Ok(started)
    }

    /// Every pane of the server that holds a krad terminal.
    fn panes(&self) -> Result<Vec<PaneInfo>, SpawnError> {
        self.configure();
        let format = format!("#{{{ID_OPTION}}}\t#{{pane_id}}\t#{{window_id}}\t#{{pane_dead}}");
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
                let dead = fields.next()? == "1";
                Some(PaneInfo {
                    id,
                    pane,
                    window,
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
        let connection = self.connection()?;
        let (cols, rows) = (spec.cols.max(1), spec.rows.max(1));
        let terminal = TmuxTerminal::new(&connection, spec.id, (cols, rows), spec.scrollback_lines);
        let pipeline = terminal.pipeline(spec.transcript.clone(), events)?;
        let window = window_name(spec.id);
        let target = format!(":={window}");
        // A window of this id can only be an orphan of a run that died while
        // starting it (ids are never reused).
        let _ = self.run(&["kill-window", "-t", &format!("={SESSION}:={window}")]);
        // New windows take the session's default size: the program sees its own
        // from its first instant.
        let mut replies = vec![Reply::Ignore];
        let mut line = format!("set-option default-size {cols}x{rows} ; ");
        for key in &spec.env_remove {
            line.push_str(&format!("set-environment -r {} ; ", quote(key.as_bytes())));
            replies.push(Reply::Ignore);
        }
        let cwd = spec.cwd.to_string_lossy().replace('#', "##");
        line.push_str(&format!(
            "new-window -d -n {window} -c {} -P -F {}",
            quote(cwd.as_bytes()),
            quote(b"#{pane_id}\t#{window_id}\t#{pane_pid}"),
        ));
        let names_term = spec.env_remove.iter().any(|k| k == "TERM")
            || spec.env.iter().any(|(k, _)| k == "TERM");
        if !names_term {
            line.push_str(&format!(" -e TERM={DEFAULT_TERM}"));
        }
        for (key, value) in &spec.env {
            line.push_str(" -e ");
            line.push_str(&quote(format!("{key}={value}").as_bytes()));
        }
        line.push_str(" --");
        // One argument would go through the shell; `env` runs it as it is.
        if spec.argv.len() == 1 {
            line.push_str(" env --");
        }
        for arg in &spec.argv {
            line.push(' ');
            line.push_str(&quote(arg.as_bytes()));
        }
        let (created, created_rx) = std_mpsc::channel();
        replies.push(Reply::Created(Box::new(pipeline), created));
        // Sized by hand too, so that tmux leaves it that size.
        line.push_str(&format!(
            " ; resize-window -t {target} -x {cols} -y {rows} ; set-option -p -t {target} {ID_OPTION} {}",
            spec.id
        ));
        replies.push(Reply::Ignore);
        replies.push(Reply::Ignore);
        connection
            .control
            .send(vec![(line, replies)])
            .map_err(|e| SpawnError::Host(format!("cannot talk to tmux: {e}")))?;
        created_rx
            .recv_timeout(REPLY_TIMEOUT)
            .unwrap_or_else(|_| Err("tmux did not answer in time".to_owned()))
            .map_err(|e| {
                SpawnError::Host(format!("cannot start {:?} in tmux: {e}", spec.argv[0]))
            })?;
        crate::log_started("tmux terminal", spec.id, terminal.pid(), &spec.argv);
        Ok(terminal)
    }
}

impl Drop for TmuxHost {
    fn drop(&mut self) {
        // Its terminals run on in tmux, unfollowed (a later host takes them back).
        if let Some(connection) = lock(&self.connection).take() {
            connection.end();
        }
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
        let connection = self.connection()?;
        let terminal = TmuxTerminal::new(&connection, spec.id, (80, 24), spec.scrollback_lines);
        let _ = terminal.shared.pane.set(info.pane.clone());
        let _ = terminal.shared.window.set(info.window.clone());
        let mut pipeline = terminal.pipeline(spec.transcript, events)?;
        let (seeded, seeded_rx) = std_mpsc::channel();
        pipeline.seeded = Some(seeded);
        let (line, mut replies) = seed_line(&info.pane, spec.scrollback_lines);
        // The pipeline joins the reader with the first answer: what the pane
        // printed before it is in the capture.
        replies[0] = Reply::Adopt(Box::new(pipeline));
        connection
            .control
            .send(vec![(line, replies)])
            .map_err(|e| SpawnError::Host(format!("cannot talk to tmux: {e}")))?;
        seeded_rx
            .recv_timeout(REPLY_TIMEOUT)
            .unwrap_or_else(|_| Err("tmux did not show the pane in time".into()))
            .map_err(|e| SpawnError::Host(format!("cannot take terminal {} back: {e}", spec.id)))?;
        tracing::debug!(terminal = spec.id, pid = ?terminal.pid(), dead = info.dead, "tmux terminal taken back");
        Ok(Arc::new(terminal))
    }

    fn discard(&self, id: u64) {
        let _ = self.run(&[
            "kill-window",
            "-t",
            &format!("={SESSION}:={}", window_name(id)),
        ]);
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
        .filter(|p| {
            p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/-_.+".contains(&b))
        })
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
    dead: bool,
}

/// The control client and what it owes: one per host at a time.
#[derive(Debug)]
struct Connection {
    socket: String,
    control: Control,
    /// The client process, until the reader reaps it.
    client: Mutex<Option<Child>>,
    /// The tmux server's process.
    server: Option<Pid>,
    /// The programs followed and not yet ended: pane → pid (for the watchdog).
    followed: Mutex<HashMap<String, u32>>,
}

impl Connection {
    fn start(host: &TmuxHost) -> Result<Arc<Connection>, SpawnError> {
        let mut client = host
            .command()
            .args(["-C", "attach-session", "-t", &format!("={SESSION}")])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| SpawnError::Host(format!("cannot start a tmux client: {e}")))?;
        let (Some(stdin), Some(stdout)) = (client.stdin.take(), client.stdout.take()) else {
            let _ = client.kill();
            let _ = client.wait();
            return Err(SpawnError::Host("the tmux client has no pipes".into()));
        };
        let server = host
            .run(&["display-message", "-p", "#{pid}"])
            .ok()
            .and_then(|pid| pid.trim().parse::<i32>().ok())
            .map(Pid::from_raw);
        let connection = Arc::new(Connection {
            socket: host.socket.clone(),
            control: Control::new(stdin),
            client: Mutex::new(Some(client)),
            server,
            followed: Mutex::new(HashMap::new()),
        });
        let (attached, attached_rx) = std_mpsc::channel();
        let reader = Reader {
            connection: Arc::clone(&connection),
            terminals: HashMap::new(),
            attached: Some(attached),
        };
        let thread = std::thread::Builder::new()
            .name("krad-tmux".into())
            .spawn(move || reader.run(stdout));
        if let Err(error) = thread {
            connection.end();
            return Err(SpawnError::Host(format!(
                "cannot start the tmux reader: {error}"
            )));
        }
        // Commands sent before the client is attached could run before it is:
        // the output they cause would not reach it.
        if attached_rx.recv_timeout(REPLY_TIMEOUT).is_err() {
            connection.end();
            return Err(SpawnError::Host(format!(
                "the tmux client did not attach to the session {SESSION}"
            )));
        }
        let watched = Arc::downgrade(&connection);
        if let Err(error) = std::thread::Builder::new()
            .name("krad-tmux-watch".into())
            .spawn(move || watch(&watched))
        {
            tracing::warn!(%error, "cannot watch the tmux terminals' programs");
        }
        Ok(connection)
    }

    fn ended(&self) -> bool {
        self.control.closed()
    }

    /// Ends the client (the programs run on in tmux).
    fn end(&self) {
        self.control.close();
        if let Some(client) = lock(&self.client).as_mut() {
            let _ = client.kill();
        }
    }
}

/// A terminal of a [`TmuxHost`].
#[derive(Debug)]
struct TmuxTerminal {
    id: u64,
    connection: Arc<Connection>,
    shared: Arc<Shared>,
}

/// What a terminal's handle and the reader share.
#[derive(Debug)]
struct Shared {
    id: u64,
    screen: Arc<SharedScreen>,
    scrollback_lines: usize,
    /// The program's pane (`%N`) and window (`@N`), once known.
    pane: OnceLock<String>,
    window: OnceLock<String>,
    exit: OnceLock<ExitStatus>,
    pid: OnceLock<u32>,
    /// The handle let go of a live terminal: the reader forgets it, its program
    /// runs on.
    detached: AtomicBool,
}

impl Shared {
    fn pane(&self) -> &str {
        self.pane.get().map_or("", String::as_str)
    }

    fn window(&self) -> &str {
        self.window.get().map_or("", String::as_str)
    }
}

impl TmuxTerminal {
    fn new(
        connection: &Arc<Connection>,
        id: u64,
        (cols, rows): (u16, u16),
        scrollback_lines: usize,
    ) -> Self {
        Self {
            id,
            connection: Arc::clone(connection),
            shared: Arc::new(Shared {
                id,
                screen: Arc::new(SharedScreen::new(Screen::new(cols, rows, scrollback_lines))),
                scrollback_lines,
                pane: OnceLock::new(),
                window: OnceLock::new(),
                exit: OnceLock::new(),
                pid: OnceLock::new(),
                detached: AtomicBool::new(false),
            }),
        }
    }

    /// The terminal's output pipeline, for the reader to feed once it knows the
    /// pane.
    fn pipeline(
        &self,
        transcript: Option<PathBuf>,
        events: mpsc::Sender<TerminalEvent>,
    ) -> Result<Pipeline, SpawnError> {
        let output = output::start(
            self.id,
            Arc::clone(&self.shared.screen),
            transcript,
            events.clone(),
        )
        .map_err(|e| SpawnError::Host(format!("cannot start the output thread: {e}")))?;
        Ok(Pipeline {
            shared: Arc::clone(&self.shared),
            chunks: Some(output.chunks),
            parsed: Some(output.parsed),
            events,
            skip_output: false,
            seed: None,
            seeded: None,
            exit_queries: 0,
            final_status: None,
        })
    }

    fn ended(&self) -> bool {
        self.shared.exit.get().is_some()
    }
}

impl Drop for TmuxTerminal {
    fn drop(&mut self) {
        // The handle is gone (the app let go of the terminal, or is stopping):
        // the reader forgets it, the program runs on in tmux.
        self.shared.detached.store(true, Ordering::SeqCst);
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
        let pane = self.shared.pane();
        let mut lines = Vec::new();
        let (paste, keys) = split_paste(&bytes);
        if let Some(paste) = paste.filter(|p| !p.is_empty()) {
            let buffer = format!("krad-{}", self.id);
            for (i, part) in paste.chunks(PASTE_PER_COMMAND).enumerate() {
                let append = if i == 0 { "" } else { " -a" };
                lines.push(format!("set-buffer{append} -b {buffer} {}", quote(part)));
            }
            lines.push(format!("paste-buffer -p -r -d -b {buffer} -t {pane}"));
        }
        for part in keys.chunks(KEYS_PER_COMMAND) {
            let mut line = format!("send-keys -t {pane} -H");
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
                let reply = Reply::Write {
                    state: Arc::clone(&state),
                    last: i + 1 == count,
                };
                (line, vec![reply])
            })
            .collect();
        // A failure already answered the receiver.
        let _ = self.connection.control.send(commands);
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
        self.connection.control.send(vec![(
            format!(
                "resize-window -t {} -x {cols} -y {rows}",
                self.shared.window()
            ),
            vec![Reply::Ignore],
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
            socket: self.connection.socket.clone(),
            session: SESSION.to_owned(),
            window: self.shared.window().to_owned(),
        })
    }
}

/// What becomes of the answer to a command sent to the control client.
#[derive(Debug)]
enum Reply {
    /// Nothing.
    Ignore,
    /// A program's window opened (`pane window pid`): its pipeline joins the
    /// reader, then the spawning thread is told.
    Created(Box<Pipeline>, std_mpsc::Sender<Result<(), String>>),
    /// A pane being taken back: its pipeline joins the reader, with this answer
    /// (its size, cursor and modes; [`Reply::Seed`] follows).
    Adopt(Box<Pipeline>),
    /// One command of a write: an error answers the write; the last one's
    /// success does.
    Write { state: Arc<WriteState>, last: bool },
    /// A pane's exit status, asked once its window was renamed `krad-dead`.
    Dead(String),
    /// A pane's size, cursor and modes, once its program ended.
    SeedInfo(String),
    /// A pane's screen (`capture-pane`), after [`Reply::SeedInfo`] or
    /// [`Reply::Adopt`].
    Seed(String),
}

impl Reply {
    /// The command failed, was skipped, or the client ended.
    fn fail(self, why: &str) {
        match self {
            Reply::Created(_, sender) => {
                let _ = sender.send(Err(why.to_owned()));
            }
            Reply::Adopt(pipeline) => {
                if let Some(seeded) = &pipeline.seeded {
                    let _ = seeded.send(Err(why.to_owned()));
                }
            }
            Reply::Write { state, .. } => state.answer(Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                why.to_owned(),
            ))),
            Reply::Ignore | Reply::Dead(_) | Reply::SeedInfo(_) | Reply::Seed(_) => {}
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

/// The control client's input, and the answers its commands are owed: per
/// command line, one per command, in order.
#[derive(Debug)]
struct Control {
    inner: Mutex<ControlInner>,
}

#[derive(Debug)]
struct ControlInner {
    stdin: Option<ChildStdin>,
    pending: VecDeque<VecDeque<Reply>>,
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

    /// Sends command lines, together, each with the replies of its commands.
    /// Fails them all if the client is gone.
    fn send(&self, lines: Vec<(String, Vec<Reply>)>) -> io::Result<()> {
        let mut guard = lock(&self.inner);
        let inner = &mut *guard;
        let Some(stdin) = inner.stdin.as_mut() else {
            drop(guard);
            for reply in lines.into_iter().flat_map(|(_, replies)| replies) {
                reply.fail("the tmux client has ended");
            }
            return Err(ended());
        };
        let mut text = String::new();
        for (line, _) in &lines {
            text.push_str(line);
            text.push('\n');
        }
        // The replies are owed before the reader can see an answer: it takes
        // them under the same lock.
        let count = lines.len();
        inner.pending.extend(
            lines
                .into_iter()
                .map(|(_, replies)| VecDeque::from(replies)),
        );
        match stdin
            .write_all(text.as_bytes())
            .and_then(|()| stdin.flush())
        {
            Ok(()) => Ok(()),
            Err(error) => {
                inner.stdin = None;
                let at = inner.pending.len() - count;
                let failed: Vec<Reply> = inner.pending.drain(at..).flatten().collect();
                for reply in failed {
                    reply.fail("cannot write to the tmux client");
                }
                Err(error)
            }
        }
    }

    /// The reply owed to the next answer, and — when it is an error — the
    /// replies of the rest of its command line, which tmux skips.
    fn next_reply(&self, ok: bool) -> (Option<Reply>, Vec<Reply>) {
        let mut inner = lock(&self.inner);
        let Some(line) = inner.pending.front_mut() else {
            return (None, Vec::new());
        };
        let reply = line.pop_front();
        let skipped = if ok {
            Vec::new()
        } else {
            line.drain(..).collect()
        };
        if line.is_empty() {
            inner.pending.pop_front();
        }
        (reply, skipped)
    }

    fn closed(&self) -> bool {
        lock(&self.inner).stdin.is_none()
    }

    /// No more commands; every reply still owed fails.
    fn close(&self) {
        let pending: Vec<Reply> = {
            let mut inner = lock(&self.inner);
            inner.stdin = None;
            inner.pending.drain(..).flatten().collect()
        };
        for reply in pending {
            reply.fail("the tmux client has ended");
        }
    }
}

/// A pane's state when its screen is taken from tmux.
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

/// What the reader keeps of one terminal.
#[derive(Debug)]
struct Pipeline {
    shared: Arc<Shared>,
    /// To the output pipeline; dropped once the program ended.
    chunks: Option<mpsc::Sender<Vec<u8>>>,
    /// Resolves once every chunk sent was parsed.
    parsed: Option<oneshot::Receiver<()>>,
    events: mpsc::Sender<TerminalEvent>,
    /// Being taken back: its output so far is in the capture to come.
    skip_output: bool,
    seed: Option<SeedInfo>,
    /// Told once a taken-back pane's screen is in place.
    seeded: Option<std_mpsc::Sender<Result<(), String>>>,
    /// How many times the exit status was asked for.
    exit_queries: u32,
    /// The program ended with this; its final screen is on its way.
    final_status: Option<ExitStatus>,
}

/// The reader thread of the control client.
struct Reader {
    connection: Arc<Connection>,
    /// The terminals it feeds, by pane.
    terminals: HashMap<String, Pipeline>,
    /// Told once the client is attached.
    attached: Option<std_mpsc::Sender<()>>,
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
            // A pane's output is the program's (what a user typed, a prompt):
            // only its size is logged.
            match output_size(&line) {
                Some((pane, bytes)) => tracing::trace!(pane, bytes, "from tmux: %output"),
                None => tracing::trace!(line = %String::from_utf8_lossy(&line), "from tmux"),
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
                    && name == DEAD_NAME
                    && let Some(pane) = self.pane_of_window(window)
                {
                    ask_exit(&self.connection, &pane);
                }
            } else if let Some(rest) = line.strip_prefix(b"%layout-change ") {
                self.layout(&String::from_utf8_lossy(rest));
            } else if line.starts_with(b"%session-changed ")
                && let Some(attached) = self.attached.take()
            {
                let _ = attached.send(());
            }
        }
        // The client ended: the server went away (or was killed), or the host
        // let go of it. Terminals still followed end without a known status.
        self.connection.control.close();
        if let Some(mut client) = lock(&self.connection.client).take() {
            let _ = client.kill();
            let _ = client.wait();
        }
        for (_, mut pipeline) in self.terminals.drain() {
            if let Some(seeded) = pipeline.seeded.take() {
                let _ = seeded.send(Err("the tmux client ended".into()));
            }
            if pipeline.shared.exit.get().is_none()
                && !pipeline.shared.detached.load(Ordering::SeqCst)
            {
                tracing::debug!(
                    terminal = pipeline.shared.id,
                    "the tmux server went away without an exit status"
                );
                let status = pipeline.final_status.take().unwrap_or(ExitStatus {
                    code: None,
                    signal: None,
                });
                finish(&self.connection, pipeline, status, None);
            }
        }
    }

    fn pane_of_window(&self, window: &str) -> Option<String> {
        self.terminals
            .iter()
            .find(|(_, p)| p.shared.window() == window && !p.shared.detached.load(Ordering::SeqCst))
            .map(|(pane, _)| pane.clone())
    }

    fn output(&mut self, rest: &[u8]) {
        let Some(space) = rest.iter().position(|&b| b == b' ') else {
            return;
        };
        let pane = String::from_utf8_lossy(&rest[..space]);
        let Some(pipeline) = self.terminals.get(pane.as_ref()) else {
            return;
        };
        if pipeline.shared.detached.load(Ordering::SeqCst) {
            // The app let go of it: its program runs on, unfollowed.
            self.terminals.remove(pane.as_ref());
            return;
        }
        if pipeline.skip_output {
            return;
        }
        let bytes = unescape(&rest[space + 1..]);
        if let Some(chunks) = &pipeline.chunks
            && !bytes.is_empty()
        {
            // Back-pressure: tmux keeps the output while the parser catches up.
            let _ = chunks.blocking_send(bytes);
        }
    }

    fn layout(&self, rest: &str) {
        // `@window layout visible-layout flags`, a layout being `csum,WxH,x,y…`.
        let mut fields = rest.split(' ');
        let Some(window) = fields.next() else {
            return;
        };
        let Some(pipeline) = self
            .terminals
            .values()
            .find(|p| p.shared.window() == window)
        else {
            return;
        };
        let size = fields
            .next()
            .and_then(|layout| layout.split(',').nth(1))
            .and_then(|size| size.split_once('x'))
            .and_then(|(c, r)| Some((c.parse::<u16>().ok()?, r.parse::<u16>().ok()?)));
        if let Some((cols, rows)) = size {
            pipeline.shared.screen.with(|screen| {
                if screen.size() != (cols, rows) {
                    screen.resize(cols, rows);
                }
            });
        }
    }

    /// An answer came: `ok` unless `%error`.
    fn answer(&mut self, ok: bool, lines: Vec<Vec<u8>>) {
        let (reply, skipped) = self.connection.control.next_reply(ok);
        for reply in skipped {
            reply.fail("tmux skipped it after an error");
        }
        let Some(reply) = reply else {
            return;
        };
        match reply {
            Reply::Ignore => {}
            Reply::Created(pipeline, sender) => {
                let result = if ok {
                    self.created(*pipeline, &lines)
                } else {
                    Err(lossy_lines(&lines))
                };
                let _ = sender.send(result);
            }
            Reply::Adopt(mut pipeline) => {
                let info = ok.then(|| parse_seed_info(&lines)).flatten();
                let Some(info) = info else {
                    if let Some(seeded) = pipeline.seeded.take() {
                        let _ = seeded.send(Err(format!(
                            "tmux could not describe the pane: {}",
                            lossy_lines(&lines)
                        )));
                    }
                    return;
                };
                pipeline.skip_output = true;
                pipeline.seed = Some(info);
                let pane = pipeline.shared.pane().to_owned();
                self.terminals.insert(pane, *pipeline);
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
            Reply::Dead(pane) => self.dead(&pane, ok, &lines),
            Reply::SeedInfo(pane) => {
                let info = ok.then(|| parse_seed_info(&lines)).flatten();
                if let Some(pipeline) = self.terminals.get_mut(&pane) {
                    pipeline.seed = info;
                }
            }
            Reply::Seed(pane) => self.seed(&pane, ok.then_some(&lines[..])),
        }
    }

    /// A program's window opened: `pane window pid`.
    fn created(&mut self, pipeline: Pipeline, lines: &[Vec<u8>]) -> Result<(), String> {
        let text = lines
            .first()
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .unwrap_or_default();
        let mut fields = text.split('\t');
        let (Some(pane), Some(window)) = (fields.next(), fields.next()) else {
            return Err(format!("tmux new-window printed {text:?}"));
        };
        let shared = &pipeline.shared;
        let _ = shared.pane.set(pane.to_owned());
        let _ = shared.window.set(window.to_owned());
        if let Some(pid) = fields.next().and_then(|p| p.parse().ok()) {
            let _ = shared.pid.set(pid);
            lock(&self.connection.followed).insert(pane.to_owned(), pid);
        }
        self.terminals.insert(pane.to_owned(), pipeline);
        Ok(())
    }

    /// A pane's screen, as tmux has it: in place of the one taken back (then its
    /// output follows), or as the final one once its program ended.
    fn seed(&mut self, pane: &str, lines: Option<&[Vec<u8>]>) {
        let Some(pipeline) = self.terminals.get_mut(pane) else {
            return;
        };
        let info = pipeline.seed.take();
        let screen = match (info.as_ref(), lines) {
            (Some(info), Some(lines)) => Some((
                info.size,
                seed_bytes(info, lines, pipeline.shared.scrollback_lines),
            )),
            _ => None,
        };
        if let Some(info) = &info
            && let Some(pid) = info.pid
        {
            let _ = pipeline.shared.pid.set(pid);
        }
        if let Some(seeded) = pipeline.seeded.take() {
            // Taking the pane back.
            let Some((size, bytes)) = screen else {
                let _ = seeded.send(Err("tmux could not capture the pane".into()));
                self.terminals.remove(pane);
                return;
            };
            replace_screen(&pipeline.shared, size, &bytes);
            pipeline.skip_output = false;
            if let Some(pid) = pipeline.shared.pid.get() {
                lock(&self.connection.followed).insert(pane.to_owned(), *pid);
            }
            let _ = seeded.send(Ok(()));
            if let Some(status) = info.and_then(|i| i.dead)
                && let Some(pipeline) = self.terminals.remove(pane)
            {
                finish(&self.connection, pipeline, status, None);
            }
        } else if let Some(status) = pipeline.final_status.take()
            && let Some(pipeline) = self.terminals.remove(pane)
        {
            finish(&self.connection, pipeline, status, screen);
        }
    }

    fn dead(&mut self, pane: &str, ok: bool, lines: &[Vec<u8>]) {
        let text = lines
            .first()
            .map(|l| String::from_utf8_lossy(l).into_owned());
        let Some(text) = text.filter(|_| ok) else {
            return;
        };
        let Some(pipeline) = self.terminals.get_mut(pane) else {
            return;
        };
        let mut fields = text.split('\t');
        if fields.next() != Some("1") || pipeline.final_status.is_some() {
            return;
        }
        let status = ExitStatus {
            code: fields.next().and_then(|c| c.parse().ok()),
            signal: fields.next().and_then(|s| s.parse().ok()),
        };
        // tmux may see the end of the output before the process's status: ask
        // again, shortly (from another thread: this one reads for everyone).
        if status.code.is_none() && status.signal.is_none() && pipeline.exit_queries < 40 {
            pipeline.exit_queries += 1;
            let connection = Arc::clone(&self.connection);
            let pane = pane.to_owned();
            let asked = std::thread::Builder::new()
                .name("krad-tmux-ask".into())
                .spawn(move || {
                    std::thread::sleep(Duration::from_millis(25));
                    ask_exit(&connection, &pane);
                });
            if asked.is_ok() {
                return;
            }
        }
        // tmux drops the output it had not yet passed to control clients when a
        // pane dies, but its screen has it: the final screen comes from there.
        pipeline.final_status = Some(status);
        let (line, _) = seed_line(pane, pipeline.shared.scrollback_lines);
        let replies = vec![
            Reply::SeedInfo(pane.to_owned()),
            Reply::Seed(pane.to_owned()),
        ];
        if self.connection.control.send(vec![(line, replies)]).is_err()
            && let Some(pipeline) = self.terminals.remove(pane)
        {
            finish(&self.connection, pipeline, status, None);
        }
    }
}

/// How often the watchdog looks at the followed programs.
const WATCH_EVERY: Duration = Duration::from_millis(250);

/// The watchdog: tmux (3.3, with a control client) sometimes misses a
/// program's end — the process stays a zombie, unreaped, and the `pane-died`
/// hook never runs. A zombie makes the watchdog send the server the SIGCHLD it
/// missed; a program gone without a word makes it ask for the exit status.
fn watch(connection: &std::sync::Weak<Connection>) {
    let mut asked: HashMap<String, Instant> = HashMap::new();
    loop {
        std::thread::sleep(WATCH_EVERY);
        let Some(connection) = connection.upgrade() else {
            return;
        };
        if connection.ended() {
            return;
        }
        let followed = lock(&connection.followed).clone();
        asked.retain(|pane, _| followed.contains_key(pane));
        let mut nudge = false;
        for (pane, pid) in followed {
            match process_state(pid) {
                Some('Z') => nudge = true,
                Some(_) => {}
                None => {
                    let due = asked
                        .get(&pane)
                        .is_none_or(|at| at.elapsed() > Duration::from_secs(1));
                    if due {
                        asked.insert(pane.clone(), Instant::now());
                        ask_exit(&connection, &pane);
                    }
                }
            }
        }
        if nudge && let Some(server) = connection.server {
            let _ = nix::sys::signal::kill(server, Signal::SIGCHLD);
        }
    }
}

/// A process's state letter (`R`, `S`, `Z`…), or `None` once it is gone.
fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Asks for a pane's exit status.
fn ask_exit(connection: &Connection, pane: &str) {
    let format = quote(b"#{pane_dead}\t#{pane_dead_status}\t#{pane_dead_signal}");
    let _ = connection.control.send(vec![(
        format!("display-message -p -t {pane} {format}"),
        vec![Reply::Dead(pane.to_owned())],
    )]);
}

/// A program ended: once its output is parsed (and the final screen, if given,
/// is in place), records the status, sends `Exited` (last) and closes its
/// window. On a thread of its own: the reader goes on for the others.
fn finish(
    connection: &Arc<Connection>,
    mut pipeline: Pipeline,
    status: ExitStatus,
    screen: Option<((u16, u16), Vec<u8>)>,
) {
    lock(&connection.followed).remove(pipeline.shared.pane());
    let connection = Arc::clone(connection);
    let work = move || {
        drop(pipeline.chunks.take());
        if let Some(parsed) = pipeline.parsed.take() {
            // Resolves (with an error) once the output thread is done.
            let _ = parsed.blocking_recv();
        }
        let shared = &pipeline.shared;
        if let Some((size, bytes)) = screen {
            replace_screen(shared, size, &bytes);
        }
        // tmux may forget the pane now (before the exit is known: an app that
        // stops as soon as it is leaves no dead pane behind).
        let window = shared.window();
        if !window.is_empty() && !shared.detached.load(Ordering::SeqCst) {
            let _ = connection.control.send(vec![(
                format!("kill-window -t {window}"),
                vec![Reply::Ignore],
            )]);
        }
        if shared.exit.set(status).is_err() {
            return;
        }
        tracing::debug!(terminal = shared.id, ?status, "tmux terminal ended");
        let _ = pipeline.events.blocking_send(TerminalEvent::Exited(status));
    };
    if let Err(error) = std::thread::Builder::new()
        .name("krad-tmux-exit".into())
        .spawn(work)
    {
        tracing::error!(%error, "cannot finish a tmux terminal");
    }
}

/// Replaces a screen with one of `size` showing `bytes` (the title stays).
fn replace_screen(shared: &Shared, (cols, rows): (u16, u16), bytes: &[u8]) {
    let scrollback = shared.scrollback_lines;
    shared.screen.with(|screen| {
        let title = screen.title().to_owned();
        *screen = Screen::new(cols, rows, scrollback);
        screen.process(bytes);
        if !title.is_empty() {
            screen.process(format!("\x1b]2;{title}\x07").as_bytes());
        }
    });
}

/// What redraws a captured pane on a fresh screen: history lines first (they
/// scroll off into the scrollback), then the screen, cursor and modes.
fn seed_bytes(info: &SeedInfo, lines: &[Vec<u8>], scrollback_lines: usize) -> Vec<u8> {
    let (_, rows) = info.size;
    let mut bytes = Vec::new();
    if info.alternate {
        bytes.extend_from_slice(b"\x1b[?1049h");
    }
    let keep = lines.len().min(scrollback_lines + usize::from(rows));
    for (i, line) in lines[lines.len() - keep..].iter().enumerate() {
        if i > 0 {
            bytes.extend_from_slice(b"\r\n");
        }
        bytes.extend_from_slice(line);
    }
    bytes.extend_from_slice(b"\x1b[0m");
    bytes
        .extend_from_slice(format!("\x1b[{};{}H", info.cursor.1 + 1, info.cursor.0 + 1).as_bytes());
    if info.application_cursor {
        bytes.extend_from_slice(b"\x1b[?1h");
    }
    if info.application_keypad {
        bytes.extend_from_slice(b"\x1b=");
    }
    if !info.cursor_visible {
        bytes.extend_from_slice(b"\x1b[?25l");
    }
    bytes
}

/// Asks for a pane's state and screen in one command line, so that nothing the
/// program prints can fall between them: answered twice, state then screen.
fn seed_line(pane: &str, scrollback_lines: usize) -> (String, Vec<Reply>) {
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
    (
        line,
        vec![
            Reply::SeedInfo(pane.to_owned()),
            Reply::Seed(pane.to_owned()),
        ],
    )
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
            let byte = digits.iter().fold(0u32, |n, d| n * 8 + u32::from(d - b'0'));
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

/// The pane and payload size of an `%output` line (`%output %3 bytes…`).
fn output_size(line: &[u8]) -> Option<(&str, usize)> {
    let rest = line.strip_prefix(b"%output ")?;
    let space = rest.iter().position(|&b| b == b' ').unwrap_or(rest.len());
    let pane = std::str::from_utf8(&rest[..space]).ok()?;
    Some((pane, rest.len().saturating_sub(space + 1)))
}

fn window_name(id: u64) -> String {
    format!("{WINDOW_PREFIX}{id}")
}

/// Whether tmux said no server runs on the socket (or one without sessions,
/// about to exit).
fn no_server(error: &str) -> bool {
    error.contains("no server running")
        || error.contains("error connecting")
        || error.contains("no current target")
        || error.contains("server exited unexpectedly")
}

/// Checks that `program` can be run, as the PTY host finds out by running it:
/// tmux would only show a dead pane.
fn find_program(program: &str, cwd: &Path, env: &[(String, String)]) -> Result<(), SpawnError> {
    use std::os::unix::fs::PermissionsExt as _;
    let runnable = |path: &Path| {
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
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
        assert_eq!(
            quote(b"$HOME ~ #{x} \"'\n"),
            "\"\\044HOME \\176 \\043\\173x\\175 \\042\\047\\012\""
        );
        assert_eq!(quote("é".as_bytes()), "\"\\303\\251\"");
    }

    #[test]
    fn output_lines_are_logged_by_size_only() {
        assert_eq!(output_size(b"%output %3 secret\\015"), Some(("%3", 10)));
        assert_eq!(output_size(b"%output %12"), Some(("%12", 0)));
        assert_eq!(output_size(b"%begin 1 2 0"), None);
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

    #[test]
    fn a_failed_command_skips_the_rest_of_its_line() {
        let mut child = Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let control = Control::new(child.stdin.take().unwrap());
        let (reply, mut answered) = oneshot::channel();
        let state = Arc::new(WriteState {
            reply: Mutex::new(Some(reply)),
        });
        control
            .send(vec![
                (
                    "a ; b ; c".into(),
                    vec![
                        Reply::Ignore,
                        Reply::Ignore,
                        Reply::Write { state, last: true },
                    ],
                ),
                ("d".into(), vec![Reply::Dead("%1".into())]),
            ])
            .unwrap();
        assert!(matches!(control.next_reply(true), (Some(Reply::Ignore), ref s) if s.is_empty()));
        let (reply, skipped) = control.next_reply(false);
        assert!(matches!(reply, Some(Reply::Ignore)));
        assert_eq!(skipped.len(), 1);
        for reply in skipped {
            reply.fail("skipped");
        }
        assert!(answered.try_recv().unwrap().is_err());
        assert!(matches!(
            control.next_reply(true),
            (Some(Reply::Dead(_)), _)
        ));
        assert!(control.next_reply(true).0.is_none());
        control.close();
        assert!(control.closed());
        let _ = child.kill();
        let _ = child.wait();
    }
}
