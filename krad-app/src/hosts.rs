//! SSH hosts: environments and terminals on another machine.
//!
//! The system's OpenSSH is the transport. Each host gets one control connection
//! (`ssh -M -S <socket> -N`, ControlMaster) started on first use, carrying a
//! reverse forward of the bus (`-O forward -R <port>:127.0.0.1:<bus port>`, with
//! `ExitOnForwardFailure=yes`); everything else — git, setup commands, token
//! files, the host's tmux control client, and the terminals of a host without
//! tmux (`ssh -tt`) — runs through it.
//!
//! Secrets never ride on a command line: scripts (setup commands among them)
//! and file contents (tokens, a terminal's launcher with its environment) go
//! through ssh's stdin, so neither `ps` here nor `ps` on the host shows them.
//!
//! A supervisor notices when the control connection dies and re-opens it, asking
//! for the same remote port so that terminals already told
//! `KRAD_ADE_ENDPOINT=127.0.0.1:<port>` reach the bus again. The port and the
//! host's `$HOME` are saved in `<state dir>/hosts/<name>.json`, so that an app
//! started again asks for the same port too.
//!
//! On a host with tmux, terminals live in tmux there and outlive the link and
//! the app ([`crate::remote_tmux`]): one tmux control client per host, through
//! the control connection, carries them all ([`Host::tmux_terminals`]); each
//! time the link is up, the settings of the app's tmux server there are
//! written again and the client takes back every terminal the link left. On a
//! host without tmux, a terminal whose link is gone ends (its `ssh -tt` exits)
//! and is reported `exited`, never left working.
//!
//! This file holds the hosts and their state; [`link`] the link's state
//! machine (open, notice, re-open, close), [`files`] what runs and is kept on
//! the host, [`tmux`] the terminals in tmux there, [`sockets`] the app's Unix
//! sockets forwarded there for contained terminals with a network of their
//! own.

use krad_bus::protocol::{HostStatus, LinkState};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use krad_bus::protocol::{ApiError, ErrorCode};
use krad_term::TmuxHost;
use serde_json::json;

use crate::config::HostConfig;
use crate::remote_tmux;
use crate::store::now_rfc3339;

mod files;
mod link;
mod sockets;
mod tmux;

pub(crate) use files::CheckPidFile;
pub(crate) use sockets::Carried;

/// What an app keeps of a host between runs (`<state dir>/hosts/<name>.json`).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct Saved {
    /// The port the host gave the bus: terminals that outlive the app were
    /// told it.
    pub remote_port: Option<u16>,
    /// The host's `$HOME`, where its terminals' files are.
    pub home: Option<String>,
    /// Terminals closed while the link was down: their sessions and files on
    /// the host go once it is up (in this run or the next).
    #[serde(default)]
    pub closed: Vec<u64>,
}

struct Link {
    state: LinkState,
    port: Option<u16>,
    error: Option<String>,
    since: String,
    reconnects: u64,
    master_pid: Option<u32>,
    home: Option<String>,
    /// Whether the host has tmux (known once connected).
    tmux: Option<bool>,
    /// The port was saved by an earlier run, not yet given in this one.
    port_from_before: bool,
    /// Closed terminals whose files are still on the host (the link was down
    /// when they closed): removed when it is up again.
    leftover_terminals: Vec<u64>,
}

/// One SSH host.
pub(crate) struct Host {
    /// Its name.
    pub name: String,
    /// Its config.
    pub config: HostConfig,
    control: PathBuf,
    /// `<state dir>/hosts`: what is saved of the host, and the control file.
    state: PathBuf,
    /// This app's tmux server and folder on the host.
    app_name: String,
    bus_port: u16,
    link: Mutex<Link>,
    connecting: tokio::sync::Mutex<()>,
    stopping: tokio_util_cancel::Flag,
    /// The terminals in tmux on the host, through one control client.
    terminals: Arc<TmuxHost>,
    /// Terminals taken over from the last run whose token file on the host
    /// still holds that run's token: written again once the link is up.
    awaiting_tokens: Mutex<BTreeSet<u64>>,
    /// Counts the times the link went from `up` to `down`: what runs on the
    /// host through it stops waiting then.
    drops: tokio::sync::watch::Sender<u64>,
    /// The sockets of this machine carried to the host for contained
    /// terminals there, by terminal: forwarded again whenever the link is
    /// re-opened ([`sockets`]).
    carried: Mutex<BTreeMap<u64, Vec<Carried>>>,
    /// The checks running on the host, by run: the most CPU time (ms) and
    /// memory (bytes) the usage sampler saw their processes use, once it saw
    /// them ([`Host::check_usage`]).
    checks_seen: Mutex<BTreeMap<u64, Option<(u64, u64)>>>,
}

