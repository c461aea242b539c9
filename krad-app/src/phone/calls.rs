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
use krad_durable::wire::{Peer, WireCall, WireError, WireResult};

use super::AppFacet;
use super::{Answering, Phone, Requests};
use crate::environments::MAIN;

pub(in crate::phone) use steer::type_text;

pub(super) async fn run(facet: &AppFacet, call: WireCall, caller: Peer) -> WireResult {
    let phone = &facet.phone;
    match call {
        WireCall::Snapshot => Ok(super::snapshot::build(phone, &facet.epoch, &caller)),
        WireCall::Events { pane, after, epoch } => pane::events(facet, &pane, after, epoch, caller),
        WireCall::Answer {
            pane,
            ask,
            revision,
            answer,
        } => pane::answer_ask(phone, &pane, &ask, revision, answer, caller),
        WireCall::Send { pane, text, turn } => steer::send(phone, &pane, text, turn).await,
        WireCall::Abort { pane, turn } => steer::abort(phone, &pane, turn).await,
        WireCall::Action { pane, action } => steer::belt_action(phone, &pane, &action).await,
        WireCall::Rename { target, title } => layout::rename(phone, target, &title).await,
        WireCall::Close { target } => layout::close(phone, target).await,
        WireCall::Starter {
            starter,
            workspace,
            prompt,
        } => layout::start(phone, &starter, workspace, prompt).await,
        WireCall::Conversations { after, limit } => {
            Ok(history::conversations(phone, after.as_deref(), limit))
        }
        WireCall::Items {
            conversation,
            after,
            limit,
        } => history::items(phone, &conversation, after.as_deref(), limit),
        WireCall::Reopen { conversation } => history::reopen(phone, &conversation).await,
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
fn live_pane(phone: &Phone, pane: &str) -> Result<u64, WireError> {
    let terminal = pane_terminal(pane)?;
    if phone.store.record(terminal).is_some() {
        Ok(terminal)
    } else {
        Err(no_pane(pane))
    }
}

fn workspace_exists(phone: &Phone, workspace: &str) -> bool {
    workspace == MAIN || phone.store.environment(workspace).is_some()
}

fn tab_terminal(phone: &Phone, tab: &str) -> Result<u64, WireError> {
    let terminal = tab
        .strip_prefix('t')
        .and_then(|n| n.parse::<u64>().ok())
        .ok_or_else(|| WireError::missing("no-such-tab", format!("no tab {tab}")))?;
    if phone.store.record(terminal).is_some()
        || phone.feed.reopened().iter().any(|m| m.terminal == terminal)
    {
        Ok(terminal)
    } else {
        Err(WireError::missing("no-such-tab", format!("no tab {tab}")))
    }
}

/// Spawns an agent as the Client would, and gives the feed its pane at once
/// (so that the items recorded next land in it). Returns its terminal.
async fn spawn(
    phone: &Arc<Phone>,
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
    let record = bus_request(phone, request).await?;
    let asking = phone.asks.has_open(record.terminal);
    phone.feed.observe(&record, asking);
    Ok(record.terminal)
}

/// Makes a bus request as the durable facet: through the app's own typed
/// handler, as [`krad_bus::token::Principal::Durable`] (Client's rights).
async fn bus_request<R: PhoneRequest>(phone: &Phone, request: R) -> Result<R::Answer, WireError> {
    request
        .make(phone.requests.as_ref())
        .await
        .map_err(from_api)
}

/// A request the phone makes, and which of [`Requests`]' calls makes it.
trait PhoneRequest: Call {
    fn make(self, requests: &dyn Requests) -> Answering<'_, Self::Answer>;
}

impl PhoneRequest for Spawn {
    fn make(self, requests: &dyn Requests) -> Answering<'_, Self::Answer> {
        requests.spawn(self)
    }
}

impl PhoneRequest for krad_bus::request::send::Send {
    fn make(self, requests: &dyn Requests) -> Answering<'_, Self::Answer> {
        requests.send(self)
    }
}

impl PhoneRequest for krad_bus::request::rename::Rename {
    fn make(self, requests: &dyn Requests) -> Answering<'_, Self::Answer> {
        requests.rename(self)
    }
}

impl PhoneRequest for krad_bus::request::close::Close {
    fn make(self, requests: &dyn Requests) -> Answering<'_, Self::Answer> {
        requests.close(self)
    }
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
