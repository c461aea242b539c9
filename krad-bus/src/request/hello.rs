//! `Hello`: the handshake. Answered by the bus itself, never queued behind app work.

use super::{Call, RequestKind, Rights};
use serde::{Deserialize, Serialize};

/// The Hello request (no fields).
///
/// # Format
///
/// ```json
/// {"api_version":1,"token":"…","from":"Client","request":"Hello"}
/// {"Hello":{"api_version":1,"build":"0.1.0","pid":48211,"requests":["Hello","Stats","Shutdown"]}}
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Hello {}

/// The answer to Hello.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HelloInfo {
    /// The API version served.
    pub api_version: u64,
    /// The app's build.
    pub build: String,
    /// The app's process id, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Every request this app serves, so a client can check before it asks.
    #[serde(default)]
    pub requests: Vec<String>,
    /// Whether this app can limit a terminal's memory (cgroup v2 delegated,
    /// or why not), as the app announced it at start (a wire addition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limits: Option<String>,
}

/// What [`HelloInfo::memory_limits`] says, set once by the app at start.
static MEMORY_LIMITS: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Sets what Hello says of memory limits in this process (first call wins).
pub fn announce_memory_limits(text: String) {
    let _ = MEMORY_LIMITS.set(text);
}

impl HelloInfo {
    /// The Hello answer of this process.
    pub fn of_this_process() -> Self {
        HelloInfo {
            api_version: crate::protocol::API_VERSION,
            build: crate::protocol::BUILD.to_owned(),
            pid: Some(std::process::id()),
            requests: super::RequestKind::ALL
                .iter()
                .map(|kind| kind.name().to_owned())
                .collect(),
            memory_limits: MEMORY_LIMITS.get().cloned(),
        }
    }
}

impl Call for Hello {
    const KIND: RequestKind = RequestKind::Hello;
    const RIGHTS: Rights = Rights::Anyone;
    const AT_MOST_ONCE: bool = false;
    type Answer = HelloInfo;
}
