//! What the app runs and keeps on a host through its link: scripts and
//! private files written through ssh's stdin, and their removal — a closed
//! terminal's files, everything at `krad stop`, the token folders of apps
//! that are gone.

use std::process::Stdio;
use std::sync::Arc;

use krad_bus::protocol::{ApiError, ErrorCode, LinkState};
use serde_json::json;
use tokio::io::AsyncWriteExt;

use super::Host;
use super::link::ssh_reason;
use crate::profile::shell_quote;
use crate::remote_tmux;

/// How the pid files of checks running on the host end ([`Host::check_pid_file`]).
const CHECK_PID: &str = ".check-pid";

/// Where a check's shell on a host notes its pid, and for whom.
#[derive(Debug)]
pub(crate) struct CheckPidFile {
    /// Its path there.
    pub path: String,
    /// The terminal whose usage the run counts in.
    pub terminal: u64,
    /// The run, numbered by the app ([`crate::checks`]).
    pub run: u64,
}

impl Host {
    /// Removes closed terminals' files on the host (token, launcher, Claude
    /// settings, attach script, exit status, a sandbox's private home and
    /// socket folder, its variant's checks' homes and pid files) and ends their tmux sessions, their forwarded sockets
    /// cancelled; when the host cannot be reached, on the link's next way up.
    pub(crate) async fn remove_terminal_files(&self, ids: &[u64]) {
        self.drop_sockets(ids).await;
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
                        .chain([
                            format!("{dir}/{id}-claude-settings.json"),
                            format!("{dir}/{id}-home"),
                            format!("{dir}/{id}-net"),
                        ])
                })
            })
            .map(|path| shell_quote(&path))
            .chain(ids.iter().flat_map(|id| {
                // A check's private home and pid file left by a run cut off
                // (its link dropped): globs, after the quoted folder.
                dirs.iter().flat_map(move |dir| {
                    [
                        format!("{}*", shell_quote(&format!("{dir}/{id}-check-"))),
                        format!("{}*{CHECK_PID}", shell_quote(&format!("{dir}/{id}-"))),
                    ]
                })
            }))
            .collect();
        let tmux = remote_tmux::tmux_command(&self.app_name, &self.tmux_files_dir());
        let sessions: String = ids
            .iter()
            .map(|id| format!("{tmux} kill-window -t '=krad:=krad-{id}' 2>/dev/null\n"))
            .collect();
        let script = format!(
            "if command -v tmux >/dev/null 2>&1; then\n{sessions}fi\nrm -rf -- {}",
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
    pub(super) async fn remove_everything(&self) {
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
    pub(super) async fn remove_dead_apps_files(&self) {
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

    /// Runs a shell script on the host through the control connection (connecting
    /// first): exit code, stdout, stderr. Without `stdin`, the script reaches the
    /// host through ssh's stdin, never on a command line; with `stdin` (the data
    /// for the script), the script is an argument of `ssh` and must hold no
    /// secret (paths and git arguments only). Should the link go down
    /// meanwhile, the script's ssh is ended and the answer is `unavailable`
    /// at once, as for any request while the host is down.
    pub(crate) async fn run(
        self: &Arc<Self>,
        script: &str,
        stdin: Option<&[u8]>,
    ) -> Result<(Option<i32>, Vec<u8>, Vec<u8>), ApiError> {
        let mut drops = self.drops.subscribe();
        self.connect().await?;
        tokio::select! {
            ran = self.run_raw(script, stdin) => ran.map_err(|e| {
                ApiError::new(ErrorCode::Unavailable, format!("host {:?}: {e}", self.name))
                    .with_detail(json!({ "host": self.name }))
            }),
            _ = drops.changed() => Err(self.refusal_while_down()),
        }
    }

    /// What the usage sampler needs of the host's terminals in tmux there,
    /// read through the link only while it is up (never opening it): the
    /// host's clock ticks per second and page size, each pane's terminal id
    /// and pid — and those of the checks running for a terminal's variant
    /// ([`Host::check_pid_file`]) — then every process's `/proc/<pid>/stat`,
    /// in sections split by `---` lines. `None`: the link is not up, the
    /// host has no tmux, or the read failed.
    pub(crate) async fn processes_for_usage(&self) -> Option<String> {
        if self.lock().state != krad_bus::protocol::LinkState::Up || self.has_tmux() != Some(true) {
            return None;
        }
        let dir = self.tmux_files_dir();
        let tmux = crate::remote_tmux::tmux_command(&self.app_name, &dir);
        let script = format!(
            "getconf CLK_TCK; getconf PAGESIZE; echo ---\n\
             {tmux} list-panes -a -F '#{{@krad-terminal}} #{{pane_pid}}' 2>/dev/null\n\
             cat {dir}/*{CHECK_PID} 2>/dev/null; echo ---\n\
             cat /proc/[0-9]*/stat 2>/dev/null\nexit 0",
            dir = shell_quote(&dir)
        );
        match self.run_raw(&script, None).await {
            Ok((Some(0), out, _)) => Some(String::from_utf8_lossy(&out).into_owned()),
            _ => None,
        }
    }

    /// Where a check for terminal `id`'s variant, its `run`th, notes its pid
    /// there while it runs (`<id> <pid> <run>`), for the usage sampler: in
    /// the folder of the terminals in tmux, which are the ones sampled there.
    /// From now on what the sampler sees of the run is kept for
    /// [`Host::check_usage`]. `None` on a host without tmux.
    pub(crate) fn check_pid_file(&self, id: u64, run: u64) -> Option<CheckPidFile> {
        if self.has_tmux() != Some(true) {
            return None;
        }
        super::lock(&self.checks_seen).insert(run, None);
        Some(CheckPidFile {
            path: format!("{}/{id}-{run}{CHECK_PID}", self.tmux_files_dir()),
            terminal: id,
            run,
        })
    }

    /// Notes one sample of the checks running on the host: each run's CPU
    /// time (ms) and resident bytes now. Only the runs given a pid file count
    /// ([`Host::check_pid_file`]); each keeps the most seen.
    pub(crate) fn saw_checks(&self, sampled: &[(u64, (u64, u64))]) {
        let mut seen = super::lock(&self.checks_seen);
        for &(run, (cpu_ms, rss)) in sampled {
            if let Some(most) = seen.get_mut(&run) {
                let (was_cpu, was_rss) = most.unwrap_or_default();
                *most = Some((was_cpu.max(cpu_ms), was_rss.max(rss)));
            }
        }
    }

    /// The most CPU time (ms) and resident bytes the usage sampler saw check
    /// run `run` use on the host, forgotten now (the run is over); `None` if
    /// no sample saw it (shorter than a sample's period, or the link down).
    pub(crate) fn check_usage(&self, run: u64) -> Option<(u64, u64)> {
        super::lock(&self.checks_seen).remove(&run).flatten()
    }

    pub(super) async fn run_raw(
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
    pub(crate) async fn write_private(
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
