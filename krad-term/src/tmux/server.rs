//! The app's tmux server, as [`Server`]: one-off tmux commands to it, besides
//! the control client (here, or on an SSH host: [`Place`]); its settings
//! (written to a file, applied to a server already running); and the panes that
//! hold krad terminals.

use std::io::{self, Write};
use std::path::Path;
use std::process::Command;
use std::sync::Once;
use std::time::Duration;

use crate::SpawnError;

use super::common::{DEAD_NAME, ID_OPTION};
use super::place::Place;

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

/// The app's tmux server: `tmux -L <socket> -f <config>`, here or on a host.
#[derive(Debug)]
pub(super) struct Server {
    socket: String,
    place: Place,
    configured: Once,
}

impl Server {
    /// The server `socket` (`tmux -L`) at `place`, which names its settings.
    pub(super) fn new(socket: String, place: Place) -> Self {
        Self {
            socket,
            place,
            configured: Once::new(),
        }
    }

    /// Where the server runs.
    pub(super) fn place(&self) -> &Place {
        &self.place
    }

    /// The server's socket name (`tmux -L`).
    pub(super) fn socket(&self) -> &str {
        &self.socket
    }

    /// A `tmux` command for this server, running `args`.
    pub(super) fn command(&self, args: &[&str]) -> Command {
        self.place.command(&self.socket, args)
    }

    /// Runs tmux with `args`; its output, or what it said on stderr. A server
    /// that was exiting as we came (its last session just ended) is started
    /// again.
    pub(super) fn run(&self, args: &[&str]) -> Result<String, String> {
        let mut tries = 0;
        loop {
            if !self.place.reachable() {
                return Err("the link to the host is down".to_owned());
            }
            let output = self
                .command(args)
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
    /// `-f`. (On an SSH host, whoever writes the settings there applies them.)
    pub(super) fn configure(&self) {
        let Place::Local { config } = &self.place else {
            return;
        };
        self.configured.call_once(|| {
            let config = config.to_string_lossy().into_owned();
            if let Err(error) = self.run(&["source-file", &config])
                && !no_server(&error)
            {
                tracing::warn!(socket = %self.socket, %error, "cannot apply krad's tmux settings");
            }
        });
    }

    /// Every pane of the server that holds a krad terminal.
    pub(super) fn panes(&self) -> Result<Vec<PaneInfo>, SpawnError> {
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
}

/// The server's settings here: [`settings`] with this machine's tmux.
pub(super) fn config(socket: &str) -> String {
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
    settings(socket, &tmux)
}

/// The server's settings: [`CONFIG`], and the `pane-died` hook, which runs
/// `tmux` (a path, or a name found on the server's `PATH`). Commands a hook runs
/// notify no control client, so the hook runs a separate tmux client that
/// renames the window: its `%window-renamed` is what tells the app.
pub(super) fn settings(socket: &str, tmux: &str) -> String {
    format!(
        "{CONFIG}set-hook -g pane-died \"run-shell -b '{tmux} -L {socket} rename-window -t \\\"#{{window_id}}\\\" {DEAD_NAME}'\"\n"
    )
}

/// A pane holding a krad terminal, as `list-panes` shows it.
#[derive(Debug, Clone)]
pub(super) struct PaneInfo {
    pub(super) id: u64,
    pub(super) pane: String,
    pub(super) window: String,
    pub(super) dead: bool,
}

/// Whether tmux said no server runs on the socket (or one without sessions,
/// about to exit).
fn no_server(error: &str) -> bool {
    error.contains("no server running")
        || error.contains("error connecting")
        || error.contains("no current target")
        || error.contains("server exited unexpectedly")
}

/// Writes `bytes` to `path`, readable by this user only, making its directory.
pub(super) fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
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
