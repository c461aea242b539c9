//! One pane's record in the feed: its conversation's meta, its events with
//! their cursors (in memory), its newest items, its state and turn, the texts
//! queued for its next turn — and how an agent's record moves them.

use std::collections::VecDeque;

use krad_bus::protocol::AgentRecord;
use krad_durable::limits;
use serde_json::Value;

use super::disk::{Disk, Meta, Span};
use super::events::{Event, Item, ItemKind, PaneState, view};

/// Events kept per pane; a reader further behind gets the whole view.
pub(super) const KEPT_EVENTS: usize = 4000;

/// The most JSON one events answer carries: the seed's 8 MiB, less room for
/// the answer around the events.
pub(super) const EVENTS_BYTES: usize = limits::response::EVENTS - 64 * 1024;

/// What taking in a record came to.
#[derive(Debug, Default)]
pub(crate) struct Observed {
    /// Texts queued for the next turn: the agent just went idle, type them.
    pub queued: Vec<String>,
    /// A turn just ended.
    pub turn_ended: bool,
    /// The agent's message was recorded as its reply.
    pub replied: bool,
}

/// What a reader polling a pane's events gets.
pub(super) struct Page {
    /// The cursor to ask after next.
    pub cursor: u64,
    /// Whether this is the whole view rather than what came after the cursor.
    pub reset: bool,
    /// The events, as the wire shows them.
    pub events: Vec<Value>,
}

pub(super) struct Pane {
    pub meta: Meta,
    /// The last event's cursor.
    cursor: u64,
    events: VecDeque<(u64, Event)>,
    /// The newest items (≤ the whole view's count).
    items: VecDeque<Item>,
    pub state: PaneState,
    message: Option<String>,
    /// Texts waiting for the next turn.
    pub queued: Vec<String>,
}

impl Pane {
    /// The pane of `record`, with its conversation as kept, or a new one.
    pub(super) fn open(disk: Option<&Disk>, record: &AgentRecord) -> Pane {
        let on_disk = disk.and_then(|d| d.meta(record.terminal));
        let fresh = on_disk.is_none();
        let meta = on_disk.unwrap_or_else(|| Meta {
            conversation: format!("c{}", record.terminal),
            terminal: record.terminal,
            workspace: record.environment.clone(),
            profile: record.profile.clone(),
            title: pane_title(record),
            started_at: record.started_at.clone(),
            ended_at: None,
            turn: 0,
            items: 0,
            session: None,
        });
        let mut pane = Pane {
            meta,
            cursor: 0,
            events: VecDeque::new(),
            items: VecDeque::new(),
            state: PaneState::Starting,
            message: None,
            queued: Vec::new(),
        };
        if let Some(disk) = disk {
            if fresh {
                disk.save_meta(&pane.meta);
            } else {
                pane.items = disk
                    .items(record.terminal, Span::Last(limits::VIEW_ITEMS))
                    .into();
            }
        }
        pane
    }

    /// Takes in the agent's record: its state (`asking`: an ask is open) and
    /// its message. Returns what came of it, and whether a reader sees a change.
    pub(super) fn observe(
        &mut self,
        disk: Option<&Disk>,
        record: &AgentRecord,
        asking: bool,
    ) -> (Observed, bool) {
        let state = PaneState::of(record.state, asking);
        let mut observed = Observed::default();
        let mut changed = false;
        if self.state != state {
            self.change_state(disk, record, state, &mut observed);
            changed = true;
        }
        let message = record.message.clone().filter(|m| !m.trim().is_empty());
        if message != self.message {
            if let Some(text) = &message
                && state != PaneState::Waiting
            {
                let kind = if state.at_rest() {
                    ItemKind::Reply
                } else {
                    ItemKind::Notice
                };
                self.add_item(disk, kind, text, None);
                observed.replied = kind == ItemKind::Reply;
                changed = true;
            }
            self.message = message;
        }
        (observed, changed)
    }

