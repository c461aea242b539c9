//! What a pane's feed says on the wire: its state ([`PaneState`]), the items of
//! its conversation ([`ItemKind`], [`Item`]), the events a reader polls
//! ([`Event`]), and the whole view a reader gets when it starts afresh.

use std::fmt;
use std::str::FromStr;

use krad_bus::protocol::{AgentState, DecidedBy};
use krad_durable::limits;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// What a whole view's items may weigh, under the events answer's 8 MiB.
const VIEW_BYTES: usize = 7 * 1024 * 1024;

/// A pane's state on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum PaneState {
    /// Spawned, nothing heard yet.
    #[default]
    Starting,
    /// Running a turn.
    Working,
    /// At rest between turns.
    Idle,
    /// An ask is open.
    Waiting,
    /// The program ended.
    Exited,
}

impl PaneState {
    /// The state of an agent in `state`, with an open ask or not.
    pub(crate) fn of(state: AgentState, asking: bool) -> PaneState {
        match state {
            AgentState::Exited => PaneState::Exited,
            _ if asking => PaneState::Waiting,
            // The durable wire has no `queued`: the pane is yet to start.
            AgentState::Queued | AgentState::Starting => PaneState::Starting,
            AgentState::Working => PaneState::Working,
            AgentState::Idle | AgentState::Other => PaneState::Idle,
            AgentState::Asking => PaneState::Waiting,
        }
    }

    /// The wire name.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            PaneState::Starting => "starting",
            PaneState::Working => "working",
            PaneState::Idle => "idle",
            PaneState::Waiting => "waiting",
            PaneState::Exited => "exited",
        }
    }

    /// Whether a turn runs: the agent works, or asks in the middle of its work.
    pub(crate) fn in_turn(self) -> bool {
        matches!(self, PaneState::Working | PaneState::Waiting)
    }

    /// Whether nothing more happens until someone types: idle or exited.
    pub(crate) fn at_rest(self) -> bool {
        matches!(self, PaneState::Idle | PaneState::Exited)
    }
}

impl fmt::Display for PaneState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// The kind of a conversation's item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ItemKind {
    /// A text the person sent.
    User,
    /// The agent's reply at the end of a turn.
    Reply,
    /// The agent's thinking.
    Thinking,
    /// What happened (an exit, an ask decided elsewhere, a stop).
    Notice,
    /// Markdown.
    Markdown,
    /// Code, or a screen's text.
    Code,
    /// A link (`https://` only).
    Link,
}

impl ItemKind {
    /// Every kind.
    pub(crate) const ALL: [ItemKind; 7] = [
        ItemKind::User,
        ItemKind::Reply,
        ItemKind::Thinking,
        ItemKind::Notice,
        ItemKind::Markdown,
        ItemKind::Code,
        ItemKind::Link,
    ];

    /// The wire name.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            ItemKind::User => "user",
            ItemKind::Reply => "reply",
            ItemKind::Thinking => "thinking",
            ItemKind::Notice => "notice",
            ItemKind::Markdown => "markdown",
            ItemKind::Code => "code",
            ItemKind::Link => "link",
        }
    }

    /// The longest text an item of this kind keeps, in bytes.
    pub(crate) fn max_text(self) -> usize {
        match self {
            ItemKind::Markdown | ItemKind::Code => limits::CODE_ITEM,
            _ => limits::TEXT_ITEM,
        }
    }
}

impl fmt::Display for ItemKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// A name that is no [`ItemKind`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an item kind (user, reply, thinking, notice, markdown, code or link)")]
pub(crate) struct UnknownItemKind(pub String);

impl FromStr for ItemKind {
    type Err = UnknownItemKind;

    fn from_str(name: &str) -> Result<ItemKind, UnknownItemKind> {
        ItemKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == name)
            .ok_or_else(|| UnknownItemKind(name.to_owned()))
    }
}

