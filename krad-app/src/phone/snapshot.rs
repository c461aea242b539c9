//! The snapshot: workspaces → tabs → panes (state, turn, open asks, belt), and
//! the starters — within the seed's limits (a list keeps its first entries).

use std::collections::BTreeMap;

use krad_bus::protocol::AgentRecord;
use krad_durable::limits;
use krad_durable::wire::{Peer, Transport};
use serde_json::{Value, json};

use super::Phone;
use crate::environments::MAIN;
use crate::feed::PaneStatus;
use crate::feed::ask_wire::{strip_allow_always, wire_ask};
use crate::feed::events::PaneState;
use crate::feed::pane_log::pane_title;

/// The layout as the phone reads it.
pub(super) fn build(phone: &Phone, epoch: &str, caller: &Peer) -> Value {
    let mut by_workspace: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut names: Vec<String> = vec![MAIN.to_owned()];
    names.extend(
        phone
            .store
            .environments()
            .into_iter()
            .map(|e| e.name)
            .filter(|n| n != MAIN),
    );
    let mut tabs = 0;
    let mut budget = ASKS_BYTES;
    let mut records = phone.store.list(None);
    records.sort_by_key(|r| r.terminal);
    for record in &records {
        if tabs == limits::TABS {
            break;
        }
        tabs += 1;
        by_workspace
            .entry(record.environment.clone())
            .or_default()
            .push(tab(phone, record, caller, &mut budget));
    }
    for meta in phone.feed.reopened() {
        if tabs == limits::TABS {
            break;
        }
        tabs += 1;
        let workspace = if names.contains(&meta.workspace) {
            meta.workspace.clone()
        } else {
            MAIN.to_owned()
        };
        let title = phone
            .feed
            .tab_title(meta.terminal)
            .unwrap_or(meta.title.clone());
        by_workspace.entry(workspace).or_default().push(json!({
            "id": format!("t{}", meta.terminal),
            "title": title,
            "panes": [{
                "id": format!("p{}", meta.terminal),
                "title": title,
                "state": PaneState::Exited,
                "turn": meta.turn,
                "profile": meta.profile,
                "conversation": meta.conversation,
                "readOnly": true,
                "asks": [],
                "belt": [],
            }],
        }));
    }
    let workspaces: Vec<Value> = names
        .iter()
        .take(limits::WORKSPACES)
        .map(|name| {
            json!({
                "id": name,
                "title": phone.feed.workspace_title(name).unwrap_or_else(|| name.clone()),
                "tabs": by_workspace.remove(name).unwrap_or_default(),
            })
        })
        .collect();
    json!({
        "epoch": epoch,
        "rev": phone.store.rev() + phone.feed.rev(),
        "workspaces": workspaces,
        "starters": starters(phone),
    })
}

/// What the asks of one snapshot may weigh, so that the whole stays well
/// under the 4 MiB Collie reads (panes' other fields are small and bounded).
const ASKS_BYTES: usize = 3 * 1024 * 1024;

fn tab(phone: &Phone, record: &AgentRecord, caller: &Peer, budget: &mut usize) -> Value {
    let mut asks: Vec<Value> = Vec::new();
    for info in phone
        .asks
        .list(Some(record.terminal))
        .iter()
        .take(limits::OPEN_ASKS)
    {
        let mut ask = wire_ask(info);
        if caller.transport == Transport::Tls {
            strip_allow_always(&mut ask);
        }
        let size = ask.to_string().len();
        if size > *budget {
            break;
        }
        *budget -= size;
        asks.push(ask);
    }
    let PaneStatus { turn, state } =
        phone
            .feed
            .status(record.terminal)
            .unwrap_or_else(|| PaneStatus {
                turn: 0,
                state: PaneState::of(record.state, !asks.is_empty()),
            });
    let state = if asks.is_empty() || state == PaneState::Exited {
        state
    } else {
        PaneState::Waiting
    };
    let belt: Vec<Value> = phone
        .store
        .with(record.terminal, |e| e.profile.actions.clone())
        .unwrap_or_default()
        .iter()
        .filter(|a| limits::valid_id(&a.id))
        .take(limits::BELT_BUTTONS)
        .map(|a| json!({"id": a.id, "label": limits::clean_chars(&a.label, limits::BELT_LABEL_CHARS).text}))
        .collect();
    let title = phone
        .feed
        .tab_title(record.terminal)
        .unwrap_or_else(|| pane_title(record));
    json!({
        "id": format!("t{}", record.terminal),
        "title": title,
        "panes": [{
            "id": format!("p{}", record.terminal),
            "title": title,
            "state": state,
            "turn": turn,
            "profile": record.profile,
            "conversation": format!("c{}", record.terminal),
            "readOnly": false,
            "asks": asks,
            "belt": belt,
        }],
    })
}

/// The profiles that start on their own (`exec` needs a command), ≤ 50.
fn starters(phone: &Phone) -> Vec<Value> {
    phone
        .profiles
        .names()
        .into_iter()
        .filter(|name| limits::valid_id(name))
        .filter(|name| {
            phone
                .profiles
                .get(name)
                .is_some_and(|p| !p.command.is_empty())
        })
        .take(limits::STARTERS)
        .map(|name| json!({"id": name, "title": name, "workspace": MAIN}))
        .collect()
}
