//! A host's link, the one state machine of its control connection: opening
//! it (`ssh -M`, the reverse forward of the bus, on the port the programs were
//! told), noticing it go (`connecting` → `up` → `down` with a reason and since),
//! re-opening it with backoff, closing it.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use krad_bus::protocol::{ApiError, ErrorCode, LinkState};
use serde_json::json;
use tokio::io::AsyncReadExt;

use super::Host;

/// How long a connection may take to come up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);
/// The first wait before re-opening a link that went down.
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// The longest wait between two attempts to re-open a link: a host that comes
/// back is up again within this (plus ssh's own connect), so its agents' calls
/// get through within about 2 s of it. An attempt is one `ssh` process, and a
/// refused one ends at once: cheap enough to make every 2 s while a host is
/// down.
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// How many times a first connection asks again for the port saved by an
/// earlier run (its old session on the host may still hold it) before taking
/// any port.
const SAVED_PORT_TRIES: u32 = 5;
/// The prefix of a failed forward's reason.
const FORWARD_FAILED: &str = "the reverse forward to the bus failed";

impl Host {
    /// Makes sure the control connection and its forward are up; returns the
    /// port the bus is forwarded to on the host. A host that cannot be reached
    /// is `unavailable` with ssh's own reason.
    ///
    /// Never waits on ssh for a host that is `down` (re-opened in the
    /// background) or that `failed` while another attempt runs: the answer is
    /// `unavailable` at once with the reason known.
    pub(crate) async fn connect(self: &Arc<Self>) -> Result<u16, ApiError> {
        if let Some(known) = self.known_answer(false) {
            return known;
        }
        let _serial = match self.connecting.try_lock() {
            Ok(serial) => serial,
            Err(_) => {
                // An attempt runs: a first connection is waited for; a host
                // already known to fail is refused at once.
                if let Some(known) = self.known_answer(true) {
                    return known;
                }
                self.connecting.lock().await
            }
        };
        if let Some(known) = self.known_answer(false) {
            return known;
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
                Err(self.unavailable(format!(
                    "cannot reach host {:?} ({}): {reason}",
                    self.name, self.config.ssh
                )))
            }
        }
    }

    /// What a request that needs the link is answered without trying: the
    /// port when it is up; `unavailable` when it is down (being re-opened in
    /// the background), and, with `failed_too`, when it failed (an attempt
    /// runs now). `None`: try.
    fn known_answer(&self, failed_too: bool) -> Option<Result<u16, ApiError>> {
        let link = self.lock();
        match (link.state, link.port) {
            (LinkState::Up, Some(port)) => Some(Ok(port)),
            (LinkState::Down, _) => Some(Err(self.unavailable(format!(
                "host {:?} is down since {}: {}; krad re-opens the link by itself",
                self.name,
                link.since,
                link.error.as_deref().unwrap_or("the link was lost")
            )))),
            (LinkState::Failed, _) if failed_too => Some(Err(self.unavailable(format!(
                "cannot reach host {:?} ({}) since {}: {}",
                self.name,
                self.config.ssh,
                link.since,
                link.error.as_deref().unwrap_or("the connection failed")
            )))),
            _ => None,
        }
    }

    /// What a request is answered once the link went down under it.
    pub(super) fn refusal_while_down(&self) -> ApiError {
        match self.known_answer(false) {
            Some(Err(refusal)) => refusal,
            _ => self.unavailable(format!(
                "the link to host {:?} went down; krad re-opens it by itself",
                self.name
            )),
        }
    }

    /// `unavailable` (retryable) for this host, with `message`.
    fn unavailable(&self, message: String) -> ApiError {
        ApiError::new(ErrorCode::Unavailable, message).with_detail(json!({ "host": self.name }))
    }

    /// Opens the link for terminals that wait on it (a restarted app's, kept
    /// on the host): again and again until it is up or the app stops, the
    /// host `down` with ssh's reason meanwhile (krad re-opens it; requests
    /// are answered `unavailable` at once). Whether it is up.
    pub(crate) async fn open_for_waiting_terminals(self: &Arc<Self>) -> bool {
        let mut backoff = FIRST_BACKOFF;
        loop {
            if self.stopping.is_set() {
                return false;
            }
            let attempt = {
                let _serial = self.connecting.lock().await;
                if let Some(Ok(_)) = self.known_answer(false) {
                    return true;
                }
                let wanted = self.lock().port.unwrap_or(0);
                self.open_asking_for(wanted).await
            };
            match attempt {
                Ok(_) => return true,
                Err(reason) => {
                    tracing::info!(host = %self.name, "the terminals there wait for the link: {reason}");
                    self.set(LinkState::Down, Some(reason));
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// Opens the link asking for `wanted`. A port saved by an earlier run is
    /// asked for a few times (the old session on the host may not have let it
    /// go yet), then any port is taken: the app works, though terminals that
    /// outlived the old app no longer reach it.
    pub(super) async fn open_asking_for(self: &Arc<Self>, wanted: u16) -> Result<u16, String> {
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
    pub(super) async fn open(self: &Arc<Self>, wanted_port: u16) -> Result<u16, String> {
        let (port, child, stderr) = self.start_master(wanted_port).await?;
        self.resume_terminals();
        let this = self.clone();
        tokio::spawn(async move { this.supervise(child, stderr).await });
        Ok(port)
    }

    /// Starts `ssh -M` and the forward; the port, the master and its stderr.
    pub(super) async fn start_master(
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
        // A re-opened link: the contained terminals' sockets went with the
        // old session.
        self.carry_sockets_again().await;
        self.link_up(port, child.id()).await;
        Ok((port, child, stderr))
    }

    /// Runs `ssh -M -N` on the control socket, its stderr piped.
    pub(super) fn spawn_master(&self) -> Result<tokio::process::Child, String> {
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
    pub(super) async fn wait_for_control(
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
    /// tmux; saves the port and home for the next run; writes the settings of
    /// the app's tmux server there; the link is up.
    pub(super) async fn link_up(&self, port: u16, master_pid: Option<u32>) {
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
        self.remove_dead_apps_files().await;
        let leftovers = std::mem::take(&mut self.lock().leftover_terminals);
        if !leftovers.is_empty() {
            self.remove_terminal_files(&leftovers).await;
            self.save();
        }
    }

    /// Asks the control connection for the reverse forward; the host's port.
    pub(super) async fn forward(&self, wanted: u16) -> Result<u16, String> {
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
    pub(super) fn control_command(&self, operation: &[&str]) -> tokio::process::Command {
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

    pub(super) async fn control_check(&self) -> bool {
        self.control_command(&["check"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await
            .is_ok_and(|s| s.success())
    }

    /// Waits for the control connection to end, then re-opens it on the same
    /// port, with backoff, until it is up again or the app stops; and again.
    pub(super) async fn supervise(
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
                    "the ssh control connection ended ({}): the host stopped answering \
                     its keepalives, or closed the connection",
                    status.map(|s| s.to_string()).unwrap_or_default()
                ),
                said => said,
            };
            tracing::warn!(host = %self.name, "ssh link down: {reason}");
            self.set(LinkState::Down, Some(reason));
            let mut backoff = FIRST_BACKOFF;
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
                        self.resume_terminals();
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
    pub(crate) async fn stop(&self) {
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
}

/// What ssh said, as one line a person reads: without its CRs, the control
/// master's internals (`mux_client_…`, `ControlSocket …`) and debug lines —
/// its last line that is left, where ssh puts the cause. The whole text goes
/// to the log.
pub(super) fn ssh_reason(said: &str) -> String {
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
