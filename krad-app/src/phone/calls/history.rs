//! The history: conversations, their items, and reopening (or resuming) one.

use std::sync::Arc;

use krad_durable::limits;
use krad_durable::wire::{WireError, WireResult};
use serde_json::{Value, json};

use super::{spawn, workspace_exists};
use crate::environments::MAIN;
use crate::feed::disk::{Meta, Span, conversation_terminal};
use crate::feed::events::ItemKind;
use crate::phone::Phone;

/// A conversation's terminal and meta, or `404 no-such-conversation`.
fn conversation(phone: &Phone, conversation: &str) -> Result<(u64, Meta), WireError> {
    let missing = || {
        WireError::missing(
            "no-such-conversation",
            format!("no conversation {conversation}"),
        )
    };
    let terminal = conversation_terminal(conversation).ok_or_else(missing)?;
    let meta = phone.feed.meta(terminal).ok_or_else(missing)?;
    Ok((terminal, meta))
}

/// Opaque history cursors: `k<terminal>` for conversations, `n<index>` for items.
pub(super) fn conversations(phone: &Phone, after: Option<&str>, limit: usize) -> Value {
    let before = after
        .and_then(|c| c.strip_prefix('k'))
        .and_then(|n| n.parse::<u64>().ok());
    let mut budget = limits::response::CONVERSATIONS - 4096;
    let mut page = Vec::new();
    let mut last = None;
    let all = phone.feed.conversations();
    let mut rest = all
        .iter()
        .filter(|m| before.is_none_or(|b| m.terminal < b))
        .peekable();
    while let Some(meta) = rest.next() {
        if page.len() == limit {
            break;
        }
        let open = phone.store.record(meta.terminal).is_some();
        let entry = json!({
            "id": meta.conversation,
            "title": phone.feed.tab_title(meta.terminal).unwrap_or(meta.title.clone()),
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

pub(super) fn items(phone: &Phone, id: &str, after: Option<&str>, limit: usize) -> WireResult {
    let (terminal, meta) = conversation(phone, id)?;
    let from = match after {
        None => 0,
        Some(cursor) => cursor
            .strip_prefix('n')
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or_else(|| WireError::bad_request("after is a cursor from a previous page"))?,
    };
    let mut budget = limits::response::ITEMS - 64 * 1024;
    let mut page = Vec::new();
    for item in phone.feed.read_items(terminal, Span::From { from, limit }) {
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
pub(super) async fn reopen(phone: &Arc<Phone>, id: &str) -> WireResult {
    let (terminal, meta) = conversation(phone, id)?;
    let open = phone.store.record(terminal).is_some();
    let workspace = if workspace_exists(phone, &meta.workspace) {
        meta.workspace.clone()
    } else {
        MAIN.to_owned()
    };
    let resume = meta.session.as_deref().and_then(|session| {
        let profile = phone.profiles.get(&meta.profile)?;
        crate::profile::resume_command(&profile, session).map(|command| (profile, command))
    });
    if let (false, Some((profile, command))) = (open, resume) {
        let resumed = spawn(phone, &workspace, &profile.name, Some(command), None).await?;
        phone.feed.item(
            resumed,
            ItemKind::Notice,
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
        phone.feed.reopen(terminal);
    }
    Ok(json!({
        "result": if open { "open" } else { "reopened" },
        "workspace": workspace,
        "tab": format!("t{terminal}"),
        "pane": format!("p{terminal}"),
        "readOnly": !open,
    }))
}
