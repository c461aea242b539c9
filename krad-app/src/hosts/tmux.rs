//! A host's terminals in tmux there: the app's tmux server's settings on the
//! host, and the one tmux control client (krad-term's tmux host run through
//! the link) that carries them and takes them back after the link was down.

use std::sync::Arc;
use std::time::Duration;

use krad_bus::protocol::LinkState;

use krad_term::TmuxHost;

use super::Host;

/// How many times the terminals waiting for the link are asked for, at most,
/// each time it is up.
const RESUME_TRIES: u32 = 12;
use crate::remote_tmux;

impl Host {
    /// The terminals in tmux on the host (one control client for them all),
    /// when it has tmux (and the link was up, to know it).
    pub(crate) fn tmux_terminals(&self) -> Option<Arc<TmuxHost>> {
        (self.has_tmux() == Some(true)).then(|| Arc::clone(&self.terminals))
    }

    /// The host's terminal host for tmux there, whether or not the host was
    /// reached yet (a restarted app's terminals wait in it for the link).
    pub(crate) fn tmux_host(&self) -> Arc<TmuxHost> {
        Arc::clone(&self.terminals)
    }

    /// Writes the settings of the app's tmux server on the host (and applies
    /// them to it if it runs): before its control client starts.
    pub(super) async fn write_tmux_settings(&self) {
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

    /// Once the link is up: has the host's tmux client take back the
    /// terminals waiting for it, in the background (it blocks on the round
    /// trips), trying again with backoff while some wait and the link stays up.
    pub(crate) fn resume_terminals(self: &Arc<Self>) {
        if self.has_tmux() == Some(false) {
            // Kept by an app when the host had tmux; it has none now (or tmux
            // was turned off): they can never be taken back.
            let gone = self.terminals.let_go_of_waiting();
            if gone > 0 {
                tracing::warn!(
                    host = %self.name,
                    terminals = gone,
                    "the host no longer runs terminals in tmux: its kept terminals end"
                );
            }
            return;
        }
        if self.tmux_terminals().is_none() {
            return;
        }
        let host = Arc::clone(self);
        tokio::spawn(async move {
            let mut pause = Duration::from_millis(250);
            for _ in 0..RESUME_TRIES {
                let terminals = host.tmux_host();
                let resumed = tokio::task::spawn_blocking(move || {
                    terminals.resume().map(|()| terminals.waiting())
                })
                .await;
                match resumed {
                    Ok(Ok(0)) | Err(_) => return,
                    Ok(Ok(waiting)) => {
                        tracing::info!(host = %host.name, waiting, "terminals still wait to be taken back")
                    }
                    Ok(Err(error)) => {
                        tracing::info!(host = %host.name, %error, "the host's terminals wait to be taken back")
                    }
                }
                if host.lock().state != LinkState::Up || host.is_stopping() {
                    return;
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(5));
            }
            tracing::warn!(host = %host.name, "terminals could not be taken back; trying again when the link is up again");
        });
    }
}
