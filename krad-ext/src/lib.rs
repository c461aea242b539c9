//! krad's extensions: MCP servers named in the config file, reached over stdio.
//!
//! The [`ExtensionManager`] starts a server on its first use (never when it is
//! only listed), keeps the session, lists its tools, and lets several calls run
//! at once on one session. A server that dies, or will not start, is `failed`;
//! the next call that needs it starts it again — at once after one failure, then
//! with a backoff (1 s, 2 s, 4 s … at most [`Limits::backoff_max`]) during which
//! calls are answered `unavailable` without spawning anything. A call that
//! completes resets the backoff.
//!
//! Each server runs in its own process group; its stderr goes to the app's log
//! (tracing, target `krad_ext::server`), never to a client. When it exits, or
//! the app stops it, whatever it left in its group is killed.
//!
//! Cancellation: a call whose future is dropped (its client left, the bus's
//! deadline passed) sends the MCP `notifications/cancelled` for its request.
//!
//! A tool's result reaches the caller as the server sent it: its JSON is taken
//! from the server's output as it streams by (module `tap`), not rebuilt from
//! rmcp's typed model, which is lossy.

mod content;
mod process_group;
mod server;
mod spec;
mod tap;

pub use process_group::ProcessGroup;
pub use spec::{Limits, ServerSpec};

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use krad_bus::protocol::{ApiError, ErrorCode, ExtensionInfo, ToolResultInfo};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::server::Extension;

/// The extensions of one app.
pub struct ExtensionManager {
    extensions: BTreeMap<String, Arc<Extension>>,
    closed: CancellationToken,
    tasks: TaskTracker,
    limits: Limits,
}

impl std::fmt::Debug for ExtensionManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExtensionManager")
            .field("extensions", &self.extensions.keys().collect::<Vec<_>>())
            .field("limits", &self.limits)
            .finish()
    }
}

impl ExtensionManager {
    /// A manager for these servers; none is started yet.
    pub fn new(specs: BTreeMap<String, ServerSpec>, limits: Limits) -> ExtensionManager {
        let closed = CancellationToken::new();
        let tasks = TaskTracker::new();
        let extensions = specs
            .into_iter()
            .map(|(name, spec)| {
                let extension = Extension::new(
                    name.clone(),
                    spec,
                    limits.clone(),
                    closed.clone(),
                    tasks.clone(),
                );
                (name, Arc::new(extension))
            })
            .collect();
        ExtensionManager {
            extensions,
            closed,
            tasks,
            limits,
        }
    }

    /// Every extension, by name, with its state and the tools it last listed.
    /// Starts nothing.
    pub fn list(&self) -> Vec<ExtensionInfo> {
        self.extensions.values().map(|e| e.info()).collect()
    }

    /// Calls a tool, starting (or restarting) its server when needed.
    ///
    /// Errors: `not_found` for an unknown extension or tool, `unavailable` when
    /// the server will not start or dies during the call, `failed` when it
    /// answers the call with a protocol error. A tool error is an answer with
    /// `is_error: true`.
    pub async fn call(
        &self,
        extension: &str,
        tool: &str,
        arguments: Map<String, Value>,
    ) -> Result<ToolResultInfo, ApiError> {
        let Some(ext) = self.extensions.get(extension) else {
            let known: Vec<&String> = self.extensions.keys().collect();
            let message = if known.is_empty() {
                format!("no extension {extension:?}: the config names none")
            } else {
                format!(
                    "no extension {extension:?}; extensions: {}",
                    known
                        .iter()
                        .map(|k| k.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            return Err(ApiError::new(ErrorCode::NotFound, message)
                .with_detail(json!({ "extension": extension })));
        };
        ext.call(tool, arguments).await
    }

    /// Stops every running server: closes its stdin, waits up to the grace
    /// period, then kills its process group. No server starts afterwards.
    pub async fn shutdown(&self) {
        self.closed.cancel();
        for ext in self.extensions.values() {
            ext.stop();
        }
        self.tasks.close();
        let limit = self.limits.stop_grace + Duration::from_secs(2);
        if tokio::time::timeout(limit, self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("extensions did not all stop within {limit:?}");
        }
    }
}
