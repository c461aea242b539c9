//! `Connections`: what a contained terminal tried to reach on the network —
//! every connection attempt its sandbox's proxy and relays saw (issue 39). An
//! addition of krad's to the contract, for `krad net`.

use serde::{Deserialize, Serialize};

use super::{Call, RequestKind, Rights};

/// The Connections request.
///
/// # Format
///
/// ```json
/// {"Connections":{"target":4}}
/// {"Connections":{"target":4,"since":12}}
/// {"Connections":{"terminal":4,"network":"allow","allow":["api.anthropic.com"],
///   "attempts":[{"seq":1,"at":"2026-12-06T12:00:00.000Z","host":"example.com","port":443,
///   "via":"proxy","allowed":false,"sent":0,"received":0}],"dropped":0}}
/// ```
///
/// Only a sandbox with `[sandbox] network = "allow"` has its connections
/// logged; any other terminal answers with `network` null and no attempts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Connections {
    /// The terminal.
    pub target: u64,
    /// Only the attempts after this one (`seq`), to follow the log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
}

impl Call for Connections {
    const KIND: RequestKind = RequestKind::Connections;
    const RIGHTS: Rights = Rights::Anyone;
    const AT_MOST_ONCE: bool = false;
    type Answer = ConnectionsInfo;
}

/// The answer to Connections.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionsInfo {
    /// The terminal.
    pub terminal: u64,
    /// `"allow"` for a sandbox whose connections are checked and logged;
    /// null for any other terminal (shared network, none, or no sandbox).
    pub network: Option<String>,
    /// What its sandbox may reach: `host` (any port) or `host:port`.
    #[serde(default)]
    pub allow: Vec<String>,
    /// The attempts kept, oldest first.
    #[serde(default)]
    pub attempts: Vec<ConnectionAttempt>,
    /// Older attempts no longer kept (the log is bounded).
    #[serde(default)]
    pub dropped: u64,
}

/// One connection attempt from inside a sandbox.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionAttempt {
    /// Its number in the terminal's log, from 1.
    pub seq: u64,
    /// When it was made (RFC 3339, UTC).
    pub at: String,
    /// The host asked for, as asked (a name or an address).
    pub host: String,
    /// The port asked for.
    pub port: u16,
    /// How: `"proxy"` (plain HTTP through the proxy), `"tunnel"` (HTTP
    /// CONNECT), or `"relay"` (a loopback address taken inside the sandbox).
    pub via: String,
    /// Whether the allowlist let it through.
    pub allowed: bool,
    /// Bytes from the sandbox to the host (so far, or in all once it ended).
    #[serde(default)]
    pub sent: u64,
    /// Bytes from the host to the sandbox.
    #[serde(default)]
    pub received: u64,
    /// Why an allowed attempt failed (the host could not be reached…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
