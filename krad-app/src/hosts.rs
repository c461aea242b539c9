//! SSH hosts: environments and terminals on another machine.
//!
//! The system's OpenSSH is the transport. Each host gets one control connection
//! (`ssh -M -S <socket> -N`, ControlMaster) started on first use, carrying a
//! reverse forward of the bus (`-O forward -R <port>:127.0.0.1:<bus port>`, with
//! `ExitOnForwardFailure=yes`); everything else — git, setup commands, token
//! files, and the terminals themselves (`ssh -tt`) — runs through it.
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

use krad_bus::protocol::{HostStatus, LinkState};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use krad_bus::protocol::{ApiError, ErrorCode};
use krad_term::TmuxHost;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::config::HostConfig;
use crate::profile::shell_quote;
use crate::remote_tmux;
use crate::store::now_rfc3339;

/// How long a connection may take to come up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);
/// The longest wait between two reconnection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(15);
/// How many times a first connection asks again for the port saved by an
/// earlier run (its old session on the host may still hold it) before taking
/// any port.
const SAVED_PORT_TRIES: u32 = 5;
/// The prefix of a failed forward's reason.
const FORWARD_FAILED: &str = "the reverse forward to the bus failed";

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
pub struct Host {
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
}

/// A tiny stop flag (no extra dependency).
mod tokio_util_cancel {
    use std::sync::atomic::{AtomicBool, Ordering};

    #[derive(Default)]
    pub struct Flag(AtomicBool);

    impl Flag {
        pub fn set(&self) {
            self.0.store(true, Ordering::SeqCst);
        }
        pub fn is_set(&self) -> bool {
            self.0.load(Ordering::SeqCst)
        }
    }
}

/// Every configured host.
pub struct Hosts {
    hosts: BTreeMap<String, Arc<Host>>,
}

