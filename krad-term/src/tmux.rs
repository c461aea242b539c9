//! The tmux host: [`TmuxHost`] runs each terminal in a window of a tmux server of
//! the app's own (`tmux -L <socket>`, session `krad`), so that terminals outlive
//! the app: a restarted app finds them again ([`TerminalHost::survivors`]) and
//! takes them back ([`TerminalHost::adopt`]) with their screens.
//!
//! Layers: each module imports only modules of the lines above its own, and
//! none imports this file (a call back up is a closure passed down).
//! 1. `common` (names, timeout, lock), `codec` (tmux's encodings), `later` (jobs for later),
//!    `place` (here or on an SSH host): none;
//! 2. `seed` (a pane's captured screen) → codec; `server` (one-off commands) → common, place;
//! 3. `state` (a terminal's shared state, the reader's `Pipeline`) → seed;
//! 4. `reply` (what answers are owed) → state; then `control` (command side) → reply;
//! 5. `connection` (the client's handle, shared by its threads) → control;
//! 6. `exit` (how a terminal ends) → connection, reply, state, seed;
//! 7. `terminal` (its handle) → exit, connection, reply, state; `reader` (the client's
//!    output) → exit, …; `watcher` (the watchdog) → exit, connection;
//! 8. `client` (starts client, reader, watchdog), `spawn` (opens, takes back) → any below;
//! 9. this file, [`TmuxHost`] → common, place, server, connection, state, client, spawn.
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
//! pane dies — a program's last words — but its screen has them; the pane's
//! process is a small runner ([`runner`]) that lets the pane die only once tmux
//! has read all its program printed), and once every
//! byte of output was parsed sends `Exited` and closes the window. A pane that
//! dies while the app is away stays dead, with its status and last screen, until
//! a restarted app takes it back.
//!
//! **On an SSH host** ([`TmuxHost::over_ssh`]): the same, with every tmux
//! command and the control client run through the host's control connection
//! (`ssh -S <socket> … tmux -L … -C attach-session`, no tty), so `%output`
//! brings each pane's raw bytes — OSC sequences included — into the same
//! pipeline as here, however many terminals (one ssh session for them all).
//! Its programs' pids are the host's: closing signals them through tmux
//! (`run-shell kill`), and the watchdog asks tmux for ends instead of looking
//! at processes. When the client ends with the link, its terminals do not end:
//! they wait (their screens saying so) until [`TmuxHost::resume`], once the
//! link is up, takes them back with their screens as tmux has them; a terminal
//! whose pane is gone (the host's tmux server was killed, the host restarted)
//! then ends without a status. A restarted app's terminals wait the same way
//! ([`TmuxHost::adopt_later`]).
//!
//! The one reader waits for each terminal's parser (back-pressure): a terminal
//! printing faster than it can be parsed delays the others' output (tmux keeps
//! it meanwhile), never their programs.

mod client;
mod codec;
mod common;
mod connection;
mod control;
mod exit;
mod later;
mod place;
mod reader;
mod reply;
mod runner;
mod seed;
mod server;
mod spawn;
mod state;
mod terminal;
mod watcher;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use crate::{AdoptSpec, SpawnError, SpawnSpec, Survivor, Terminal, TerminalEvent, TerminalHost};

use self::common::{SESSION, lock, window_name};
use self::connection::{Connection, Slot};
use self::place::Place;
pub use self::place::SshPlace;
use self::server::{Server, write_private};
use self::state::Orphans;

