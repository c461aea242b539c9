//! Terminals whose programs are starting: their tokens are already out (the
//! program may call the bus in its first instant — Claude Code's SessionStart
//! hook does) while the app has not yet recorded them. A request with such a
//! token waits for the record instead of being refused as `unauthorized`
//! ([`Launching::started`], the app's `terminal_starting`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use krad_bus::protocol::TerminalRef;
use krad_bus::server::StartSettled;
use tokio::sync::watch;

/// The longest a request from a starting terminal waits for its record: a
/// Spawn's own deadline.
const AT_MOST: Duration = Duration::from_secs(60);

/// The terminals being started: a handle, cheap to clone.
#[derive(Debug, Default, Clone)]
pub(crate) struct Launching {
    shared: Arc<Shared>,
}

/// The terminals being started, by id, with their environments.
#[derive(Debug, Default)]
struct Shared {
    starting: Mutex<HashMap<u64, String>>,
    /// Bumped whenever a start ends, recorded or not.
    settled: watch::Sender<u64>,
}

/// A start under way; it ends when this is dropped (after the terminal is
/// recorded, or when it failed).
pub(crate) struct Start<'a> {
    launching: &'a Launching,
    id: u64,
}

impl Launching {
    /// Notes that terminal `me` starts now.
    pub(crate) fn begin(&self, me: &TerminalRef) -> Start<'_> {
        self.lock().insert(me.terminal, me.environment.clone());
        Start {
            launching: self,
            id: me.terminal,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, String>> {
        self.shared
            .starting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn starts(&self, terminal: &TerminalRef) -> bool {
        self.lock()
            .get(&terminal.terminal)
            .is_some_and(|environment| *environment == terminal.environment)
    }

    /// For `terminal` while it is being started: what resolves once its start
    /// is over (recorded, or failed; at most [`AT_MOST`]). `None` otherwise.
    pub(crate) fn started(&self, terminal: &TerminalRef) -> Option<StartSettled> {
        if !self.starts(terminal) {
            return None;
        }
        let mut settled = self.shared.settled.subscribe();
        let launching = self.clone();
        let terminal = terminal.clone();
        Some(Box::pin(async move {
            let over = async {
                while launching.starts(&terminal) {
                    if settled.changed().await.is_err() {
                        return;
                    }
                }
            };
            let _ = tokio::time::timeout(AT_MOST, over).await;
        }))
    }
}

impl Drop for Start<'_> {
    fn drop(&mut self) {
        self.launching.lock().remove(&self.id);
        self.launching
            .shared
            .settled
            .send_modify(|n| *n = n.wrapping_add(1));
    }
}
