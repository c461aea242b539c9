//! A blocking client of the bus: one connection per request, one line each way.
//!
//! Blocking on purpose: the CLI makes one request and exits, and a blocking socket
//! starts faster than any runtime.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use serde_json::Value;

use crate::protocol::{
    API_VERSION, Caller, MAX_RESPONSE, OutgoingEnvelope, Response, Token, TypedAnswer,
};
use crate::request::{Call, Request};

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
        Ok(Client {
            endpoint,
            token,
            from,
            api_version: API_VERSION,
        })
    }

    /// Speaks another API version (to test what an app says to other clients).
    pub fn with_api_version(mut self, api_version: u64) -> Client {
        self.api_version = api_version;
        self
    }

    /// The endpoint.
    pub fn endpoint(&self) -> SocketAddr {
        self.endpoint
    }

    /// Who this client calls as.
    pub fn caller(&self) -> &Caller {
        &self.from
    }

    /// Sends one request (its wire JSON) and returns the answer as JSON.
    /// `wait` bounds how long the answer may take.
    pub fn call_value(
        &self,
        request: &Value,
        request_id: Option<&str>,
        wait: Duration,
    ) -> Result<Value, ClientError> {
        let stream = self.open(request, request_id)?;
        stream.set_read_timeout(Some(wait))?;
        let mut reader = BufReader::new(stream).take(MAX_RESPONSE as u64 + 1);
        let mut line = Vec::new();
        reader
            .read_until(b'\n', &mut line)
            .map_err(|error| match error.kind() {
                // The read timeout.
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                    ClientError::NoAnswerWithin(wait)
                }
                _ => ClientError::Io(error),
            })?;
        if line.is_empty() {
            return Err(ClientError::NoAnswer);
        }
        serde_json::from_slice(&line).map_err(|e| ClientError::BadAnswer(e.to_string()))
    }

    /// Sends one request and decodes its typed answer. The client waits for the
    /// request's deadline plus `margin` (streams: `margin` alone).
    pub fn call<R: Call>(
        &self,
        request: R,
        request_id: Option<&str>,
        margin: Duration,
    ) -> Result<Answered<R::Answer>, ClientError> {
        let wait = request.deadline().unwrap_or_default() + margin;
        let request: Request = request.into();
        let raw = self.call_value(&request.to_value(), request_id, wait)?;
        let decoded = Response::decode(raw.clone()).map_err(|e| {
            ClientError::BadAnswer(format!("{e} (the answer to {})", request.kind().name()))
        })?;
        Ok(Answered {
            raw,
            replayed: decoded.replayed,
            answer: R::Answer::from_response(decoded.response),
        })
    }

    /// Sends a streaming request and returns its messages, one JSON value a line.
    /// The first message is the answer of a non-streaming request.
    pub fn stream(
        &self,
        request: &Value,
        request_id: Option<&str>,
    ) -> Result<MessageStream, ClientError> {
        let stream = self.open(request, request_id)?;
        Ok(MessageStream {
            reader: BufReader::new(stream),
        })
    }

    /// Sends a request whose connection then carries lines both ways (Attach)
    /// and returns the connection, the envelope written.
    pub fn connect(&self, request: &Value) -> Result<TcpStream, ClientError> {
        self.open(request, None)
    }

    fn open(&self, request: &Value, request_id: Option<&str>) -> Result<TcpStream, ClientError> {
        let mut stream =
            TcpStream::connect_timeout(&self.endpoint, CONNECT_TIMEOUT).map_err(|source| {
                ClientError::Unreachable {
                    endpoint: self.endpoint.to_string(),
                    source,
                }
            })?;
        let _ = stream.set_nodelay(true);
        let envelope = OutgoingEnvelope {
            api_version: self.api_version,
            token: self.token.expose(),
            from: &self.from,
            request,
            request_id,
        };
        let mut line =
            serde_json::to_vec(&envelope).map_err(|e| ClientError::BadAnswer(e.to_string()))?;
        line.push(b'\n');
        stream.set_write_timeout(Some(CONNECT_TIMEOUT))?;
        stream.write_all(&line)?;
        Ok(stream)
    }
}

/// The messages of a streaming request.
#[derive(Debug)]
pub struct MessageStream {
    reader: BufReader<TcpStream>,
}

impl MessageStream {
    /// Bounds the wait for each message: a stream with heartbeats (every 15 s
    /// for SubscribeAgents) can so tell a link that died without a word.
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()> {
        self.reader.get_ref().set_read_timeout(timeout)
    }
}

impl Iterator for MessageStream {
    type Item = Result<Value, ClientError>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut line = Vec::new();
        match (&mut self.reader)
            .take(MAX_RESPONSE as u64 + 1)
            .read_until(b'\n', &mut line)
        {
            Ok(0) => None,
            Ok(_) => Some(
                serde_json::from_slice(&line).map_err(|e| ClientError::BadAnswer(e.to_string())),
            ),
            Err(e) => Some(Err(e.into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read as _;
    use std::net::TcpListener;

    use super::*;

    /// An app that takes the request and never answers: the client says it
    /// waited, and how long, not the socket's "Resource temporarily unavailable".
    #[test]
    fn an_app_that_never_answers_is_named_as_such() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = listener.local_addr().unwrap().to_string();
        let silent = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut request = [0; 1];
            // Holds the connection open until the client gives up.
            while stream.read(&mut request).is_ok_and(|n| n > 0) {}
        });
        let client = Client::new(&endpoint, Token::new("t".repeat(32)), Caller::Client).unwrap();
        let error = client
            .call_value(
                &serde_json::json!("Hello"),
                None,
                Duration::from_millis(200),
            )
            .unwrap_err();
        assert!(
            matches!(error, ClientError::NoAnswerWithin(waited) if waited == Duration::from_millis(200)),
            "{error:?}"
        );
        assert!(
            error
                .to_string()
                .starts_with("the app did not answer within 0.2 s"),
            "{error}"
        );
        drop(client);
        drop(error);
        silent.join().unwrap();
    }
}
