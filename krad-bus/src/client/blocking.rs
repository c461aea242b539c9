//! The blocking calls: a typed request and its typed answer, the two streams
//! (SubscribeAgents, Attach) as iterators of typed lines, and any request as
//! JSON (`krad raw`).

use std::io::{BufRead, BufReader, Read, Write};
use std::marker::PhantomData;
use std::net::TcpStream;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::wire::{self, Line};
use super::{Answered, CONNECT_TIMEOUT, Client, ClientError};
use crate::protocol::{AttachMessage, MAX_RESPONSE, StreamMessage};
use crate::request::Call;
use crate::request::attach::Attach;
use crate::request::subscribe_agents::SubscribeAgents;

impl Client {
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
        wire::answer_value(&line)
    }

    /// Sends one request and decodes its typed answer. The client waits for the
    /// request's deadline plus `margin` (streams: `margin` alone).
    pub fn call<R: Call>(
        &self,
        request: R,
        request_id: Option<&str>,
        margin: Duration,
    ) -> Result<Answered<R::Answer>, ClientError> {
        let (value, wait) = wire::typed_call(request, margin);
        let raw = self.call_value(&value, request_id, wait)?;
        wire::typed_answer::<R>(raw)
    }

    /// Sends one request and decodes its typed answer, waiting `wait` at most
    /// whatever the request's deadline: a glance that must not hang on an app
    /// that does not answer (`krad apps`).
    pub fn call_within<R: Call>(
        &self,
        request: R,
        wait: Duration,
    ) -> Result<Answered<R::Answer>, ClientError> {
        let raw = self.call_value(&wire::request_value(request), None, wait)?;
        wire::typed_answer::<R>(raw)
    }

    /// The envelope line (`\n` included) this client sends for `request`: for
    /// a load generator that sends the same line many times (krad-bench).
    pub fn request_line<R: Call>(
        &self,
        request: R,
        request_id: Option<&str>,
    ) -> Result<Vec<u8>, ClientError> {
        wire::envelope_line(self, &wire::request_value(request), request_id)
    }

    /// Opens the agents' stream: its lines, typed.
    pub fn subscribe(&self, request: SubscribeAgents) -> Result<Lines<StreamMessage>, ClientError> {
        self.lines(&wire::request_value(request), None)
    }

    /// Attaches to a terminal: the app's lines, typed; the connection also
    /// carries the client's lines up ([`Lines::into_parts`]).
    pub fn attach(&self, request: Attach) -> Result<Lines<AttachMessage>, ClientError> {
        self.lines(&wire::request_value(request), None)
    }

    /// Sends any request as JSON (`krad raw`) and returns its answer lines:
    /// one for most requests, many for a stream.
    pub fn raw_lines(
        &self,
        request: &Value,
        request_id: Option<&str>,
    ) -> Result<Lines<Value>, ClientError> {
        self.lines(request, request_id)
    }

    fn lines<M>(&self, request: &Value, request_id: Option<&str>) -> Result<Lines<M>, ClientError> {
        let stream = self.open(request, request_id)?;
        Ok(Lines {
            reader: BufReader::new(stream),
            message: PhantomData,
        })
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
        let line = wire::envelope_line(self, request, request_id)?;
        stream.set_write_timeout(Some(CONNECT_TIMEOUT))?;
        stream.write_all(&line)?;
        Ok(stream)
    }
}

/// The lines of a stream, each decoded to a [`Line`] of messages `M`.
#[derive(Debug)]
pub struct Lines<M> {
    reader: BufReader<TcpStream>,
    message: PhantomData<fn() -> M>,
}

impl<M> Lines<M> {
    /// Bounds the wait for each line: a stream with heartbeats (every 15 s
    /// for SubscribeAgents) can so tell a link that died without a word.
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()> {
        self.reader.get_ref().set_read_timeout(timeout)
    }

    /// Another handle on the connection (to shut it down from another thread).
    pub fn try_clone_stream(&self) -> std::io::Result<TcpStream> {
        self.reader.get_ref().try_clone()
    }

    /// The connection, and what was read of it beyond the lines returned so
    /// far: for a caller that goes on reading (and writing, Attach) by itself.
    pub fn into_parts(self) -> (TcpStream, Vec<u8>) {
        let early = self.reader.buffer().to_vec();
        (self.reader.into_inner(), early)
    }
}

impl<M: DeserializeOwned> Iterator for Lines<M> {
    type Item = Result<Line<M>, ClientError>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut line = Vec::new();
        match (&mut self.reader)
            .take(MAX_RESPONSE as u64 + 1)
            .read_until(b'\n', &mut line)
        {
            Ok(0) => None,
            Ok(_) => Some(Line::decode(&line)),
            Err(e) => Some(Err(e.into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read as _;
    use std::net::TcpListener;

    use super::*;
    use crate::protocol::{Caller, Token};

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
