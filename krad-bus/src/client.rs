//! The one client of the bus, for every caller in the workspace: one
//! connection per request, the envelope line out, the answer line (or a
//! stream's lines) back, typed.
//!
//! * [`Client`] — where the bus is and who calls; its blocking calls
//!   (`blocking.rs`: the CLI makes one request and exits, and a blocking
//!   socket starts faster than any runtime; the home screen's threads).
//! * [`AsyncClient`] — the same calls on tokio (`asynchronous.rs`: the page's
//!   server, and whoever already runs a runtime).
//! * `wire.rs` — what both share, each once: the envelope line of a request,
//!   the decoding of an answer line into a typed answer ([`Answered`]), and of
//!   a stream's line into its typed message ([`Line`], [`Item`]).
//!
//! A caller names a request by its type (`Spawn`, `SubscribeAgents`,
//! `Attach`) and gets its answer type back (`R::Answer`, [`StreamMessage`],
//! [`AttachMessage`]): nobody builds request JSON by hand or reads an answer
//! by string key. The raw line comes along for whoever prints it as the app
//! wrote it (`--json`) or relays it (the page).
//!
//! Uses only [`crate::protocol`] and [`crate::request`]; must never import the
//! server, nor anything of a caller (the CLI, the page, the home screen).
//!
//! [`StreamMessage`]: crate::protocol::StreamMessage
//! [`AttachMessage`]: crate::protocol::AttachMessage

mod asynchronous;
mod blocking;
mod wire;

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use serde_json::Value;

use crate::protocol::{API_VERSION, Caller, Response, Token};

pub use asynchronous::{AsyncClient, AsyncLines, AttachWriter};
pub use blocking::Lines;
pub use wire::{Item, Line};

/// How long connecting may take. On loopback a live app accepts at once and a
/// dead port refuses at once; this only bounds a listener whose backlog is full.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Why a request got no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nothing accepts connections at the endpoint.
    #[error("cannot connect to the app at {endpoint}: {source}")]
    Unreachable {
        /// Where the bus was expected.
        endpoint: String,
        /// The connect error.
        source: std::io::Error,
    },
    /// The endpoint is not `host:port`.
    #[error("{0:?} is not an endpoint (expected 127.0.0.1:<port>)")]
    BadEndpoint(String),
    /// The connection broke or timed out.
    #[error("the connection to the app failed: {0}")]
    Io(#[from] std::io::Error),
    /// The app closed the connection without answering.
    #[error("the app closed the connection without answering")]
    NoAnswer,
    /// The app did not answer within the request's deadline and the client's
    /// margin (it did not even answer `"TimedOut"`).
    #[error(
        "the app did not answer within {:.1} s, not even that it timed out: it is overloaded \
         or stuck (what `krad serve` logged says more)",
        .0.as_secs_f64()
    )]
    NoAnswerWithin(Duration),
    /// The answer is not JSON, or not a response this client knows.
    #[error("the app's answer could not be read: {0}")]
    BadAnswer(String),
}

/// What a typed call got back.
#[derive(Debug, Clone)]
pub struct Answered<A> {
    /// The answer as the app wrote it, for printing as is (`--json`).
    pub raw: Value,
    /// Whether the app replayed the first answer of this `request_id`.
    pub replayed: bool,
    /// The typed answer, or the response that is not one: an `Error`,
    /// `"TimedOut"`, or (from a confused app) another request's answer.
    pub answer: Result<A, Response>,
}

/// Where the bus is and who we are to it.
#[derive(Debug, Clone)]
pub struct Client {
    endpoint: SocketAddr,
    token: Token,
    from: Caller,
    api_version: u64,
}

impl Client {
    /// A client for `endpoint` (`127.0.0.1:<port>`).
    pub fn new(endpoint: &str, token: Token, from: Caller) -> Result<Client, ClientError> {
        let endpoint = endpoint
            .to_socket_addrs()
            .ok()
            .and_then(|mut addrs| addrs.next())
            .ok_or_else(|| ClientError::BadEndpoint(endpoint.to_owned()))?;
        Ok(Client::at(endpoint, token, from))
    }

    /// A client for an endpoint already resolved.
    pub fn at(endpoint: SocketAddr, token: Token, from: Caller) -> Client {
        Client {
            endpoint,
            token,
            from,
            api_version: API_VERSION,
        }
    }

    /// Speaks another API version (to test what an app says to other clients).
    pub fn with_api_version(mut self, api_version: u64) -> Client {
        self.api_version = api_version;
        self
    }

    /// The same client, its calls async (on tokio).
    pub fn into_async(self) -> AsyncClient {
        AsyncClient::from(self)
    }

    /// The endpoint.
    pub fn endpoint(&self) -> SocketAddr {
        self.endpoint
    }

    /// Who this client calls as.
    pub fn caller(&self) -> &Caller {
        &self.from
    }
}
