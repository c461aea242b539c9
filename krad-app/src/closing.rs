//! Closing terminals: ending a terminal's program (SIGHUP, SIGKILL after
//! [`CLOSE_GRACE`]), waiting for its exit and removing it from the records and
//! its token file (on an SSH host, its files there).
//! Shared by Close of a terminal and Close of an environment (which closes the
//! environment's terminals first); it depends on neither.

use std::sync::Arc;
use std::time::Duration;

use krad_bus::protocol::{AgentState, ApiError, ErrorCode};
use krad_bus::server::request_log::RequestLog;

use crate::config::{CLOSE_GRACE, Settings};
use crate::environments::CloseTerminals;
use crate::hosts::HostLinks;
use crate::limits::Limits;
use crate::records::no_terminal;
use crate::sandbox::Sandbox;
use crate::store::Store;

/// What closing a terminal reaches: its record, its place in the queue, the
/// answers kept for it, its files, its sandbox and its host.
pub(crate) struct Closer<'a> {
    pub(crate) settings: &'a Arc<Settings>,
    pub(crate) store: &'a Arc<Store>,
    pub(crate) limits: &'a Limits,
    pub(crate) request_log: &'a RequestLog,
    pub(crate) sandbox: &'a Sandbox,
    pub(crate) hosts: &'a HostLinks,
}

/// Ends a terminal's program and removes the terminal from the records.
pub(crate) async fn close_terminal(core: &Closer<'_>, id: u64) -> Result<(), ApiError> {
    let Some(mut watch) = core.store.watch(id) else {
        return Err(no_terminal(id));
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
        crate::sandbox::forget(core.sandbox, id);
        if let Some(host) = entry.record.host.as_deref()
            && let Ok(host) = core.hosts.get(host)
        {
            host.remove_terminal_files(&[id]).await;
        }
        let (settings, store) = (core.settings.clone(), core.store.clone());
        tokio::spawn(
            async move { crate::transcripts::prune_in_background(&settings, &store).await },
        );
    }
    Ok(())
}

/// Closes every terminal of an environment, one after the other; stops at the
/// first that does not exit.
pub(crate) async fn close_terminals_of(
    core: &Closer<'_>,
    environment: &str,
) -> Result<(), ApiError> {
    for terminal in core.store.terminals_of(environment) {
        close_terminal(core, terminal).await?;
    }
    Ok(())
}

impl CloseTerminals for Closer<'_> {
    async fn close_terminals_of(&self, environment: &str) -> Result<(), ApiError> {
        close_terminals_of(self, environment).await
    }
}