/// One entry of a conversation, as kept on disk and shown on the wire.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Item {
    /// `i<n>`, in the conversation's order.
    pub id: String,
    /// What it is.
    pub kind: ItemKind,
    /// The text (cut to the kind's limit, cleaned).
    pub text: String,
    /// When (RFC 3339 UTC).
    pub at: String,
    /// A link's address (`https://` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// One event of a pane's feed; on the wire an object whose `type` names it.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub(crate) enum Event {
    /// `turn`: a turn started.
    Turn {
        /// Its number.
        turn: u64,
    },
    /// `state`: the pane's state changed.
    State {
        /// The new state.
        state: PaneState,
    },
    /// `item`: an item was added to the conversation.
    Item {
        /// The item.
        item: Item,
    },
    /// `ask`: an ask opened (or is open, in a whole view).
    Ask {
        /// The ask, as the wire shows it.
        ask: Value,
    },
    /// `ask-changed`: an ask changed in place (its revision moved).
    AskChanged {
        /// The ask, as the wire shows it.
        ask: Value,
    },
    /// `ask-closed`: an ask was decided.
    AskClosed {
        /// The ask's id.
        ask: String,
        /// Its title.
        title: String,
        /// Who decided it.
        #[serde(rename = "decidedBy")]
        decided_by: DecidedBy,
        /// The same, under its short name.
        by: DecidedBy,
        /// The answer (`{}` when nobody answered).
        outcome: Value,
    },
}

impl Event {
    /// The event as the wire shows it, with its cursor when it has one.
    pub(crate) fn to_wire(&self, cursor: Option<u64>) -> Value {
        let mut event = match serde_json::to_value(self) {
            Ok(event) => event,
            Err(e) => {
                // Nothing in an event fails to encode (its maps have string keys).
                tracing::error!("cannot encode a feed event: {e}");
                json!({})
            }
        };
        if let (Some(cursor), Value::Object(map)) = (cursor, &mut event) {
            map.insert("cursor".into(), json!(cursor));
        }
        event
    }
}

/// The whole view: state, turn, open asks, then the newest items that fit.
pub(crate) fn view(
    state: PaneState,
    turn: u64,
    open_asks: Vec<Value>,
    items: &[Item],
) -> Vec<Value> {
    let mut events = vec![
        Event::State { state }.to_wire(None),
        Event::Turn { turn }.to_wire(None),
    ];
    events.extend(
        open_asks
            .into_iter()
            .map(|ask| Event::Ask { ask }.to_wire(None)),
    );
    let mut budget = VIEW_BYTES;
    let mut kept = Vec::new();
    for item in items.iter().rev().take(limits::VIEW_ITEMS) {
        let size = item.text.len() + 128;
        if size > budget {
            break;
        }
        budget -= size;
        kept.push(Event::Item { item: item.clone() }.to_wire(None));
    }
    kept.reverse();
    events.extend(kept);
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_on_the_wire() {
        let states = [
            (PaneState::Starting, "starting"),
            (PaneState::Working, "working"),
            (PaneState::Idle, "idle"),
            (PaneState::Waiting, "waiting"),
            (PaneState::Exited, "exited"),
        ];
        for (state, name) in states {
            assert_eq!(json!(state), json!(name));
            assert_eq!(state.to_string(), name);
        }
        for kind in ItemKind::ALL {
            assert_eq!(json!(kind), json!(kind.as_str()));
            assert_eq!(kind.as_str().parse::<ItemKind>(), Ok(kind));
        }
        assert!("shout".parse::<ItemKind>().is_err());
    }

    #[test]
    fn events_look_as_they_did() {
        let item = Item {
            id: "i1".into(),
            kind: ItemKind::Notice,
            text: "hi".into(),
            at: "2026-11-29T00:00:00Z".into(),
            url: None,
        };
        let cases = [
            (
                Event::Turn { turn: 3 },
                json!({"type": "turn", "turn": 3, "cursor": 9}),
            ),
            (
                Event::State {
                    state: PaneState::Waiting,
                },
                json!({"type": "state", "state": "waiting", "cursor": 9}),
            ),
            (
                Event::Item { item },
                json!({"type": "item", "cursor": 9, "item":
                    {"id": "i1", "kind": "notice", "text": "hi", "at": "2026-11-29T00:00:00Z"}}),
            ),
            (
                Event::AskChanged {
                    ask: json!({"id": "a"}),
                },
                json!({"type": "ask-changed", "ask": {"id": "a"}, "cursor": 9}),
            ),
            (
                Event::AskClosed {
                    ask: "a".into(),
                    title: "t".into(),
                    decided_by: DecidedBy::Timeout,
                    by: DecidedBy::Timeout,
                    outcome: json!({}),
                },
                json!({"type": "ask-closed", "ask": "a", "title": "t", "decidedBy": "timeout",
                       "by": "timeout", "outcome": {}, "cursor": 9}),
            ),
        ];
        for (event, wire) in cases {
            assert_eq!(event.to_wire(Some(9)).to_string(), wire.to_string());
        }
    }
}
