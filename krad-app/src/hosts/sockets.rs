//! Unix sockets of this machine's app carried to a host over the link: a
//! contained terminal there with a network of its own (`[sandbox] network =
//! "none"` or `"allow"`) reaches the bus and the app's proxy through sockets
//! on the host that the control connection forwards here (`ssh -O forward -R
//! <host path>:<local path>`), one folder of them per terminal in the app's
//! 0700 folder there.
//!
//! sshd does not remove a forwarded socket when its session ends, and binds
//! over none by default (`StreamLocalBindUnlink no`): the app removes what a
//! path holds before each forward. The forwards are kept per terminal, asked
//! for again each time the link is re-opened (the old session's are gone
//! with it), and cancelled at the terminal's Close.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use krad_bus::protocol::{ApiError, ErrorCode, LinkState};

use super::Host;
use super::link::ssh_reason;
use crate::profile::shell_quote;

/// How long the control connection may take to answer a forward.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(20);

/// One socket carried to the host: its path there, and the app's here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Carried {
    /// The path on the host (absolute: ssh does not expand `~`).
    pub there: String,
    /// The app's listening socket here.
    pub here: PathBuf,
}

impl Carried {
    /// ssh's `-R` spec.
    fn spec(&self) -> String {
        format!("{}:{}", self.there, self.here.display())
    }
}

impl Host {
    /// Carries `sockets` of terminal `id` to the host, in `dir` there (made
    /// anew, 0700): each path's old socket removed, then forwarded through the
    /// control connection. Kept for the link's next way up. `failed`, saying
    /// what to change, when the host refuses Unix-socket forwarding.
    pub(crate) async fn carry_sockets(
        self: &Arc<Self>,
        id: u64,
        dir: &str,
        sockets: Vec<Carried>,
    ) -> Result<(), ApiError> {
        let script = format!(
            "umask 077 && rm -rf -- {dir} && mkdir -p -- {dir} && chmod 700 {dir}",
            dir = shell_quote(dir)
        );
        let (code, _, err) = self.run(&script, None).await?;
        if code != Some(0) {
            return Err(ApiError::new(
                ErrorCode::Failed,
                format!(
                    "cannot make the sandbox's socket folder {dir} on host {:?}: {}",
                    self.name,
                    String::from_utf8_lossy(&err).trim()
                ),
            ));
        }
        if let Err(reason) = self.forward_sockets(&sockets).await {
            self.cancel_forwards(&sockets).await;
            let _ = self
                .run_raw(&format!("rm -rf -- {}", shell_quote(dir)), None)
                .await;
            if self.lock().state != LinkState::Up {
                return Err(self.refusal_while_down());
            }
            return Err(ApiError::new(
                ErrorCode::Failed,
                format!(
                    "SSH host {:?} refused to forward this sandbox's socket ({reason}): a \
                     contained agent with [sandbox] network = \"none\" or \"allow\" on a host \
                     reaches the bus and its allowlist through a Unix socket forwarded over \
                     the link, which needs `AllowStreamLocalForwarding yes` (sshd's default) \
                     and no `DisableForwarding` in the host's sshd_config; or run this agent \
                     here, or with network = \"all\"",
                    self.name
                ),
            ));
        }
        super::lock(&self.carried).insert(id, sockets);
        Ok(())
    }

    /// Cancels the forwards of terminals `ids` (their Close); their folders
    /// on the host go with the terminals' other files.
    pub(super) async fn drop_sockets(&self, ids: &[u64]) {
        let gone: Vec<Carried> = {
            let mut carried = super::lock(&self.carried);
            ids.iter()
                .filter_map(|id| carried.remove(id))
                .flatten()
                .collect()
        };
        if !gone.is_empty() && self.lock().state == LinkState::Up {
            self.cancel_forwards(&gone).await;
        }
    }

    /// Once the control connection is re-opened: every terminal's sockets
    /// forwarded again (the old ones' paths cleared first).
    pub(super) async fn carry_sockets_again(&self) {
        let all: Vec<Carried> = super::lock(&self.carried)
            .values()
            .flatten()
            .cloned()
            .collect();
        if all.is_empty() {
            return;
        }
        let paths: Vec<String> = all.iter().map(|c| shell_quote(&c.there)).collect();
        if let Err(e) = self
            .run_raw(&format!("rm -f -- {}", paths.join(" ")), None)
            .await
        {
            tracing::warn!(host = %self.name, "cannot clear the sandboxes' sockets there: {e}");
        }
        match self.forward_sockets(&all).await {
            Ok(()) => tracing::info!(
                host = %self.name,
                sockets = all.len(),
                "the sandboxes' sockets are forwarded again"
            ),
            Err(e) => tracing::warn!(
                host = %self.name,
                "cannot forward the sandboxes' sockets again; their agents lose the bus: {e}"
            ),
        }
    }

    /// `ssh -O forward -R there:here…`; ssh's reason when it fails (or does
    /// not answer within [`FORWARD_TIMEOUT`]).
    async fn forward_sockets(&self, sockets: &[Carried]) -> Result<(), String> {
        let specs: Vec<String> = sockets.iter().map(Carried::spec).collect();
        let mut operation = vec!["forward"];
        for spec in &specs {
            operation.extend(["-R", spec.as_str()]);
        }
        let mut command = self.control_command(&operation);
        command
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let out = match tokio::time::timeout(FORWARD_TIMEOUT, command.output()).await {
            Ok(Ok(out)) => out,
            Ok(Err(e)) => return Err(format!("cannot run ssh: {e}")),
            Err(_) => {
                return Err(format!(
                    "the control connection did not answer within {} s",
                    FORWARD_TIMEOUT.as_secs()
                ));
            }
        };
        if out.status.success() {
            return Ok(());
        }
        Err(forward_refusal(&String::from_utf8_lossy(&out.stderr)))
    }

    /// `ssh -O cancel -R there:here`, one socket at a time (a failed one does
    /// not keep the others).
    async fn cancel_forwards(&self, sockets: &[Carried]) {
        for socket in sockets {
            let spec = socket.spec();
            let cancelled = self
                .control_command(&["cancel", "-R", &spec])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .status();
            let _ = tokio::time::timeout(FORWARD_TIMEOUT, cancelled).await;
        }
    }
}

/// Why a forward was refused, as one line: the master's words (`remote port
/// forwarding failed for listen path …`) rather than the mux client's
/// internals around them.
fn forward_refusal(said: &str) -> String {
    said.lines()
        .find_map(|line| line.split_once("forwarding request failed: "))
        .map(|(_, why)| why.trim().chars().filter(|c| !c.is_control()).collect())
        .unwrap_or_else(|| ssh_reason(said))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_forward_says_the_master_s_words() {
        let said = "mux_client_forward: forwarding request failed: remote port forwarding \
                    failed for listen path /h/.krad-ade/r/3-net/bus.sock\r\n\
                    muxclient: master forward request failed\r\n";
        assert_eq!(
            forward_refusal(said),
            "remote port forwarding failed for listen path /h/.krad-ade/r/3-net/bus.sock"
        );
        assert_eq!(
            forward_refusal("Control socket connect(/tmp/x): No such file\n"),
            "Control socket connect(/tmp/x): No such file"
        );
        let carried = Carried {
            there: "/h/3-net/net.sock".into(),
            here: "/s/sandbox/3.net.sock".into(),
        };
        assert_eq!(carried.spec(), "/h/3-net/net.sock:/s/sandbox/3.net.sock");
    }
}
