//! How the bus reaches the app: one handler per request the app answers (an
//! `impl Handle<TheRequest> for EmbeddedApp`, or `impl Open<…>` for the two
//! that stream, SubscribeAgents and Attach), each checking the caller's scope,
//! calling the domain and returning its answer; and the rights rules they
//! share.

pub(crate) mod answer;
pub(crate) mod archives;
pub(crate) mod ask;
pub(crate) mod asks;
pub(crate) mod attach;
pub(crate) mod budget;
pub(crate) mod changes;
pub(crate) mod check;
pub(crate) mod check_variants;
pub(crate) mod close;
pub(crate) mod code;
pub(crate) mod collect_environments;
pub(crate) mod conflicts;
pub(crate) mod connections;
pub(crate) mod create_worktree;
pub(crate) mod environments;
pub(crate) mod extension_tool;
pub(crate) mod extensions;
pub(crate) mod hosts;
pub(crate) mod list;
pub(crate) mod merge_variants;
pub(crate) mod output;
pub(crate) mod pick_variant;
pub(crate) mod rename;
pub(crate) mod report;
pub(crate) mod run_variants;
pub(crate) mod scores;
pub(crate) mod send;
pub(crate) mod spawn;
pub(crate) mod subscribe_agents;
pub(crate) mod update_environment;
pub(crate) mod wait;

use crate::app::EmbeddedApp;
use krad_bus::protocol::{AgentRecord, ApiError, ErrorCode, TerminalRef};
use krad_bus::request::RequestKind;
use krad_bus::server::request_log::RequestLog;
use krad_bus::server::{App, StartSettled};
use krad_bus::token::Principal;

/// A plain terminal may Send to and Close only the terminals it spawned, in its
/// own environment; Client and lead terminals may act on any.
pub(crate) fn may_act_on(
    principal: &Principal,
    request: RequestKind,
    record: &AgentRecord,
) -> Result<(), ApiError> {
    let Principal::Terminal(me) = principal else {
        return Ok(());
    };
    if record.environment == me.environment && record.parent == Some(me.terminal) {
        return Ok(());
    }
    Err(ApiError::new(
        ErrorCode::Forbidden,
        format!(
            "terminal {} may {} only terminals it spawned in its environment; terminal {} is not one",
            me.terminal,
            request.name(),
            record.terminal
        ),
    )
    .with_detail(serde_json::json!({ "request": request.name(), "terminal": record.terminal })))
}

impl App for EmbeddedApp {
    fn request_log(&self) -> Option<&RequestLog> {
        Some(self.core().request_log())
    }

    fn knows_terminal(&self, terminal: &TerminalRef) -> bool {
        self.core().store().knows(terminal)
    }

    fn terminal_starting(&self, terminal: &TerminalRef) -> Option<StartSettled> {
        self.core().launching().started(terminal)
    }

    fn token_being_renewed(&self, terminal: &TerminalRef) -> bool {
        self.core().store().knows(terminal)
            && self.core().hosts().token_being_renewed(terminal.terminal)
    }

    async fn agent_count(&self) -> u64 {
        self.core().store().count() as u64
    }
}
