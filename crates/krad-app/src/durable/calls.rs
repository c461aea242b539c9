//! What each call of the wire does to the app. Steering goes through the same
//! handlers as the bus (as the Client), so the phone and `krad` agree.

use std::sync::Arc;

use krad_bus::protocol::{ApiError, ErrorCode, Response};
use krad_bus::request::close::Close;
use krad_bus::request::send::Send;
use krad_bus::request::spawn::Spawn;
use krad_bus::server::CallContext;
use krad_bus::token::Principal;
use krad_durable::limits;
use krad_durable::wire::{Answer, Call, Caller, Target, Transport, WireError};
use serde_json::{Value, json};

use super::AppFacet;
use super::feed::{self, conversation_terminal, decided_by, wire_ask};
use crate::asks::PhoneAnswer;
use crate::{Core, MAIN, requests};

pub(super) async fn run(facet: &AppFacet, call: Call, caller: Caller) -> Answer {
    let core = &facet.core;
    match call {
        Call::Snapshot => Ok(super::snapshot::build(core, &facet.epoch, &caller)),
        Call::Events { pane, after, epoch } => events(facet, &pane, after, epoch, caller),
        Call::Answer {
            pane,
            ask,
            revision,
            answer,
        } => answer_ask(core, &pane, &ask, revision, answer, caller),
        Call::Send { pane, text, turn } => send(core, &pane, text, turn).await,
        Call::Abort { pane, turn } => abort(core, &pane, turn).await,
        Call::Action { pane, action } => belt_action(core, &pane, &action).await,
        Call::Rename { target, title } => rename(core, target, &title),
        Call::Close { target } => close(core, target).await,
        Call::Starter {
            starter,
            workspace,
            prompt,
        } => start(core, &starter, workspace, prompt).await,
        Call::Conversations { after, limit } => Ok(conversations(core, after.as_deref(), limit)),
        Call::Items {
            conversation,
            after,
            limit,
        } => items(core, &conversation, after.as_deref(), limit),
        Call::Reopen { conversation } => reopen(core, &conversation).await,
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

fn events(
    facet: &AppFacet,
    pane: &str,
    after: Option<u64>,
    epoch: Option<String>,
    caller: Caller,
) -> Answer {
    let core = &facet.core;
    let terminal = pane_terminal(pane)?;
    let same_epoch = epoch.as_deref() == Some(facet.epoch.as_str());
    let open_asks: Vec<Value> = core
        .asks
        .list(Some(terminal))
        .iter()
        .take(limits::OPEN_ASKS)
        .map(wire_ask)
        .collect();
    let (cursor, reset, mut events) = match core.feed.events(terminal, after, same_epoch, open_asks)
    {
        Some(found) => found,
        // A reopened conversation: read-only, its view never changes.
        None => match core.feed.closed_view(terminal) {
            Some(_) if same_epoch && after == Some(0) => (0, false, Vec::new()),
            Some(view) => (0, true, view),
            None => return Err(no_pane(pane)),
        },
    };
    if caller.transport == Transport::Tls {
        feed::without_allow_always(&mut events);
    }
    Ok(json!({"epoch": facet.epoch, "cursor": cursor, "reset": reset, "events": events}))
}

fn answer_ask(
    core: &Core,
    pane: &str,
    ask: &str,
    revision: Option<u64>,
    answer: Value,
    caller: Caller,
) -> Answer {
    let terminal = pane_terminal(pane)?;
    let allow_always = caller.transport == Transport::Socket;
    match core
        .asks
        .answer_from_phone(ask, terminal, revision, answer, allow_always)
        .map_err(from_api)?
    {
        PhoneAnswer::Taken(decided) => {
            Ok(json!({"result": "taken", "ask": ask, "outcome": decided.answer}))
        }
        PhoneAnswer::Stale(current) => {
            let mut current = wire_ask(&current);
            if !allow_always {
                feed::strip_allow_always(&mut current);
            }
            Err(WireError::conflict(
                "stale",
                "This ask changed. Read it again, then tap an answer.",
            )
            .with("ask", current))
        }
        PhoneAnswer::Decided(first) => {
            let by = decided_by(first.by);
            let message = match by {
                "program" => "Decided in the durable agent.",
                "timeout" => "Timed out before an answer.",
                _ => "Already answered. This card goes away on the next update.",
            };
            Err(WireError::conflict("decided", message)
                .with("decidedBy", json!(by))
                .with("by", json!(by))
                .with("outcome", first.answer))
        }
        PhoneAnswer::Unknown => Ok(json!({
            "result": "too-late",
            "message": "Not taken. The question may show again in a moment.",
        })),
    }
}

/// Types a text and Enter, as the bus's Send does; records it as a `user` item.
pub(super) async fn type_text(core: &Core, terminal: u64, text: &str) -> Result<(), WireError> {
    let ctx = CallContext {
        principal: Principal::Client,
        request_id: None,
    };
    let request = Send {
        target: terminal,
        text: text.to_owned(),
        enter: Some(true),
        when: None,
    };
    match requests::send::handle(core, &ctx, request).await {
        Response::Error(e) => Err(from_api(e)),
        _ => {
            core.feed.item(terminal, "user", text);
            Ok(())
        }
    }
}

async fn send(core: &Core, pane: &str, text: String, turn: Option<u64>) -> Answer {
    let terminal = live_pane(core, pane)?;
    let (current, state) = core
        .feed
        .turn_and_state(terminal)
        .unwrap_or((0, "starting"));
    if state == "exited" {
        return Err(WireError::conflict(
            "exited",
            "the agent has exited; nothing was sent",
        ));
    }
    let now = turn == Some(current)
        || matches!(state, "idle" | "waiting" | "starting") && turn.is_none_or(|t| t <= current);
    if now {
        type_text(core, terminal, &text).await?;
        Ok(json!({"result": "sent", "turn": current}))
    } else {
        core.feed.queue(terminal, text);
        Ok(json!({"result": "queued", "turn": current}))
    }
}

async fn abort(core: &Core, pane: &str, turn: u64) -> Answer {
    let terminal = live_pane(core, pane)?;
    let (current, state) = core
        .feed
        .turn_and_state(terminal)
        .unwrap_or((0, "starting"));
    if turn != current {
        return Err(WireError::conflict(
            "turn-moved",
            format!("turn {turn} is over; the agent is on turn {current}"),
        )
        .with("turn", json!(current)));
    }
    if matches!(state, "idle" | "exited") {
        return Ok(json!({"result": "already-over", "turn": current}));
    }
    let decided = core.asks.decide_all_by_program(terminal);
    let keys = core
        .store
        .with(terminal, |e| e.profile.interrupt.clone())
        .unwrap_or_default();
    write_keys(core, terminal, &keys).await?;
    core.feed
        .item(terminal, "notice", "Stopped from the phone.");
    Ok(json!({"result": "aborted", "turn": current, "asksDecided": decided}))
}

async fn belt_action(core: &Core, pane: &str, action: &str) -> Answer {
    let terminal = live_pane(core, pane)?;
    let keys = core
        .store
        .with(terminal, |e| {
            e.profile
                .actions
                .iter()
                .take(limits::BELT_BUTTONS)
                .find(|a| a.id == action)
                .map(|a| a.keys.clone())
        })
        .flatten()
        .ok_or_else(|| {
            WireError::missing(
                "no-such-action",
                format!("pane {pane} has no belt button {action}"),
            )
        })?;
    write_keys(core, terminal, &keys).await?;
    Ok(json!({"result": "pressed", "action": action}))
}

/// Writes keys as they are (no paste brackets, no Enter).
async fn write_keys(core: &Core, terminal: u64, keys: &str) -> Result<(), WireError> {
    let Some(handle) = core.store.with(terminal, |e| e.terminal.clone()) else {
        return Err(WireError::missing("no-such-pane", "the pane is gone"));
    };
    match handle.write(keys.as_bytes().to_vec()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(WireError::conflict(
            "exited",
            format!("cannot type into the pane: {e}"),
        )),
        Err(_) => Err(WireError::conflict("exited", "the pane closed its input")),
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

fn rename(core: &Core, target: Target, title: &str) -> Answer {
    match target {
        Target::Workspace(workspace) => {
            if !workspace_exists(core, &workspace) {
                return Err(WireError::missing(
                    "no-such-workspace",
                    format!("no workspace {workspace}"),
                ));
            }
            core.feed.rename(Some(&workspace), None, title);
        }
        Target::Tab(tab) | Target::Pane(tab) => {
            let terminal = tab_terminal(core, &tab)?;
            core.feed.rename(None, Some(terminal), title);
        }
    }
    Ok(json!({"result": "renamed", "title": title}))
}

async fn close(core: &Arc<Core>, target: Target) -> Answer {
    let request = match target {
        Target::Pane(id) | Target::Tab(id) => {
            let terminal = id
                .get(1..)
                .and_then(|n| n.parse::<u64>().ok())
                .filter(|_| id.starts_with('p') || id.starts_with('t'))
                .ok_or_else(|| no_pane(&id))?;
            if core.store.record(terminal).is_none() {
                return if core.feed.hide(terminal) {
                    Ok(json!({"result": "closed"}))
                } else {
                    Err(no_pane(&id))
                };
            }
            Close {
                target: Some(terminal),
                environment: None,
                force: None,
            }
        }
        Target::Workspace(workspace) => {
            if workspace == MAIN {
                return Err(WireError::conflict(
                    "conflict",
                    "the main workspace is the repository itself; it cannot be closed",
                ));
            }
            if !workspace_exists(core, &workspace) {
                return Err(WireError::missing(
                    "no-such-workspace",
                    format!("no workspace {workspace}"),
                ));
            }
            Close {
                target: None,
                environment: Some(workspace),
                force: None,
            }
        }
    };
    let ctx = CallContext {
        principal: Principal::Client,
        request_id: None,
    };
    match requests::close::handle(core, &ctx, request).await {
        Response::Error(e) => Err(from_api(e)),
        _ => Ok(json!({"result": "closed"})),
    }
}

async fn start(
    core: &Arc<Core>,
    starter: &str,
    workspace: Option<String>,
    prompt: Option<String>,
) -> Answer {
    let profile = core
        .profiles
        .get(starter)
        .filter(|p| !p.command.is_empty())
        .ok_or_else(|| WireError::missing("no-such-starter", format!("no starter {starter}")))?;
    let workspace = workspace.unwrap_or_else(|| MAIN.to_owned());
    if !workspace_exists(core, &workspace) {
        return Err(WireError::missing(
            "no-such-workspace",
            format!("no workspace {workspace}"),
        ));
    }
    let prompt = prompt.filter(|p| !p.trim().is_empty());
    let terminal = spawn(core, &workspace, &profile.name, None, prompt.clone()).await?;
    if let Some(prompt) = prompt {
        core.feed.item(terminal, "user", &prompt);
    }
    Ok(json!({
        "workspace": workspace,
        "tab": format!("t{terminal}"),
        "pane": format!("p{terminal}"),
    }))
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
    let ctx = CallContext {
        principal: Principal::Client,
        request_id: None,
    };
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
    };
    match requests::spawn::handle(core, &ctx, request).await {
        Response::Agent(record) => {
            let asking = core.asks.has_open(record.terminal);
            core.feed.observe(&record, asking);
            Ok(record.terminal)
        }
        Response::Error(e) => Err(from_api(e)),
        _ => Err(WireError::internal("Spawn gave an unexpected answer")),
    }
}

/// A conversation's terminal and meta, or `404 no-such-conversation`.
fn conversation(core: &Core, conversation: &str) -> Result<(u64, feed::Meta), WireError> {
    let missing = || {
        WireError::missing(
            "no-such-conversation",
            format!("no conversation {conversation}"),
        )
    };
    let terminal = conversation_terminal(conversation).ok_or_else(missing)?;
    let meta = core.feed.meta(terminal).ok_or_else(missing)?;
    Ok((terminal, meta))
}

/// Opaque history cursors: `k<terminal>` for conversations, `n<index>` for items.
fn conversations(core: &Core, after: Option<&str>, limit: usize) -> Value {
    let before = after
        .and_then(|c| c.strip_prefix('k'))
        .and_then(|n| n.parse::<u64>().ok());
    let mut budget = limits::response::CONVERSATIONS - 4096;
    let mut page = Vec::new();
    let mut last = None;
    let all = core.feed.conversations();
    let mut rest = all
        .iter()
        .filter(|m| before.is_none_or(|b| m.terminal < b))
        .peekable();
    while let Some(meta) = rest.next() {
        if page.len() == limit {
            break;
        }
        let open = core.store.record(meta.terminal).is_some();
        let entry = json!({
            "id": meta.conversation,
            "title": core.feed.tab_title(meta.terminal).unwrap_or(meta.title.clone()),
            "workspace": meta.workspace,
            "profile": meta.profile,
            "startedAt": meta.started_at,
            "endedAt": if open { None } else { meta.ended_at.clone().or(Some(meta.started_at.clone())) },
            "open": open,
            "turns": meta.turn,
            "items": meta.items,
        });
        let size = entry.to_string().len();
        if size > budget {
            break;
        }
        budget -= size;
        page.push(entry);
        last = Some(meta.terminal);
        if rest.peek().is_none() {
            last = None;
        }
    }
    json!({"conversations": page, "next": last.map(|t| format!("k{t}"))})
}

fn items(core: &Core, id: &str, after: Option<&str>, limit: usize) -> Answer {
    let (terminal, meta) = conversation(core, id)?;
    let from = match after {
        None => 0,
        Some(cursor) => cursor
            .strip_prefix('n')
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or_else(|| WireError::bad_request("after is a cursor from a previous page"))?,
    };
    let mut budget = limits::response::ITEMS - 64 * 1024;
    let mut page = Vec::new();
    for item in core.feed.read_items(terminal, from, limit, false) {
        let size = item.text.len() + 128;
        if size > budget {
            break;
        }
        budget -= size;
        page.push(item);
    }
    let end = from + page.len();
    let next = (end < meta.items as usize && !page.is_empty()).then(|| format!("n{end}"));
    Ok(json!({"conversation": id, "items": page, "next": next}))
}

/// Shows a closed conversation again: resumed in a new terminal when its
/// profile can resume its session, else read-only.
async fn reopen(core: &Arc<Core>, id: &str) -> Answer {
    let (terminal, meta) = conversation(core, id)?;
    let open = core.store.record(terminal).is_some();
    let workspace = if workspace_exists(core, &meta.workspace) {
        meta.workspace.clone()
    } else {
        MAIN.to_owned()
    };
    let resume = meta.session.as_deref().and_then(|session| {
        let profile = core.profiles.get(&meta.profile)?;
        crate::profile::resume_command(&profile, session).map(|command| (profile, command))
    });
    if let (false, Some((profile, command))) = (open, resume) {
        let resumed = spawn(core, &workspace, &profile.name, Some(command), None).await?;
        core.feed.item(
            resumed,
            "notice",
            &format!("Resumed from conversation {id}."),
        );
        return Ok(json!({
            "result": "resumed",
            "workspace": workspace,
            "tab": format!("t{resumed}"),
            "pane": format!("p{resumed}"),
            "conversation": format!("c{resumed}"),
            "readOnly": false,
        }));
    }
    if !open {
        core.feed.reopen(terminal);
    }
    Ok(json!({
        "result": if open { "open" } else { "reopened" },
        "workspace": workspace,
        "tab": format!("t{terminal}"),
        "pane": format!("p{terminal}"),
        "readOnly": !open,
    }))
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
        | ErrorCode::Internal => (500, "internal"),
    };
    let mut wire = WireError::new(status, code, error.message);
    if let Some(detail) = error.detail {
        wire = wire.with("detail", detail);
    }
    wire
}