impl Hosts {
    /// The hosts of the config; nothing connects until first use. `state_dir`
    /// is the app's state directory, `root` its repository.
    pub fn new(
        config: &BTreeMap<String, HostConfig>,
        bus_port: u16,
        state_dir: &std::path::Path,
        root: &std::path::Path,
    ) -> Hosts {
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
                };
                (name.clone(), Arc::new(host))
            })
            .collect();
        Hosts { hosts }
    }

    /// A host by name, or `not_found`.
    pub fn get(&self, name: &str) -> Result<Arc<Host>, ApiError> {
        self.hosts.get(name).cloned().ok_or_else(|| {
            ApiError::new(
                ErrorCode::NotFound,
                format!("no host {name:?} in the config ([hosts.{name}])"),
            )
            .with_detail(json!({ "host": name }))
        })
    }

    /// Every host, in name order.
    pub fn all(&self) -> Vec<Arc<Host>> {
        self.hosts.values().cloned().collect()
    }

    /// Every host's status.
    pub fn statuses(&self) -> Vec<HostStatus> {
        self.hosts.values().map(|h| h.status()).collect()
    }

    /// Closes every control connection. With `close_terminals`, the terminals
    /// on the hosts end too: this app's tmux server there is ended and its
    /// terminals' files removed (else they live on, for the next app).
    pub async fn shutdown(&self, close_terminals: bool) {
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
        self.link.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The link's state now.
    pub fn status(&self) -> HostStatus {
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
        let mut link = self.lock();
        if link.state != state {
            link.since = now_rfc3339();
        }
        link.state = state;
        link.error = error;
    }

    /// The `krad` to run on the host.
    pub fn krad(&self) -> String {
        self.config
            .krad
            .clone()
            .unwrap_or_else(|| "krad".to_owned())
    }

    /// ssh's arguments to run something through the control connection.
    pub fn ssh_args(&self, tty: bool) -> Vec<String> {
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

    /// Makes sure the control connection and its forward are up; returns the
    /// port the bus is forwarded to on the host. A host that cannot be reached
    /// is `unavailable` with ssh's own reason.
    pub async fn connect(self: &Arc<Self>) -> Result<u16, ApiError> {
        let _serial = self.connecting.lock().await;
        {
            let link = self.lock();
            if link.state == LinkState::Up
                && let Some(port) = link.port
            {
                return Ok(port);
            }
            // Lost, and being re-opened in the background: say so at once
            // rather than make every request wait on ssh.
            if link.state == LinkState::Down {
                return Err(ApiError::new(
                    ErrorCode::Unavailable,
                    format!(
                        "host {:?} is down since {}: {}; krad re-opens the link by itself",
                        self.name,
                        link.since,
                        link.error.as_deref().unwrap_or("the link was lost")
                    ),
                )
                .with_detail(json!({ "host": self.name })));
            }
        }
        let (wanted, failed_before) = {
            let link = self.lock();
            (link.port.unwrap_or(0), link.state == LinkState::Failed)
        };
        // A host that failed stays `failed` (its `since` the first failure)
        // while it is tried again: no flip to `connecting` and back.
        if !failed_before {
            self.set(LinkState::Connecting, None);
        }
        match self.open_asking_for(wanted).await {
            Ok(port) => Ok(port),
            Err(reason) => {
                self.set(LinkState::Failed, Some(reason.clone()));
                Err(ApiError::new(
                    ErrorCode::Unavailable,
                    format!(
                        "cannot reach host {:?} ({}): {reason}",
                        self.name, self.config.ssh
                    ),
                )
                .with_detail(json!({ "host": self.name })))
            }
        }
    }

    /// Opens the link asking for `wanted`. A port saved by an earlier run is
    /// asked for a few times (the old session on the host may not have let it
    /// go yet), then any port is taken: the app works, though terminals that
    /// outlived the old app no longer reach it.
    async fn open_asking_for(self: &Arc<Self>, wanted: u16) -> Result<u16, String> {
        let from_before = std::mem::take(&mut self.lock().port_from_before);
        if wanted == 0 || !from_before {
            return self.open(wanted).await;
        }
        let mut tries = 0;
        loop {
            match self.open(wanted).await {
                Err(reason) if reason.starts_with(FORWARD_FAILED) => {
                    tries += 1;
                    if tries >= SAVED_PORT_TRIES {
                        tracing::warn!(
                            host = %self.name,
                            port = wanted,
                            "the port of the last run is taken on the host ({reason}); \
                             its terminals there no longer reach the bus"
                        );
                        return self.open(0).await;
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                other => return other,
            }
        }
    }

    /// Starts the control connection and the forward; supervises it.
    async fn open(self: &Arc<Self>, wanted_port: u16) -> Result<u16, String> {
        let (port, child, stderr) = self.start_master(wanted_port).await?;
        let this = self.clone();
        tokio::spawn(async move { this.supervise(child, stderr).await });
        Ok(port)
    }

    /// Starts `ssh -M` and the forward; the port, the master and its stderr.
    async fn start_master(
        &self,
        wanted_port: u16,
    ) -> Result<
        (
            u16,
            tokio::process::Child,
            Option<tokio::process::ChildStderr>,
        ),
        String,
    > {
        let _ = std::fs::remove_file(&self.control);
        let mut child = self.spawn_master()?;
        let mut stderr = child.stderr.take();
        self.wait_for_control(&mut child, &mut stderr).await?;
        let port = match self.forward(wanted_port).await {
            Ok(port) => port,
            Err(e) => {
                let _ = child.start_kill();
                return Err(e);
            }
        };
        self.link_up(port, child.id()).await;
        Ok((port, child, stderr))
    }

    /// Runs `ssh -M -N` on the control socket, its stderr piped.
    fn spawn_master(&self) -> Result<tokio::process::Child, String> {
        let mut master = tokio::process::Command::new("ssh");
        master
            .args(["-M", "-N", "-S"])
            .arg(&self.control)
            .args([
                "-o",
                "ControlPersist=no",
                "-o",
                "ExitOnForwardFailure=yes",
                "-o",
                "BatchMode=yes",
            ])
            .args([
                "-o".to_owned(),
                format!("ServerAliveInterval={}", self.config.alive_interval()),
                "-o".to_owned(),
                format!("ServerAliveCountMax={}", self.config.alive_count()),
                "-o".to_owned(),
                "LogLevel=ERROR".to_owned(),
            ])
            .args(&self.config.options)
            .arg(&self.config.ssh)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(false);
        master.spawn().map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                "cannot run ssh: it is not installed (SSH hosts need the OpenSSH client: \
                 apt-get install openssh-client)"
                    .to_owned()
            }
            _ => format!("cannot run ssh: {e}"),
        })
    }

    /// Waits until the master answers on its control socket: an error with
    /// what ssh said if it exits first, or when `CONNECT_TIMEOUT` passes (the
    /// master killed then).
    async fn wait_for_control(
        &self,
        child: &mut tokio::process::Child,
        stderr: &mut Option<tokio::process::ChildStderr>,
    ) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + CONNECT_TIMEOUT;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                let mut said = String::new();
                if let Some(err) = stderr.as_mut() {
                    let _ = err.read_to_string(&mut said).await;
                }
                let said = ssh_reason(&said);
                return Err(if said.is_empty() {
                    format!("ssh exited ({status})")
                } else {
                    said
                });
            }
            if self.control_check().await {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                let _ = child.start_kill();
                return Err(format!(
                    "no connection within {} s",
                    CONNECT_TIMEOUT.as_secs()
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Keeps the link's port, master, the host's home and whether it has
    /// tmux; saves the port and home for the next run and tells re-attach
    /// loops the control socket; the link is up.
    async fn link_up(&self, port: u16, master_pid: Option<u32>) {
        let found = self
            .run_raw(
                "printf '%s\\n' \"$HOME\"; command -v tmux >/dev/null 2>&1 && echo tmux",
                None,
            )
            .await
            .ok()
            .map(|(_, out, _)| String::from_utf8_lossy(&out).into_owned());
        let (home, tmux) = match &found {
            Some(text) => {
                let mut lines = text.lines();
                let home = lines.next().map(str::to_owned).filter(|h| !h.is_empty());
                let found = lines.any(|l| l == "tmux");
                (home, Some(found && self.config.tmux != Some(false)))
            }
            None => (None, None),
        };
        {
            let mut link = self.lock();
            link.port = Some(port);
            link.master_pid = master_pid;
            if home.is_some() {
                link.home = home;
            }
            link.tmux = tmux;
        }
        self.save();
        if tmux == Some(true) {
            self.write_tmux_settings().await;
        }
        self.set(LinkState::Up, None);
        tracing::info!(host = %self.name, port, "ssh link up");
        if tmux == Some(true) {
            self.resume_terminals();
        }
        self.remove_dead_apps_files().await;
        let leftovers = std::mem::take(&mut self.lock().leftover_terminals);
        if !leftovers.is_empty() {
            self.remove_terminal_files(&leftovers).await;
            self.save();
        }
    }

    /// This app's folder on the host for its terminals' tokens, launchers and
    /// settings (0700), when they do not live in tmux: they end with the app.
    pub fn terminal_files_dir(&self) -> String {
        let home = self.home().unwrap_or_else(|| "/tmp".to_owned());
        format!("{home}/.krad-ade/remote-{}", std::process::id())
    }

    /// This app's folder on the host for the terminals that live in tmux
    /// there (0700): it outlives the app, for the next one.
    pub fn tmux_files_dir(&self) -> String {
        let home = self.home().unwrap_or_else(|| "/tmp".to_owned());
        format!("{home}/.krad-ade/{}", self.app_name)
    }

    /// Whether the host has tmux, once connected.
    pub fn has_tmux(&self) -> Option<bool> {
        self.lock().tmux
    }

    /// The file that holds the path of the link's control socket while it is
    /// up (read by the re-attach loops of terminals in tmux).
    /// The terminals in tmux on the host (one control client for them all),
    /// when it has tmux (and the link was up, to know it).
    pub fn tmux_terminals(&self) -> Option<Arc<TmuxHost>> {
        (self.has_tmux() == Some(true)).then(|| Arc::clone(&self.terminals))
    }

    /// The host's terminal host for tmux there, whether or not the host was
    /// reached yet (a restarted app's terminals wait in it for the link).
    pub fn tmux_host(&self) -> Arc<TmuxHost> {
        Arc::clone(&self.terminals)
    }

    /// Writes the settings of the app's tmux server on the host (and applies
    /// them to it if it runs): before its control client starts.
    async fn write_tmux_settings(&self) {
        let script = remote_tmux::settings_script(&self.app_name, &self.tmux_files_dir());
        match self.run_raw(&script, None).await {
            Ok((Some(0), _, _)) => {}
            Ok((_, _, err)) => tracing::warn!(
                host = %self.name,
                "cannot write the tmux settings on the host: {}",
                String::from_utf8_lossy(&err).trim()
            ),
            Err(e) => {
                tracing::warn!(host = %self.name, "cannot write the tmux settings on the host: {e}")
            }
        }
    }

    /// Has the host's tmux client take back the terminals waiting for the
    /// link (in the background: it blocks on the round trips).
    pub fn resume_terminals(&self) {
        let (terminals, name) = (Arc::clone(&self.terminals), self.name.clone());
        tokio::task::spawn_blocking(move || {
            if let Err(error) = terminals.resume() {
                tracing::info!(host = %name, %error, "the host's terminals wait for the link");
            }
        });
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
            .and_then(|bytes| crate::private_file::write(&path, &bytes));
        if let Err(e) = written {
            tracing::warn!(host = %self.name, "cannot save the host's port for the next run: {e}");
        }
    }

    /// Removes closed terminals' files on the host (token, launcher, Claude
    /// settings, attach script, exit status) and ends their tmux sessions;
    /// when the host cannot be reached, on the link's next way up.
    pub async fn remove_terminal_files(&self, ids: &[u64]) {
        if self.lock().state != LinkState::Up {
            // Not through ssh's fallback to a direct connection either: a
            // frozen host would hold the Close.
            tracing::info!(host = %self.name, "a closed terminal's files stay until the link is up");
            self.lock().leftover_terminals.extend_from_slice(ids);
            self.save();
            return;
        }
        let dirs = [self.terminal_files_dir(), self.tmux_files_dir()];
        let files: Vec<String> = ids
            .iter()
            .flat_map(|id| {
                dirs.iter().flat_map(move |dir| {
                    ["token", "launch", "attach", "exit", "exit.tmp"]
                        .map(|ext| format!("{dir}/{id}.{ext}"))
                        .into_iter()
                        .chain([format!("{dir}/{id}-claude-settings.json")])
                })
            })
            .map(|path| shell_quote(&path))
            .collect();
        let tmux = remote_tmux::tmux_command(&self.app_name, &self.tmux_files_dir());
        let sessions: String = ids
            .iter()
            .map(|id| format!("{tmux} kill-window -t '=krad:=krad-{id}' 2>/dev/null\n"))
            .collect();
        let script = format!(
            "if command -v tmux >/dev/null 2>&1; then\n{sessions}fi\nrm -f -- {}",
            files.join(" ")
        );
        if let Err(e) = self.run_raw(&script, None).await {
            tracing::info!(host = %self.name, "a closed terminal's files stay until the link is up: {e}");
            self.lock().leftover_terminals.extend_from_slice(ids);
            self.save();
        }
    }

    /// Ends this app's tmux server on the host and removes its folders there
    /// (`krad stop`: nothing of the app is left on the host). Needs the link
    /// up; else the files stay (the next app's link removes the token folder).
    async fn remove_everything(&self) {
        if self.lock().state != LinkState::Up {
            return;
        }
        let script = format!(
            "if command -v tmux >/dev/null 2>&1; then {tmux} kill-server 2>/dev/null; fi\n\
             rm -rf -- {tmux_dir} {pid_dir}",
            tmux = remote_tmux::tmux_command(&self.app_name, &self.tmux_files_dir()),
            tmux_dir = shell_quote(&self.tmux_files_dir()),
            pid_dir = shell_quote(&self.terminal_files_dir()),
        );
        match self.run_raw(&script, None).await {
            Ok(_) => {
                tracing::info!(host = %self.name, "ended the terminals on the host and removed their files")
            }
            Err(e) => tracing::warn!(host = %self.name, "cannot clean the host: {e}"),
        }
    }

    /// Removes the token folders (`~/.krad-ade/remote-<pid>`) that apps of this
    /// machine which are gone left on the host: their terminals ended with them.
    async fn remove_dead_apps_files(&self) {
        let Ok((_, listed, _)) = self
            .run_raw("ls -1 \"$HOME/.krad-ade\" 2>/dev/null", None)
            .await
        else {
            return;
        };
        let dead: Vec<String> = String::from_utf8_lossy(&listed)
            .lines()
            .filter_map(|name| {
                let pid: u32 = name.strip_prefix("remote-")?.parse().ok()?;
                let gone = pid != std::process::id() && !krad_bus::api_json::pid_alive(pid);
                gone.then(|| format!("\"$HOME/.krad-ade/remote-{pid}\""))
            })
            .collect();
        if dead.is_empty() {
            return;
        }
        let script = format!("rm -rf -- {}", dead.join(" "));
        match self.run_raw(&script, None).await {
            Ok(_) => tracing::info!(
                host = %self.name,
                folders = dead.len(),
                "removed the token folders of apps that are gone"
            ),
            Err(e) => tracing::warn!(host = %self.name, "cannot remove old token folders: {e}"),
        }
    }

    /// Asks the control connection for the reverse forward; the host's port.
    async fn forward(&self, wanted: u16) -> Result<u16, String> {
        let spec = format!("{wanted}:127.0.0.1:{}", self.bus_port);
        let out = self
            .control_command(&["forward", "-R", &spec])
            .output()
            .await
            .map_err(|e| format!("cannot run ssh: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "{FORWARD_FAILED}: {}",
                ssh_reason(&String::from_utf8_lossy(&out.stderr))
            ));
        }
        if wanted != 0 {
            return Ok(wanted);
        }
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .map_err(|_| {
                format!(
                    "ssh did not say which port it allocated: {:?}",
                    String::from_utf8_lossy(&out.stdout)
                )
            })
    }

    /// `ssh -S <socket> -O <operation…> <destination>`: a request to the control
    /// connection.
    fn control_command(&self, operation: &[&str]) -> tokio::process::Command {
        let mut command = tokio::process::Command::new("ssh");
        command
            .arg("-S")
            .arg(&self.control)
            .arg("-O")
            .args(operation)
            .args(&self.config.options)
            .arg(&self.config.ssh)
            .stdin(Stdio::null());
        command
    }

    async fn control_check(&self) -> bool {
        self.control_command(&["check"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await
            .is_ok_and(|s| s.success())
    }

    /// Waits for the control connection to end, then re-opens it on the same
    /// port, with backoff, until it is up again or the app stops; and again.
    async fn supervise(
        self: Arc<Self>,
        mut child: tokio::process::Child,
        mut stderr: Option<tokio::process::ChildStderr>,
    ) {
        loop {
            let status = child.wait().await;
            let mut said = String::new();
            if let Some(err) = stderr.as_mut() {
                let _ = err.read_to_string(&mut said).await;
            }
            if self.stopping.is_set() {
                return;
            }
            let reason = match ssh_reason(&said) {
                said if said.is_empty() => format!(
                    "the ssh control connection ended ({})",
                    status.map(|s| s.to_string()).unwrap_or_default()
                ),
                said => said,
            };
            tracing::warn!(host = %self.name, "ssh link down: {reason}");
            self.set(LinkState::Down, Some(reason));
            let mut backoff = Duration::from_millis(250);
            loop {
                if self.stopping.is_set() {
                    return;
                }
                tokio::time::sleep(backoff).await;
                let wanted = self.lock().port.unwrap_or(0);
                let reopened = {
                    let _serial = self.connecting.lock().await;
                    self.start_master(wanted).await
                };
                match reopened {
                    Ok((port, new_child, new_stderr)) => {
                        self.lock().reconnects += 1;
                        tracing::info!(host = %self.name, port, "ssh link re-opened");
                        child = new_child;
                        stderr = new_stderr;
                        break;
                    }
                    Err(e) => {
                        self.set(LinkState::Down, Some(e));
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                    }
                }
            }
        }
    }

    /// Closes the control connection.
    pub async fn stop(&self) {
        self.stopping.set();
        if self.lock().state == LinkState::Stopped {
            return;
        }
        let _ = self
            .control_command(&["exit"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await;
        if let Some(pid) = self.lock().master_pid.and_then(|p| i32::try_from(p).ok()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        let _ = std::fs::remove_file(&self.control);
    }

    /// Whether the app is stopping.
    pub fn is_stopping(&self) -> bool {
        self.stopping.is_set()
    }

    /// The host's `$HOME`, once connected.
    pub fn home(&self) -> Option<String> {
        self.lock().home.clone()
    }

    /// Runs a shell script on the host through the control connection (connecting
    /// first): exit code, stdout, stderr. Without `stdin`, the script reaches the
    /// host through ssh's stdin, never on a command line; with `stdin` (the data
    /// for the script), the script is an argument of `ssh` and must hold no
    /// secret (paths and git arguments only).
    pub async fn run(
        self: &Arc<Self>,
        script: &str,
        stdin: Option<&[u8]>,
    ) -> Result<(Option<i32>, Vec<u8>, Vec<u8>), ApiError> {
        self.connect().await?;
        self.run_raw(script, stdin).await.map_err(|e| {
            ApiError::new(ErrorCode::Unavailable, format!("host {:?}: {e}", self.name))
                .with_detail(json!({ "host": self.name }))
        })
    }

    async fn run_raw(
        &self,
        script: &str,
        stdin: Option<&[u8]>,
    ) -> Result<(Option<i32>, Vec<u8>, Vec<u8>), String> {
        // Without data for its stdin, the script itself goes through stdin (to
        // `sh -s` on the host), never on a command line here or there: a setup
        // command may name what it should not. Its commands read /dev/null.
        let (remote, input) = match stdin {
            Some(input) => (script, std::borrow::Cow::Borrowed(input)),
            None => (
                "sh -s",
                std::borrow::Cow::Owned(format!("{{\n{script}\n}} </dev/null\n").into_bytes()),
            ),
        };
        let mut command = tokio::process::Command::new("ssh");
        command
            .args(self.ssh_args(false))
            .arg("--")
            .arg(remote)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot run ssh: {e}"))?;
        if let Some(mut pipe) = child.stdin.take() {
            let _ = pipe.write_all(&input).await;
        }
        let out = child
            .wait_with_output()
            .await
            .map_err(|e| format!("ssh did not finish: {e}"))?;
        if out.status.code() == Some(255) {
            return Err(format!(
                "the ssh link failed: {}",
                ssh_reason(&String::from_utf8_lossy(&out.stderr))
            ));
        }
        Ok((out.status.code(), out.stdout, out.stderr))
    }

    /// Writes a private (0600, in a 0700 directory) file on the host, its
    /// contents through stdin — never on a command line.
    pub async fn write_private(
        self: &Arc<Self>,
        path: &str,
        contents: &[u8],
    ) -> Result<(), ApiError> {
        let dir = path.rsplit_once('/').map_or(".", |(d, _)| d);
        let script = format!(
            "umask 077 && mkdir -p {dir} && chmod 700 {dir} && cat > {path}",
            dir = shell_quote(dir),
            path = shell_quote(path)
        );
        let (code, _, err) = self.run(&script, Some(contents)).await?;
        if code != Some(0) {
            return Err(ApiError::new(
                ErrorCode::Failed,
                format!(
                    "cannot write {path} on host {:?}: {}",
                    self.name,
                    String::from_utf8_lossy(&err).trim()
                ),
            ));
        }
        Ok(())
    }
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

/// What ssh said, as one line a person reads: without its CRs, the control
/// master's internals (`mux_client_…`, `ControlSocket …`) and debug lines —
/// its last line that is left, where ssh puts the cause. The whole text goes
/// to the log.
fn ssh_reason(said: &str) -> String {
    let internal = |line: &str| {
        [
            "mux_client",
            "muxclient",
            "mux_master",
            "control_persist",
            "ControlSocket",
            "debug1:",
        ]
        .iter()
        .any(|marker| line.contains(marker))
    };
    let lines: Vec<&str> = said
        .lines()
        .map(|line| line.trim_matches(|c: char| c == '\r' || c.is_whitespace()))
        .filter(|line| !line.is_empty())
        .collect();
    if lines.len() > 1 || said.contains('\r') {
        tracing::debug!("ssh said: {said:?}");
    }
    let chosen = lines
        .iter()
        .rev()
        .find(|line| !internal(line))
        .or(lines.last())
        .copied()
        .unwrap_or_default();
    chosen.chars().filter(|c| !c.is_control()).collect()
}

#[cfg(test)]
mod tests {
    use super::ssh_reason;

    #[test]
    fn ssh_reasons_are_one_clean_line() {
        let frozen = "mux_client_request_session: read from master failed: Broken pipe\r\n\
                      ssh: connect to host 127.0.0.1 port 2222: Connection refused\r\n";
        assert_eq!(
            ssh_reason(frozen),
            "ssh: connect to host 127.0.0.1 port 2222: Connection refused"
        );
        assert_eq!(
            ssh_reason("Control socket connect(/tmp/x): No such file\r\n"),
            "Control socket connect(/tmp/x): No such file"
        );
        assert_eq!(
            ssh_reason("mux_client_hello_exchange: write packet: Broken pipe"),
            "mux_client_hello_exchange: write packet: Broken pipe",
            "only internals: the last one"
        );
        assert_eq!(ssh_reason("  \r\n"), "");
    }
}
