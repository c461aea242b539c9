//! Terminal hosts: where the app's terminals live.
//!
//! A [`TerminalHost`] starts programs on terminals and hands back [`Terminal`]s.
//! Whatever the host (an in-process pseudo-terminal today, a tmux server later),
//! a terminal's output feeds the same [`screen`] model — a parsed screen with its
//! cursor, title and bounded scrollback — and the same signals (output, bell,
//! OSC 9/777 notifications, OSC 7501 agent states, title), and is copied to a transcript file.
//!
//! The app consumes each terminal's [`TerminalEvent`]s from a bounded channel:
//! frequent events (output, bell, title) are coalesced when the app is behind;
//! notifications, announced states and the final `Exited` are never lost (a
//! terminal whose app is far behind waits); a terminal's output never blocks the
//! app or other terminals.
//!
//! Attachers ([`Terminal::attach`]) get the screen as escape sequences that
//! redraw it, then the raw output from there on, from a broadcast that never
//! slows the terminal. A restart-safe host ([`TerminalHost::restart_safe`], the
//! [`tmux`] host) keeps terminals running when the app stops, and a restarted app
//! takes them back with [`TerminalHost::survivors`] and [`TerminalHost::adopt`].
//!
//! Logs name a terminal's program and how many arguments it has, never the
//! arguments (a prompt) nor its environment's values (API keys): see
//! [`program::log_started`] and [`ARGV_TARGET`]; a [`SpawnSpec`]'s `Debug` hides both.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::{broadcast, mpsc, oneshot};

mod output;
mod program;
pub mod pty;
pub mod screen;
mod start;
pub mod tmux;
mod transcript;

pub use output::ATTACH_BACKLOG;
pub use program::{ARGV_TARGET, log_full_argv};
pub use pty::PtyHost;
pub use tmux::TmuxHost;

/// Input bytes a terminal holds for a program that has not read them yet, at
/// most; a write past it is refused at once (`WouldBlock`), whole.
pub const MAX_QUEUED_INPUT: usize = 1024 * 1024;

/// What to start on a new terminal. Its `Debug` shows the program, the number
/// of arguments and the variables' names, never arguments or values.
#[derive(Clone)]
pub struct SpawnSpec {
    /// The app's id for the terminal (unique, never reused).
    pub id: u64,
    /// The program and its arguments; never empty.
    pub argv: Vec<String>,
    /// The working directory.
    pub cwd: PathBuf,
    /// Variables set for the program, on top of the app's own environment.
    pub env: Vec<(String, String)>,
    /// Variables of the app's environment the program must not inherit.
    pub env_remove: Vec<String>,
    /// Columns and rows.
    pub cols: u16,
    /// Rows.
    pub rows: u16,
    /// Where to append everything the program prints (raw bytes), if anywhere.
    pub transcript: Option<PathBuf>,
    /// Lines of scrollback kept in memory.
    pub scrollback_lines: usize,
}

impl std::fmt::Debug for SpawnSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let env: Vec<&str> = self.env.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("SpawnSpec")
            .field("id", &self.id)
            .field("program", &self.argv.first())
            .field("args", &self.argv.len().saturating_sub(1))
            .field("cwd", &self.cwd)
            .field("env", &env)
            .field("env_remove", &self.env_remove)
            .field("cols", &self.cols)
            .field("rows", &self.rows)
            .field("transcript", &self.transcript)
            .field("scrollback_lines", &self.scrollback_lines)
            .finish()
    }
}

/// How a program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitStatus {
    /// The exit code, when it exited.
    pub code: Option<i32>,
    /// The signal number, when a signal killed it.
    pub signal: Option<i32>,
}

/// Something a terminal noticed. Sent on the channel given to [`TerminalHost::spawn`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TerminalEvent {
    /// The program printed something (coalesced: one event may stand for many writes).
    Output,
    /// The program rang the bell (BEL outside an OSC sequence).
    Bell,
    /// An OSC 9 (`ESC ] 9 ; body BEL`) or OSC 777 (`ESC ] 777 ; notify ; title ; body BEL`)
    /// desktop notification.
    Notification {
        /// OSC 777's title; `None` for OSC 9.
        title: Option<String>,
        /// The notification's text.
        body: String,
    },
    /// The window title changed (OSC 0 or 2).
    Title(String),
    /// The program announced its state with `OSC 7501 ; state=… ST` (what
    /// follows `state=`: `working`, `blocked:…`, `done`, `idle`), as Codex CLI does.
    AgentState(String),
    /// The program ended. Always the last event, never dropped.
    Exited(ExitStatus),
}

/// A snapshot of a terminal's screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The visible screen: its rows as text, joined by `\n`, trailing blanks trimmed.
    pub screen: String,
    /// The cursor: row and column, from 0.
    pub cursor: (u16, u16),
    /// The last lines that scrolled off the top, oldest first (at most as asked).
    pub scrollback: Vec<String>,
    /// Whether more scrollback exists than was returned.
    pub truncated: bool,
    /// The window title (empty when never set).
    pub title: String,
    /// Columns and rows.
    pub size: (u16, u16),
    /// Whether the program turned bracketed paste on (`CSI ? 2004 h`).
    pub bracketed_paste: bool,
    /// Whether the program turned application cursor keys on (`CSI ? 1 h`):
    /// arrows are then sent as `ESC O A` rather than `ESC [ A`.
    pub application_cursor: bool,
}

impl Snapshot {
    /// An empty screen of `size`: nothing scrolled off, no title, every mode
    /// off — what a terminal without a screen of its own shows.
    pub fn blank(size: (u16, u16)) -> Snapshot {
        Snapshot {
            screen: String::new(),
            cursor: (0, 0),
            scrollback: Vec::new(),
            truncated: false,
            title: String::new(),
            size,
            bracketed_paste: false,
            application_cursor: false,
        }
    }
}

