//! The wire's vocabulary: a parsed call, the errors it answers, the caller,
//! and the [`Facet`] trait the app implements.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{Map, Value, json};

/// The one wire version this facet speaks.
pub const VERSION: u32 = 1;
/// The header every call but the first hello carries.
pub const VERSION_HEADER: &str = "x-collie-session";
/// What hello's `service` says.
pub const SERVICE: &str = "collie-durable";

/// How a caller reached the facet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// The private Unix socket: any process of the user.
    Socket,
    /// TLS with the bearer token: whoever holds the token. No `allow-always`.
    Tls,
}

/// Who calls, as far as the facet can tell. The listener a connection came in
/// on stamps it, and every request of that connection carries it to the call:
/// what a request may do (`allow-always` only over the socket) is decided by
/// its own transport, whichever other transports are on.
#[derive(Debug, Clone, Copy)]
pub struct Peer {
    /// The transport it came by.
    pub transport: Transport,
}

/// What `rename` and `close` name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A workspace (an environment).
    Workspace(String),
    /// A tab (a terminal).
    Tab(String),
    /// A pane (a terminal; one pane per tab).
    Pane(String),
}

/// A call, parsed and checked against the wire's rules; the app carries it out.
#[derive(Debug, Clone)]
pub enum WireCall {
    /// `GET /snapshot`.
    Snapshot,
    /// `GET /pane/:id/events?after=N&epoch=E`.
    Events {
        /// The pane.
        pane: String,
        /// The cursor read last.
        after: Option<u64>,
        /// The epoch that cursor belongs to.
        epoch: Option<String>,
    },
    /// `POST /pane/:id/answer`.
    Answer {
        /// The pane.
        pane: String,
        /// The ask.
        ask: String,
        /// The revision of the ask the phone showed.
        revision: Option<u64>,
        /// The answer (`{"option"}`, `{"text"}` or `{"fields"}`).
        answer: Value,
    },
    /// `POST /pane/:id/send`.
    Send {
        /// The pane.
        pane: String,
        /// The text (≤ 32 KiB, cleaned).
        text: String,
        /// The turn the phone saw.
        turn: Option<u64>,
    },
    /// `POST /pane/:id/abort`.
    Abort {
        /// The pane.
        pane: String,
        /// The turn to stop.
        turn: u64,
    },
    /// `POST /pane/:id/action`.
    Action {
        /// The pane.
        pane: String,
        /// The belt button's id.
        action: String,
    },
    /// `POST /rename`.
    Rename {
        /// The workspace or tab.
        target: Target,
        /// The new title (cleaned).
        title: String,
    },
    /// `POST /close`.
    Close {
        /// The pane, tab or workspace.
        target: Target,
    },
    /// `POST /starter/:id`.
    Starter {
        /// The starter.
        starter: String,
        /// Where to start it.
        workspace: Option<String>,
        /// The first prompt.
        prompt: Option<String>,
    },
    /// `GET /conversations?after=C&limit=N`.
    Conversations {
        /// The cursor of the previous page.
        after: Option<String>,
        /// At most this many (≤ 100).
        limit: usize,
    },
    /// `GET /conversation/:id/items?after=C&limit=N`.
    Items {
        /// The conversation.
        conversation: String,
        /// The cursor of the previous page.
        after: Option<String>,
        /// At most this many (≤ 1000).
        limit: usize,
    },
    /// `POST /reopen`.
    Reopen {
        /// The closed conversation.
        conversation: String,
    },
}

/// An error answer: a status and `{"code","message",…}`.
#[derive(Debug, Clone)]
pub struct WireError {
    /// The HTTP status.
    pub status: u16,
    /// The machine-readable code (`stale`, `no-such-pane`, …).
    pub code: &'static str,
    /// What happened and what to do next.
    pub message: String,
    /// More fields of the body (`decided`, `refusal`, …).
    pub extra: Map<String, Value>,
}

impl WireError {
    /// An error with a status, a code and a message.
    pub fn new(status: u16, code: &'static str, message: impl Into<String>) -> WireError {
        WireError {
            status,
            code,
            message: message.into(),
            extra: Map::new(),
        }
    }

    /// 400 `bad-request`.
    pub fn bad_request(message: impl Into<String>) -> WireError {
        WireError::new(400, "bad-request", message)
    }

    /// 404 with a `no-such-…` code.
    pub fn missing(code: &'static str, message: impl Into<String>) -> WireError {
        WireError::new(404, code, message)
    }

    /// 409 with a code.
    pub fn conflict(code: &'static str, message: impl Into<String>) -> WireError {
        WireError::new(409, code, message)
    }

    /// 500 `internal`.
    pub fn internal(message: impl Into<String>) -> WireError {
        WireError::new(500, "internal", message)
    }

    /// Adds a field to the body.
    pub fn with(mut self, key: &str, value: Value) -> WireError {
        self.extra.insert(key.to_owned(), value);
        self
    }

    /// The body.
    pub fn body(&self) -> Value {
        let mut body = self.extra.clone();
        body.insert("code".into(), json!(self.code));
        body.insert("message".into(), json!(self.message));
        Value::Object(body)
    }
}

/// What a call gives: the body of a 200, or an error.
pub type WireResult = Result<Value, WireError>;

/// A call's work, detached from the connection that asked for it.
pub type WireFuture = Pin<Box<dyn Future<Output = WireResult> + Send + 'static>>;

/// The app behind the facet.
pub trait Facet: Send + Sync + 'static {
    /// This start's epoch (≥ 128 random bits, hex).
    fn epoch(&self) -> &str;
    /// Whether the app has laid out its panes after a start.
    fn ready(&self) -> bool;
    /// The rev the snapshot's ETag carries: grows with every change a reader can see.
    fn rev(&self) -> u64;
    /// hello's `host.name`.
    fn host_name(&self) -> String;
    /// hello's `caps` for this caller.
    fn caps(&self, caller: &Peer) -> Value;
    /// Carries a call out. The future runs to its end even when the caller
    /// leaves, so that a retried request id finds what the first try did.
    fn call(self: Arc<Self>, call: WireCall, caller: Peer) -> WireFuture;
}

/// A fresh epoch: 128 random bits in hex.
pub fn new_epoch() -> String {
    let bytes: [u8; 16] = rand::random();
    hex::encode(bytes)
}
