//! What every room of the tmux host uses: the names krad gives things in its
//! tmux server, how long tmux may take to answer, and a lock that survives a
//! poisoned mutex. Imports nothing of the host.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// The session every terminal's window lives in.
pub(super) const SESSION: &str = "krad";
/// Every terminal's window is named this, then its id.
const WINDOW_PREFIX: &str = "krad-";
/// The pane option holding the app's id for the terminal.
pub(super) const ID_OPTION: &str = "@krad-terminal";
/// The name the `pane-died` hook gives a window whose program ended.
pub(super) const DEAD_NAME: &str = "krad-dead";
/// How long tmux may take to answer a command the host waits for.
pub(super) const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// The name of terminal `id`'s window.
pub(super) fn window_name(id: u64) -> String {
    format!("{WINDOW_PREFIX}{id}")
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