/// The session's first window, which keeps it alive when no terminal does.
const PLACEHOLDER: &str = "krad-wait";

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
    server: Server,
    /// The control client, once started (a new one if the last ended).
    connection: Arc<Slot>,
    /// On an SSH host: the terminals waiting for a client (the link is down,
    /// or was not up yet since the app started).
    orphans: Option<Orphans>,
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
        write_private(&config, server::config(&socket).as_bytes())
            .map_err(|e| SpawnError::Host(format!("cannot write {}: {e}", config.display())))?;
        Ok(Self {
            server: Server::new(socket, Place::Local { config }),
            connection: Arc::new(Mutex::new(None)),
            orphans: None,
        })
    }

    /// A host for the server `socket` on an SSH host, reached as `place` says.
    /// Nothing runs until first use; the server's settings must be on the host
    /// ([`TmuxHost::host_settings`]) before.
    pub fn over_ssh(socket: impl Into<String>, place: SshPlace) -> Self {
        Self {
            server: Server::new(socket.into(), Place::Ssh(place)),
            connection: Arc::new(Mutex::new(None)),
            orphans: Some(Arc::new(Mutex::new(Vec::new()))),
        }
    }

    /// The settings of server `socket` on an SSH host (its `tmux` found on the
    /// server's `PATH` there), for its settings file.
    pub fn host_settings(socket: &str) -> String {
        server::settings(socket, "tmux")
    }

    /// On an SSH host whose link is up (again): starts a control client if
    /// none runs and takes back the terminals waiting for one (see the module's
    /// doc). Blocks for the round trips to the host.
    pub fn resume(&self) -> Result<(), SpawnError> {
        let Some(orphans) = &self.orphans else {
            return Ok(());
        };
        if lock(orphans).is_empty() {
            return Ok(());
        }
        let connection = self.connection()?;
        spawn::take_back(&self.server, &connection, orphans)
    }

    /// On an SSH host that no longer runs terminals in tmux (it has none now,
    /// or tmux was turned off): lets go of every terminal waiting to be taken
    /// back — each ends without a status. Returns how many.
    pub fn let_go_of_waiting(&self) -> usize {
        let Some(orphans) = &self.orphans else {
            return 0;
        };
        let waiting = std::mem::take(&mut *lock(orphans));
        let count = waiting.len();
        for pipeline in waiting {
            let gone = crate::ExitStatus {
                code: None,
                signal: None,
            };
            exit::abandon(pipeline, gone);
        }
        count
    }

    /// On an SSH host: how many terminals wait to be taken back.
    pub fn waiting(&self) -> usize {
        self.orphans
            .as_ref()
            .map_or(0, |orphans| lock(orphans).len())
    }

    /// On an SSH host: terminal `spec.id`, to be taken back by the next
    /// [`TmuxHost::resume`] (its handle now: its screen is blank until then).
    pub fn adopt_later(
        &self,
        spec: AdoptSpec,
        events: mpsc::Sender<TerminalEvent>,
    ) -> Result<Arc<dyn Terminal>, SpawnError> {
        let Some(orphans) = &self.orphans else {
            return Err(SpawnError::Host(
                "only a host on an SSH host takes terminals back later".into(),
            ));
        };
        let terminal = spawn::adopt_later((&self.connection, orphans), spec, events)?;
        Ok(Arc::new(terminal))
    }

    /// Where the host opens its terminals.
    fn site(&self) -> spawn::Site<'_, impl FnOnce() -> Result<Arc<Connection>, SpawnError>> {
        spawn::Site {
            server: &self.server,
            room: (&self.connection, self.orphans.as_ref()),
            connect: || self.connection(),
        }
    }

    /// The socket name for the repository at `root`: `krad-<directory name>-<hash
    /// of the path>`, so each repository's app has its own server.
    pub fn socket_for(root: &Path) -> String {
        Self::server_name(root, None)
    }

    /// A server name for the repository at `root`, as [`Self::socket_for`];
    /// with `salt` (a machine's name, say), its hash covers `salt` too, so that
    /// apps of several machines sharing one tmux (on an SSH host) never meet.
    pub fn server_name(root: &Path, salt: Option<&[u8]>) -> String {
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
        let mut hashed = Vec::new();
        if let Some(salt) = salt {
            hashed.extend_from_slice(salt);
            hashed.push(0);
        }
        hashed.extend_from_slice(root.as_os_str().as_encoded_bytes());
        format!("krad-{name}-{:08x}", fnv1a(&hashed) & 0xffff_ffff)
    }

    /// The server's socket name (`tmux -L`).
    pub fn socket(&self) -> &str {
        self.server.socket()
    }

    /// The control client, started (with the server and its session) if need be.
    fn connection(&self) -> Result<Arc<Connection>, SpawnError> {
        let mut connection = lock(&self.connection);
        if let Some(live) = connection.as_ref().filter(|c| !c.ended()) {
            return Ok(Arc::clone(live));
        }
        let server = &self.server;
        if !server.place().reachable() {
            return Err(SpawnError::Host("the link to the host is down".into()));
        }
        server.configure();
        if server
            .run(&["has-session", "-t", &format!("={SESSION}")])
            .is_err()
        {
            server
                .run(&["new-session", "-d", "-s", SESSION, "-n", PLACEHOLDER, "cat"])
                .map_err(|e| SpawnError::Host(format!("tmux new-session: {e}")))?;
        }
        let started = client::start(server)?;
        *connection = Some(Arc::clone(&started));
        Ok(started)
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
        Ok(Arc::new(spawn::spawn_terminal(self.site(), spec, events)?))
    }

    fn restart_safe(&self) -> bool {
        true
    }

    fn survivors(&self) -> Result<Vec<Survivor>, SpawnError> {
        Ok(self
            .server
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
        Ok(Arc::new(spawn::adopt_terminal(self.site(), spec, events)?))
    }

    fn discard(&self, id: u64) {
        let _ = self.server.run(&[
            "kill-window",
            "-t",
            &format!("={SESSION}:={}", window_name(id)),
        ]);
    }
}

/// FNV-1a, 64 bits: a hash that stays the same across builds.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_names_are_stable_and_safe() {
        let a = TmuxHost::socket_for(Path::new("/home/me/src/my app"));
        assert_eq!(a, TmuxHost::socket_for(Path::new("/home/me/src/my app")));
        assert!(a.starts_with("krad-my_app-"), "{a}");
        assert_ne!(a, TmuxHost::socket_for(Path::new("/other/my app")));
    }
}
