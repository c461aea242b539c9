//! The embedded app that `krad serve` runs behind the bus.
//!
//! It owns the repository it serves. Terminals, agents and environments are
//! hosted here as their requests land (see the project's issues); until then the
//! app knows no agents and the bus answers their requests `unknown_request`.

use std::path::{Path, PathBuf};

use krad_bus::server::App;

/// The app `krad serve` runs.
#[derive(Debug)]
pub struct EmbeddedApp {
    root: PathBuf,
}

impl EmbeddedApp {
    /// An app serving the repository at `root`.
    pub fn new(root: PathBuf) -> EmbeddedApp {
        EmbeddedApp { root }
    }

    /// The repository the app serves (the `main` environment).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Stops the app's work before the process exits.
    pub async fn shutdown(&self, close_terminals: bool) {
        tracing::info!(close_terminals, "app stopped");
    }
}

impl App for EmbeddedApp {
    async fn agent_count(&self) -> u64 {
        0
    }
}
