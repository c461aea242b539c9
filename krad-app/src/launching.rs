//! Terminals whose programs are starting: their tokens are already out (the
//! program may call the bus in its first instant — Claude Code's SessionStart
//! hook does) while the app has not yet recorded them. A request with such a
//! token waits for the record instead of being refused as `unauthorized`
//! ([`Launching::known_soon`]).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use krad_bus::protocol::TerminalRef;
use tokio::sync::watch;

use crate::store::Store;

/// The longest a request from a starting terminal waits for its record: a
/// Spawn's own deadline.
const AT_MOST: Duration = Duration::from_secs(60);

/// The terminals being started, by id, with their environments.
#[derive(Debug, Default)]
pub(crate) struct Launching {
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
        self.starting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn starts(&self, terminal: &TerminalRef) -> bool {
        self.lock()
            .get(&terminal.terminal)
            .is_some_and(|environment| *environment == terminal.environment)
    }

    /// Whether `terminal` is one the store knows — waiting, while it is being
    /// started, until it is recorded (or its start failed).
    pub(crate) async fn known_soon(&self, store: &Store, terminal: &TerminalRef) -> bool {
        let mut settled = self.settled.subscribe();
        let waiting = async {
            loop {
                if store.knows(terminal) {
                    return true;
                }
                if !self.starts(terminal) {
                    // It may have been recorded just after the first look.
                    return store.knows(terminal);
                }
                if settled.changed().await.is_err() {
                    return false;
                }
            }
        };
        tokio::time::timeout(AT_MOST, waiting)
            .await
            .unwrap_or(false)
    }
}

impl Drop for Start<'_> {
    fn drop(&mut self) {
        self.launching.lock().remove(&self.id);
        self.launching
            .settled
            .send_modify(|n| *n = n.wrapping_add(1));
    }
}
