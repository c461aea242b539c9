//! What each call of the wire does to the app. Steering goes through the same
//! typed handlers as the bus (as [`Principal::Durable`]), so the phone and
//! `krad` agree.
//!
//! * `pane` — a pane's events, and the phone's answers to its asks.
//! * `steer` — send, abort, belt buttons.
//! * `layout` — rename, close, starters.
//! * `history` — conversations, their items, reopen (and resume).

mod history;
mod layout;
mod pane;
mod steer;

use std::sync::Arc;

use krad_bus::protocol::{ApiError, ErrorCode};
use krad_bus::request::Call;
use krad_bus::request::spawn::Spawn;
use krad_bus::server::{CallContext, Handle};
use krad_bus::token::Principal;
use krad_durable::wire::{Peer, WireCall, WireError, WireResult};

use super::AppFacet;
use crate::Core;
use crate::EmbeddedApp;
use crate::environments::MAIN;

pub(in crate::phone) use steer::type_text;

pub(super) async fn run(facet: &AppFacet, call: WireCall, caller: Peer) -> WireResult {
    let core = &facet.core;
    match call {
        WireCall::Snapshot => Ok(super::snapshot::build(core, &facet.epoch, &caller)),
        WireCall::Events { pane, after, epoch } => pane::events(facet, &pane, after, epoch, caller),
        WireCall::Answer {
            pane,
            ask,
            revision,
            answer,
        } => pane::answer_ask(core, &pane, &ask, revision, answer, caller),
        WireCall::Send { pane, text, turn } => steer::send(core, &pane, text, turn).await,
        WireCall::Abort { pane, turn } => steer::abort(core, &pane, turn).await,
        WireCall::Action { pane, action } => steer::belt_action(core, &pane, &action).await,
        WireCall::Rename { target, title } => layout::rename(core, target, &title).await,
        WireCall::Close { target } => layout::close(core, target).await,
        WireCall::Starter {
            starter,
            workspace,
            prompt,
        } => layout::start(core, &starter, workspace, prompt).await,
        WireCall::Conversations { after, limit } => {
            Ok(history::conversations(core, after.as_deref(), limit))
        }
        WireCall::Items {
            conversation,
            after,
            limit,
        } => history::items(core, &conversation, after.as_deref(), limit),
        WireCall::Reopen { conversation } => history::reopen(core, &conversation).await,
    }
}

/// `p<terminal>` → the terminal.
fn pane_terminal(pane: &str) -> Result<u64, WireError> {
    pane.strip_prefix('p')
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| no_pane(pane))
}

fn no_pane(pane: &str) -> WireError {
    WireError::missing(
        "no-such-pane",
        format!("no pane {pane}; read the snapshot again"),
    )
}

/// A live pane's terminal.
fn live_pane(core: &Core, pane: &str) -> Result<u64, WireError> {
    let terminal = pane_terminal(pane)?;
    if core.store.record(terminal).is_some() {
        Ok(terminal)
    } else {
        Err(no_pane(pane))
    }
}

fn workspace_exists(core: &Core, workspace: &str) -> bool {
    workspace == MAIN || core.store.environment(workspace).is_some()
}

fn tab_terminal(core: &Core, tab: &str) -> Result<u64, WireError> {
    let terminal = tab
        .strip_prefix('t')
        .and_then(|n| n.parse::<u64>().ok())
        .ok_or_else(|| WireError::missing("no-such-tab", format!("no tab {tab}")))?;
    if core.store.record(terminal).is_some()
        || core.feed.reopened().iter().any(|m| m.terminal == terminal)
    {
        Ok(terminal)
    } else {
        Err(WireError::missing("no-such-tab", format!("no tab {tab}")))
    }
}

/// Spawns an agent as the Client would, and gives the feed its pane at once
/// (so that the items recorded next land in it). Returns its terminal.
async fn spawn(
    core: &Arc<Core>,
    workspace: &str,
    profile: &str,
    command: Option<Vec<String>>,
    prompt: Option<String>,
) -> Result<u64, WireError> {
    let request = Spawn {
        environment: Some(workspace.to_owned()),
        profile: Some(profile.to_owned()),
        command,
        prompt,
        name: None,
        lead: None,
        env: None,
        cols: None,
        rows: None,
        sandbox: None,
        max_cost_usd: None,
        queue: None,
    };
    let record = bus_request(core, request).await?;
    let asking = core.asks.has_open(record.terminal);
    core.feed.observe(&record, asking);
    Ok(record.terminal)
}

/// Makes a bus request as the durable facet: through the app's own typed
/// handler, as [`Principal::Durable`] (Client's rights).
async fn bus_request<R: Call>(core: &Arc<Core>, request: R) -> Result<R::Answer, WireError>
where
    EmbeddedApp: Handle<R>,
{
    let ctx = CallContext {
        principal: Principal::Durable,
        request_id: None,
        once: None,
    };
    EmbeddedApp::over(core)
        .handle(&ctx, request)
        .await
        .map_err(from_api)
}

/// A bus error as the wire says it.
fn from_api(error: ApiError) -> WireError {
    let (status, code) = match error.code {
        ErrorCode::BadRequest | ErrorCode::Invalid => (400, "bad-request"),
        ErrorCode::NotFound => (404, "not-found"),
        ErrorCode::Unauthorized | ErrorCode::Forbidden => (403, "forbidden"),
        ErrorCode::Conflict => (409, "conflict"),
        ErrorCode::Busy | ErrorCode::Unavailable => (503, "unavailable"),
        ErrorCode::Failed => (500, "failed"),
        ErrorCode::UnknownRequest
        | ErrorCode::UnsupportedApiVersion
        | ErrorCode::RequestIdReused
        | ErrorCode::Internal
        | ErrorCode::Other => (500, "internal"),
    };
    let mut wire = WireError::new(status, code, error.message);
    if let Some(detail) = error.detail {
        wire = wire.with("detail", detail);
    }
    wire
}