/// Why a terminal could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The program does not exist or cannot be executed.
    #[error("cannot start {program:?}: {source}")]
    Program {
        /// argv[0].
        program: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The working directory is missing.
    #[error("the directory {0} does not exist")]
    NoDirectory(PathBuf),
    /// The pseudo-terminal could not be opened, or another host failure.
    #[error("cannot open a terminal: {0}")]
    Host(String),
}

/// What an attacher gets from [`Terminal::attach`]: the screen now, then every
/// byte the program prints after it — taken together, so nothing falls between.
#[derive(Debug)]
pub struct Attachment {
    /// Escape sequences that redraw the screen as it is now on a terminal of
    /// `size`: a clear, every cell with its attributes, the cursor, and the input
    /// modes the program set (application cursor keys and keypad, bracketed
    /// paste, mouse reporting).
    pub screen: Vec<u8>,
    /// Columns and rows of the screen.
    pub size: (u16, u16),
    /// The program's raw output after `screen`, chunk by chunk, in order. It never
    /// slows the terminal: a receiver more than [`ATTACH_BACKLOG`] chunks behind
    /// gets `Lagged`, and should attach again (a fresh screen) rather than go on.
    pub output: broadcast::Receiver<Arc<[u8]>>,
}

/// How to reach a terminal's program with its host's own tool, bypassing the bus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NativeAttach {
    /// A window of a tmux server: `tmux -L <socket>`, session `session`, window
    /// `window` (`@N`).
    Tmux {
        /// The tmux server's socket name (`-L`).
        socket: String,
        /// The session the window is in.
        session: String,
        /// The terminal's window.
        window: String,
    },
}

/// A terminal a previous run of the app left behind, as a restart-safe host
/// finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Survivor {
    /// The app's id for it.
    pub id: u64,
    /// Whether its program still runs (a dead one still has its last screen and
    /// its exit status).
    pub alive: bool,
}

/// What [`TerminalHost::adopt`] takes back.
#[derive(Debug, Clone)]
pub struct AdoptSpec {
    /// The app's id for the terminal.
    pub id: u64,
    /// Where to append what the program prints from now on, if anywhere.
    pub transcript: Option<PathBuf>,
    /// Lines of scrollback kept in memory.
    pub scrollback_lines: usize,
}

/// A running (or ended) terminal.
pub trait Terminal: Send + Sync + 'static {
    /// The app's id for it.
    fn id(&self) -> u64;

    /// The program's process id.
    fn pid(&self) -> Option<u32>;

    /// Queues bytes for the program's input. The receiver resolves once they are
    /// all written to the terminal (`Ok`), or with the error that stopped them.
    /// Writes are delivered whole and in the order they were queued.
    fn write(&self, bytes: Vec<u8>) -> oneshot::Receiver<std::io::Result<()>>;

    /// Resizes the terminal (the program gets SIGWINCH).
    fn resize(&self, cols: u16, rows: u16) -> std::io::Result<()>;

    /// The screen now, with at most `scrollback_lines` lines of scrollback.
    fn snapshot(&self, scrollback_lines: usize) -> Snapshot;

    /// Whether the program turned bracketed paste on.
    fn bracketed_paste(&self) -> bool;

    /// Asks the program to end: SIGHUP to its process group now, SIGKILL after
    /// `grace` if it is still there. Returns at once; `Exited` follows.
    fn close(&self, grace: std::time::Duration);

    /// How the program ended, once it has.
    fn exit_status(&self) -> Option<ExitStatus>;

    /// Starts following the terminal for an attacher: its screen now and its
    /// output from then on. `None`: this terminal cannot be attached to.
    fn attach(&self) -> Option<Attachment> {
        None
    }

    /// How to attach with the host's own tool, when the host has one (tmux).
    fn native_attach(&self) -> Option<NativeAttach> {
        None
    }
}

/// Starts terminals.
pub trait TerminalHost: Send + Sync + 'static {
    /// Starts `spec.argv` on a new terminal. Events go to `events`, tagged with
    /// nothing but arriving on that terminal's own channel.
    fn spawn(
        &self,
        spec: SpawnSpec,
        events: mpsc::Sender<TerminalEvent>,
    ) -> Result<Arc<dyn Terminal>, SpawnError>;

    /// Whether [`Self::spawn`] may wait on other processes (the tmux host waits
    /// for tmux's answer), so that callers on an async runtime must call it on
    /// a blocking thread. A host that only starts its program (the PTY host:
    /// one `posix_spawn`, back once the program's `exec` began) answers `false`,
    /// and is called in place, saving two thread hand-offs per spawn.
    fn spawn_may_block(&self) -> bool {
        true
    }

    /// Whether terminals outlive the app: after a restart, [`Self::survivors`]
    /// finds them and [`Self::adopt`] takes them back.
    fn restart_safe(&self) -> bool;

    /// The terminals a previous run of the app left, alive or dead.
    fn survivors(&self) -> Result<Vec<Survivor>, SpawnError> {
        Ok(Vec::new())
    }

    /// Takes back a terminal of a previous run (one of [`Self::survivors`]): its
    /// screen as it is, then its output and events as for a new terminal. A dead
    /// one sends `Exited`, with its status, at once.
    fn adopt(
        &self,
        spec: AdoptSpec,
        events: mpsc::Sender<TerminalEvent>,
    ) -> Result<Arc<dyn Terminal>, SpawnError> {
        let _ = events;
        Err(SpawnError::Host(format!(
            "this host cannot take terminal {} back",
            spec.id
        )))
    }

    /// Ends a terminal of a previous run that the app no longer knows.
    fn discard(&self, id: u64) {
        let _ = id;
    }
}