/// A tiny stop flag (no extra dependency).
mod tokio_util_cancel {
    use std::sync::atomic::{AtomicBool, Ordering};

    #[derive(Default)]
    pub(super) struct Flag(AtomicBool);

    impl Flag {
        pub(super) fn set(&self) {
            self.0.store(true, Ordering::SeqCst);
        }
        pub(super) fn is_set(&self) -> bool {
            self.0.load(Ordering::SeqCst)
        }
    }
}

/// Every configured host.
pub(crate) struct HostLinks {
    hosts: BTreeMap<String, Arc<Host>>,
}

impl HostLinks {
    /// The hosts of the config; nothing connects until first use. `state_dir`
    /// is the app's state directory, `root` its repository.
    pub(crate) fn new(
        config: &BTreeMap<String, HostConfig>,
        bus_port: u16,
        state_dir: &std::path::Path,
        root: &std::path::Path,
    ) -> HostLinks {
        let dir = control_dir();
        if std::fs::create_dir_all(&dir).is_ok() {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
        }
        let state = state_dir.join("hosts");
        let app_name = remote_tmux::app_name(root);
        let hosts = config
            .iter()
            .map(|(name, host)| {
                let saved = read_saved(&state, name);
                // Left by a run whose terminals had re-attach loops.
                let _ = std::fs::remove_file(state.join(format!("{name}.control")));
                let control = dir.join(control_name(std::process::id(), name));
                let place = remote_tmux::place(name, host, &app_name, &control);
                let host = Host {
                    name: name.clone(),
                    config: host.clone(),
                    terminals: Arc::new(TmuxHost::over_ssh(app_name.clone(), place)),
                    control,
                    state: state.clone(),
                    app_name: app_name.clone(),
                    bus_port,
                    link: Mutex::new(Link {
                        state: LinkState::Stopped,
                        port: saved.remote_port,
                        error: None,
                        since: now_rfc3339(),
                        reconnects: 0,
                        master_pid: None,
                        home: saved.home,
                        tmux: None,
                        port_from_before: saved.remote_port.is_some(),
                        leftover_terminals: saved.closed,
                    }),
                    connecting: tokio::sync::Mutex::new(()),
                    stopping: Default::default(),
                    awaiting_tokens: Mutex::default(),
                    drops: tokio::sync::watch::Sender::new(0),
                    carried: Mutex::default(),
                    checks_seen: Mutex::default(),
                };
                (name.clone(), Arc::new(host))
            })
            .collect();
        HostLinks { hosts }
    }

    /// A host by name, or `not_found`.
    pub(crate) fn get(&self, name: &str) -> Result<Arc<Host>, ApiError> {
        self.hosts.get(name).cloned().ok_or_else(|| {
            ApiError::new(
                ErrorCode::NotFound,
                format!("no host {name:?} in the config ([hosts.{name}])"),
            )
            .with_detail(json!({ "host": name }))
        })
    }

    /// Every host, in name order.
    pub(crate) fn all(&self) -> Vec<Arc<Host>> {
        self.hosts.values().cloned().collect()
    }

    /// Every host's status.
    pub(crate) fn statuses(&self) -> Vec<HostStatus> {
        self.hosts.values().map(|h| h.status()).collect()
    }

    /// Whether `terminal` is a host terminal taken over from the last run
    /// that has not been given this run's token yet (its calls with the last
    /// run's token are refused, but retryable: see docs/hosts.md).
    pub(crate) fn token_being_renewed(&self, terminal: u64) -> bool {
        self.hosts
            .values()
            .any(|host| lock(&host.awaiting_tokens).contains(&terminal))
    }

    /// Closes every control connection. With `close_terminals`, the terminals
    /// on the hosts end too: this app's tmux server there is ended and its
    /// terminals' files removed (else they live on, for the next app).
    pub(crate) async fn shutdown(&self, close_terminals: bool) {
        for host in self.hosts.values() {
            if close_terminals {
                host.remove_everything().await;
            }
            host.stop().await;
        }
    }
}

