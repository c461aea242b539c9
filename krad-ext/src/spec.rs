//! What the manager and each server are started with: a server's spec, the
//! manager's limits, and the `unavailable` error both answer. Imports nothing
//! of the crate.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use krad_bus::protocol::{ApiError, ErrorCode, MAX_RESPONSE};
use serde_json::json;

/// How to start one server: the `[extensions.NAME]` table, its `cwd` resolved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerSpec {
    /// The program.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extra environment (on top of the app's).
    pub env: BTreeMap<String, String>,
    /// Its working directory.
    pub cwd: PathBuf,
}

/// The manager's limits.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Time for a new server to answer `initialize` and `tools/list`.
    pub start_timeout: Duration,
    /// The longest wait between two starts of a failing server.
    pub backoff_max: Duration,
    /// Time a server has to exit once its stdin is closed, before SIGKILL.
    pub stop_grace: Duration,
    /// The most bytes a tool's content may take in an answer; more is cut and
    /// marked `truncated`.
    pub max_content: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            start_timeout: Duration::from_secs(10),
            backoff_max: Duration::from_secs(30),
            stop_grace: Duration::from_secs(2),
            max_content: MAX_RESPONSE - 64 * 1024,
        }
    }
}

/// `unavailable` for an extension, with `detail.extension`.
pub(crate) fn unavailable(extension: &str, message: impl Into<String>) -> ApiError {
    ApiError::new(ErrorCode::Unavailable, message).with_detail(json!({ "extension": extension }))
}
