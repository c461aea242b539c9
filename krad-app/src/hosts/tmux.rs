//! A host's terminals in tmux there: the app's tmux server's settings on the
//! host, and the one tmux control client (krad-term's tmux host run through
//! the link) that carries them and takes them back after the link was down.

use std::sync::Arc;

use krad_term::TmuxHost;

use super::Host;
use crate::remote_tmux;

impl Host {
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
}