impl Host {
    fn lock(&self) -> std::sync::MutexGuard<'_, Link> {
        lock(&self.link)
    }

    /// Notes that `terminals`, taken over from the last run, wait for this
    /// run's token on the host.
    pub(crate) fn await_new_tokens(&self, terminals: impl IntoIterator<Item = u64>) {
        lock(&self.awaiting_tokens).extend(terminals);
    }

    /// Notes that `terminal`'s token file on the host holds this run's token
    /// (or could not be written: then its calls fail for good).
    pub(crate) fn has_new_token(&self, terminal: u64) {
        lock(&self.awaiting_tokens).remove(&terminal);
    }

    /// The link's state now.
    pub(crate) fn status(&self) -> HostStatus {
        let link = self.lock();
        HostStatus {
            name: self.name.clone(),
            ssh: self.config.ssh.clone(),
            root: self.config.root.clone(),
            state: link.state,
            tmux: link.tmux,
            // The port of an earlier run is asked for again, not yet given.
            remote_port: link.port.filter(|_| link.state != LinkState::Stopped),
            error: link.error.clone(),
            since: link.since.clone(),
            reconnects: link.reconnects,
        }
    }

    fn set(&self, state: LinkState, error: Option<String>) {
        let went_down = {
            let mut link = self.lock();
            let went_down = link.state == LinkState::Up && state == LinkState::Down;
            if link.state != state {
                link.since = now_rfc3339();
            }
            link.state = state;
            link.error = error;
            went_down
        };
        if went_down {
            self.drops.send_modify(|drops| *drops += 1);
        }
    }

    /// The `krad` to run on the host.
    pub(crate) fn krad(&self) -> String {
        self.config
            .krad
            .clone()
            .unwrap_or_else(|| "krad".to_owned())
    }

    /// ssh's arguments to run something through the control connection.
    pub(crate) fn ssh_args(&self, tty: bool) -> Vec<String> {
        let mut args = Vec::new();
        if tty {
            args.push("-tt".to_owned());
        }
        args.extend([
            "-S".to_owned(),
            self.control.display().to_string(),
            "-o".to_owned(),
            "ControlMaster=no".to_owned(),
            "-o".to_owned(),
            "BatchMode=yes".to_owned(),
        ]);
        args.extend(self.config.options.iter().cloned());
        args.push(self.config.ssh.clone());
        args
    }

    /// Whether the host has tmux, once connected.
    pub(crate) fn has_tmux(&self) -> Option<bool> {
        self.lock().tmux
    }

    /// Saves what the next run needs of the host.
    fn save(&self) {
        let saved = {
            let link = self.lock();
            Saved {
                remote_port: link.port,
                home: link.home.clone(),
                closed: link.leftover_terminals.clone(),
            }
        };
        let path = self.state.join(format!("{}.json", self.name));
        let written = serde_json::to_vec(&saved)
            .map_err(std::io::Error::other)
            .and_then(|bytes| krad_bus::private_file::write(&path, &bytes));
        if let Err(e) = written {
            tracing::warn!(host = %self.name, "cannot save the host's port for the next run: {e}");
        }
    }

    /// Whether the app is stopping.
    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.is_set()
    }

    /// The host's `$HOME`, once connected.
    pub(crate) fn home(&self) -> Option<String> {
        self.lock().home.clone()
    }

    /// This app's folder on the host for its terminals' tokens, launchers and
    /// settings (0700), when they do not live in tmux: they end with the app.
    pub(crate) fn terminal_files_dir(&self) -> String {
        let home = self.home().unwrap_or_else(|| "/tmp".to_owned());
        format!("{home}/.krad-ade/remote-{}", std::process::id())
    }

    /// This app's folder on the host for the terminals that live in tmux
    /// there (0700): it outlives the app, for the next one.
    pub(crate) fn tmux_files_dir(&self) -> String {
        let home = self.home().unwrap_or_else(|| "/tmp".to_owned());
        format!("{home}/.krad-ade/{}", self.app_name)
    }
}
/// A lock that a panic elsewhere does not poison for good.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// What an earlier run saved of host `name`.
fn read_saved(state: &std::path::Path, name: &str) -> Saved {
    std::fs::read(state.join(format!("{name}.json")))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

/// Where the control sockets live: short paths (sun_path is ~104 bytes), one
/// directory per user.
pub(crate) fn control_dir() -> PathBuf {
    let uid = nix::unistd::geteuid().as_raw();
    std::env::temp_dir().join(format!("krad-ssh-{uid}"))
}

/// A control socket's name: the app's pid, then the host's name.
fn control_name(pid: u32, host: &str) -> String {
    format!("{pid}-{host}")
}

/// The pid of the app a control socket belongs to.
pub(crate) fn control_owner(name: &str) -> Option<u32> {
    name.split_once('-')?.0.parse().ok()
}
