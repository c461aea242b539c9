//! A pane's events, and the phone's answers to its asks.

use krad_durable::limits;
use krad_durable::wire::{Peer, Transport, WireError, WireResult};
use serde_json::{Value, json};

use super::super::AppFacet;
use super::{from_api, no_pane, pane_terminal};
use crate::asks::PhoneAnswer;
use crate::feed::ask_wire::{decided_by, strip_allow_always, wire_ask, without_allow_always};
use crate::phone::Phone;
use krad_bus::protocol::AskAnswer;

pub(super) fn events(
    facet: &AppFacet,
    pane: &str,
    after: Option<u64>,
    epoch: Option<String>,
    caller: Peer,
) -> WireResult {
    let phone = &facet.phone;
    let terminal = pane_terminal(pane)?;
    let same_epoch = epoch.as_deref() == Some(facet.epoch.as_str());
    let open_asks: Vec<Value> = phone
        .asks
        .list(Some(terminal))
        .iter()
        .take(limits::OPEN_ASKS)
        .map(wire_ask)
        .collect();
    let (cursor, reset, mut events) =
        match phone.feed.events(terminal, after, same_epoch, open_asks) {
            Some(found) => found,
            // A reopened conversation: read-only, its view never changes.
            None => match phone.feed.closed_view(terminal) {
                Some(_) if same_epoch && after == Some(0) => (0, false, Vec::new()),
                Some(view) => (0, true, view),
                None => return Err(no_pane(pane)),
            },
        };
    if caller.transport == Transport::Tls {
        without_allow_always(&mut events);
    }
    Ok(json!({"epoch": facet.epoch, "cursor": cursor, "reset": reset, "events": events}))
}

pub(super) fn answer_ask(
    phone: &Phone,
    pane: &str,
    ask: &str,
    revision: Option<u64>,
    answer: Value,
    caller: Peer,
) -> WireResult {
    let terminal = pane_terminal(pane)?;
    let allow_always = caller.transport == Transport::Socket;
    match phone
        .asks
        .answer_from_phone(
            ask,
            terminal,
            revision,
            AskAnswer::from_value(answer),
            allow_always,
        )
        .map_err(from_api)?
    {
        PhoneAnswer::Taken(decided) => {
            Ok(json!({"result": "taken", "ask": ask, "outcome": decided.answer}))
        }
        PhoneAnswer::Stale(current) => {
            let mut current = wire_ask(&current);
            if !allow_always {
                strip_allow_always(&mut current);
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
                .with("outcome", first.answer.to_value()))
        }
        PhoneAnswer::Unknown => Ok(json!({
            "result": "too-late",
            "message": "Not taken. The question may show again in a moment.",
        })),
    }
}
