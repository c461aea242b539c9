//! Closing terminals: ending a terminal's program (SIGHUP, SIGKILL after
//! [`CLOSE_GRACE`]), waiting for its exit and removing it from the records and
//! its token file (on an SSH host, its files there).
//! Shared by Close of a terminal and Close of an environment (which closes the
//! environment's terminals first); it depends on neither.

use std::sync::Arc;
use std::time::Duration;

use crate::Core;
use krad_bus::protocol::{AgentState, ApiError, ErrorCode};

use crate::config::CLOSE_GRACE;

/// Ends a terminal's program and removes the terminal from the records.
pub(crate) async fn close_terminal(core: &Arc<Core>, id: u64) -> Result<(), ApiError> {
    let Some(mut watch) = core.store.watch(id) else {
        return Err(Core::no_terminal(id));
    };
    if core.limits.cancel(id) && core.store.record(id).map(|r| r.state) == Some(AgentState::Queued)
    {
        // It never started: out of the queue, off the records.
        core.store.remove(id);
        return Ok(());
    }
    while watch.borrow_and_update().state == AgentState::Queued {
        // Its turn came as it was closed: it is starting; then it is closed.
        if watch.changed().await.is_err() {
            break;
        }
    }
    if watch.borrow_and_update().state != AgentState::Exited {
        if let Some(terminal) = core.store.with(id, |e| e.terminal.clone()) {
            terminal.close(CLOSE_GRACE);
        }
        let exited = async {
            while watch.borrow_and_update().state != AgentState::Exited {
                if watch.changed().await.is_err() {
                    return;
                }
            }
        };
        if tokio::time::timeout(CLOSE_GRACE + Duration::from_secs(5), exited)
            .await
            .is_err()
        {
            return Err(ApiError::new(
                ErrorCode::Failed,
                format!("terminal {id} did not exit after SIGKILL; it is left in the records"),
            ));
        }
    }
    if let Some(entry) = core.store.remove(id) {
        crate::crash_point::here("close-removed");
        let me = krad_bus::protocol::TerminalRef {
            environment: entry.record.environment.clone(),
            terminal: id,
        };
        core.request_log.forget_terminal(&me);
        if let Some(path) = entry.token_file {
            let _ = std::fs::remove_file(path);
        }
        // The settings handed to its program (Claude Code's hooks), if any.
        let _ = std::fs::remove_dir_all(core.settings.state_dir.join("hooks").join(id.to_string()));
        crate::sandbox::forget(core, id);
        if let Some(host) = entry.record.host.as_deref()
            && let Ok(host) = core.hosts.get(host)
        {
            host.remove_terminal_files(&[id]).await;
        }
        let core = core.clone();
        tokio::spawn(async move {
            crate::transcripts::prune_in_background(&core.settings, &core.store).await
        });
    }
    Ok(())
}

/// Closes every terminal of an environment, one after the other; stops at the
/// first that does not exit.
pub(crate) async fn close_terminals_of(
    core: &Arc<Core>,
    environment: &str,
) -> Result<(), ApiError> {
    for terminal in core.store.terminals_of(environment) {
        close_terminal(core, terminal).await?;
    }
    Ok(())
}