    /// Moves to `state`: a turn starts when the agent goes to work (or asks)
    /// from rest, and ends when it comes to rest.
    fn change_state(
        &mut self,
        disk: Option<&Disk>,
        record: &AgentRecord,
        state: PaneState,
        observed: &mut Observed,
    ) {
        observed.turn_ended = self.state.in_turn() && !state.in_turn();
        if state.in_turn() && !self.state.in_turn() {
            self.meta.turn += 1;
            self.push(Event::Turn {
                turn: self.meta.turn,
            });
            self.save_meta(disk);
        }
        self.state = state;
        self.push(Event::State { state });
        if state == PaneState::Idle {
            observed.queued = std::mem::take(&mut self.queued);
        }
        if state == PaneState::Exited {
            let how = match (record.exit_code, record.signal) {
                (Some(code), _) => format!("The program exited with code {code}."),
                (_, Some(signal)) => format!("The program was killed by signal {signal}."),
                _ => "The program ended.".to_owned(),
            };
            self.add_item(disk, ItemKind::Notice, &how, None);
        }
    }

    /// Adds an event after the last, forgetting the oldest past [`KEPT_EVENTS`].
    pub(super) fn push(&mut self, event: Event) {
        self.cursor += 1;
        self.events.push_back((self.cursor, event));
        while self.events.len() > KEPT_EVENTS {
            self.events.pop_front();
        }
    }

    /// Adds an item to the conversation (kept on disk) and its event.
    pub(super) fn add_item(
        &mut self,
        disk: Option<&Disk>,
        kind: ItemKind,
        text: &str,
        url: Option<String>,
    ) {
        self.meta.items += 1;
        let item = Item {
            id: format!("i{}", self.meta.items),
            kind,
            text: limits::cut(text, kind.max_text()),
            at: crate::store::now_rfc3339(),
            url,
        };
        if let Some(disk) = disk {
            disk.append_item(self.meta.terminal, &item);
            disk.save_meta(&self.meta);
        }
        self.push(Event::Item { item: item.clone() });
        self.items.push_back(item);
        if self.items.len() > limits::VIEW_ITEMS {
            self.items.pop_front();
        }
    }

    /// Keeps the conversation's meta.
    pub(super) fn save_meta(&self, disk: Option<&Disk>) {
        if let Some(disk) = disk {
            disk.save_meta(&self.meta);
        }
    }

    /// The events after `after` (≤ the seed's count per answer), or the whole
    /// view for a reader from another epoch, without a cursor, or too far
    /// behind. `open_asks` are the pane's open asks, as the wire shows them.
    pub(super) fn page(&self, after: Option<u64>, same_epoch: bool, open_asks: Vec<Value>) -> Page {
        let oldest = self
            .events
            .front()
            .map_or(self.cursor, |(c, _)| c.saturating_sub(1));
        match after {
            Some(after) if same_epoch && after <= self.cursor && after >= oldest => {
                self.page_after(after)
            }
            _ => {
                let items: Vec<Item> = self.items.iter().cloned().collect();
                Page {
                    cursor: self.cursor,
                    reset: true,
                    events: view(self.state, self.meta.turn, open_asks, &items),
                }
            }
        }
    }
}

impl Pane {
    /// The events after `after`: at most [`limits::EVENTS`] of them and
    /// [`EVENTS_BYTES`] of JSON (Collie drops a longer answer), so that a
    /// client asking again from the cursor gets the rest.
    fn page_after(&self, after: u64) -> Page {
        let mut budget = EVENTS_BYTES;
        let mut cursor = after;
        let mut events = Vec::new();
        for (c, event) in self
            .events
            .iter()
            .filter(|(c, _)| *c > after)
            .take(limits::EVENTS)
        {
            let wire = event.to_wire(Some(*c));
            let size = serde_json::to_vec(&wire).map_or(usize::MAX, |bytes| bytes.len() + 1);
            if size > budget && !events.is_empty() {
                break;
            }
            budget = budget.saturating_sub(size);
            cursor = *c;
            events.push(wire);
        }
        Page {
            cursor,
            reset: false,
            events,
        }
    }
}

/// A pane's title: its name, else its terminal title, else its profile.
pub(crate) fn pane_title(record: &AgentRecord) -> String {
    let title = record
        .name
        .clone()
        .or_else(|| record.title.clone().filter(|t| !t.trim().is_empty()))
        .unwrap_or_else(|| format!("{} {}", record.profile, record.terminal));
    limits::cut(&title, limits::TITLE)
}
