//! SSH hosts as `Hosts` and `CheckHost` answer them: each host's link.

use serde::{Deserialize, Serialize};

/// The state of a host's SSH link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkState {
    /// Not used yet.
    Stopped,
    /// Being opened for the first time.
    Connecting,
    /// Open: terminals and environments on the host work.
    Up,
    /// Lost, being re-opened.
    Down,
    /// Could not be opened; requests to the host fail until it is.
    Failed,
    /// A state this build does not know (from a newer app).
    #[serde(other)]
    Other,
}

impl LinkState {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            LinkState::Stopped => "stopped",
            LinkState::Connecting => "connecting",
            LinkState::Up => "up",
            LinkState::Down => "down",
            LinkState::Failed => "failed",
            LinkState::Other => "?",
        }
    }
}

impl std::fmt::Display for LinkState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One host's link, as `krad hosts` shows it.
///
/// # Format
///
/// ```json
/// {"name":"gpu","ssh":"me@gpu-box","root":"/srv/repo","state":"up","tmux":true,
///  "remote_port":40211,"error":null,"since":"2026-01-01T00:00:00Z","reconnects":0}
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostStatus {
    /// The host's name in the config.
    pub name: String,
    /// The ssh destination.
    pub ssh: String,
    /// The repository on the host.
    pub root: String,
    /// The link's state.
    pub state: LinkState,
    /// Whether the host has tmux: then its terminals live in tmux there and
    /// outlive the link and the app; without it, a terminal ends with its
    /// link. `null` until the link was up once.
    #[serde(default)]
    pub tmux: Option<bool>,
    /// The port the host allocated for the bus (stable across reconnections).
    pub remote_port: Option<u16>,
    /// ssh's own words, when the link is not up.
    pub error: Option<String>,
    /// Since when the state holds (RFC 3339).
    pub since: String,
    /// How many times the link was re-opened.
    pub reconnects: u64,
}
