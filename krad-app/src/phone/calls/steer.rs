//! Steering a pane: text for this turn or the next, stopping the turn, belt buttons.

use std::sync::Arc;

use krad_bus::request::send::Send;
use krad_durable::limits;
use krad_durable::wire::{WireError, WireResult};
use serde_json::json;

use super::{bus_request, live_pane};
use crate::feed::PaneStatus;
use crate::feed::events::{ItemKind, PaneState};
use crate::phone::Phone;

/// Types a text and Enter, as the bus's Send does; records it as a `user` item.
pub(in crate::phone) async fn type_text(
    phone: &Arc<Phone>,
    terminal: u64,
    text: &str,
) -> Result<(), WireError> {
    let request = Send {
        target: terminal,
        text: text.to_owned(),
        keys: None,
        enter: Some(true),
        when: None,
        queue: None,
    };
    bus_request(phone, request).await?;
    phone.feed.item(terminal, ItemKind::User, text);
    Ok(())
}

pub(super) async fn send(
    phone: &Arc<Phone>,
    pane: &str,
    text: String,
    turn: Option<u64>,
) -> WireResult {
    let terminal = live_pane(phone, pane)?;
    let PaneStatus {
        turn: current,
        state,
    } = phone.feed.status(terminal).unwrap_or_default();
    if state == PaneState::Exited {
        return Err(WireError::conflict(
            "exited",
            "the agent has exited; nothing was sent",
        ));
    }
    // Now when the phone saw this turn (it steers it) or the agent is at rest;
    // otherwise the text waits for the agent's next rest.
    let now = turn == Some(current) || state == PaneState::Idle;
    if now {
        type_text(phone, terminal, &text).await?;
        Ok(json!({"result": "sent", "turn": current}))
    } else {
        match phone.feed.queue(terminal, text) {
            Ok(()) => Ok(json!({"result": "queued", "turn": current})),
            Err(0) => Err(WireError::missing("no-such-pane", format!("no pane {pane}"))),
            Err(held) => Err(WireError::new(
                503,
                "busy",
                format!(
                    "the agent already holds {held} texts for its next turn; send again once it took them"
                ),
            )
            .with("retryable", json!(true))),
        }
    }
}

pub(super) async fn abort(phone: &Arc<Phone>, pane: &str, turn: u64) -> WireResult {
    let terminal = live_pane(phone, pane)?;
    let PaneStatus {
        turn: current,
        state,
    } = phone.feed.status(terminal).unwrap_or_default();
    if turn != current {
        return Err(WireError::conflict(
            "turn-moved",
            format!("turn {turn} is over; the agent is on turn {current}"),
        )
        .with("turn", json!(current)));
    }
    if matches!(state, PaneState::Idle | PaneState::Exited) {
        return Ok(json!({"result": "already-over", "turn": current}));
    }
    let decided = phone.asks.decide_all_by_program(terminal);
    let keys = phone
        .store
        .with(terminal, |e| e.profile.interrupt.clone())
        .unwrap_or_default();
    write_keys(phone, terminal, &keys).await?;
    phone
        .feed
        .item(terminal, ItemKind::Notice, "Stopped from the phone.");
    Ok(json!({"result": "aborted", "turn": current, "asksDecided": decided}))
}

pub(super) async fn belt_action(phone: &Arc<Phone>, pane: &str, action: &str) -> WireResult {
    let terminal = live_pane(phone, pane)?;
    let keys = phone
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
    write_keys(phone, terminal, &keys).await?;
    Ok(json!({"result": "pressed", "action": action}))
}

/// Writes keys as they are (no paste brackets, no Enter).
async fn write_keys(phone: &Phone, terminal: u64, keys: &str) -> Result<(), WireError> {
    let Some(handle) = phone.store.with(terminal, |e| e.terminal.clone()) else {
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
