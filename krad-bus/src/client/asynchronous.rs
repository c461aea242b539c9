//! The async calls, on tokio: the blocking calls' twins, for callers that
//! run a runtime (the page's server). The envelope and the decoding are the
//! blocking client's own (`wire.rs`).

use std::marker::PhantomData;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

use super::wire::{self, Line};
use super::{Answered, CONNECT_TIMEOUT, Client, ClientError};
use crate::protocol::{AttachInput, AttachMessage, MAX_RESPONSE, StreamMessage};
use crate::request::attach::Attach;
use crate::request::subscribe_agents::SubscribeAgents;
use crate::request::{Call, Request, deadline};

/// A [`Client`] whose calls are async.
#[derive(Debug, Clone)]
pub struct AsyncClient {
    client: Client,
}

impl From<Client> for AsyncClient {
    fn from(client: Client) -> AsyncClient {
        AsyncClient { client }
    }
}

impl AsyncClient {
    /// The client's endpoint and caller.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Sends one request and decodes its typed answer. The client waits for the
    /// request's deadline plus `margin` (streams: `margin` alone).
    pub async fn call<R: Call>(
        &self,
        request: R,
        request_id: Option<&str>,
        margin: Duration,
    ) -> Result<Answered<R::Answer>, ClientError> {
        let (value, wait) = wire::typed_call(request, margin);
        let raw = self.call_value(&value, request_id, wait).await?;
        wire::typed_answer::<R>(raw)
    }

    /// Sends any request of the protocol (one a page chose, checked by
    /// [`Request::parse`]) and returns its answer as the app wrote it, for
    /// relaying as is. The client waits for its deadline (a stream's first
    /// line: the standard one) plus `margin`.
    pub async fn call_request(
        &self,
        request: &Request,
        margin: Duration,
    ) -> Result<Value, ClientError> {
        let wait = request.deadline().unwrap_or(deadline::STANDARD) + margin;
        self.call_value(&request.to_value(), None, wait).await
    }

    /// Opens the agents' stream: its lines, typed.
    pub async fn subscribe(
        &self,
        request: SubscribeAgents,
    ) -> Result<AsyncLines<StreamMessage>, ClientError> {
        self.open(&wire::request_value(request), None).await
    }

    /// Attaches to a terminal: the app's lines, typed, and the way up for the
    /// client's own ([`AttachInput`]). Dropping the writer tells the app the
    /// client left (it ends the attachment).
    pub async fn attach(
        &self,
        request: Attach,
    ) -> Result<(AsyncLines<AttachMessage>, AttachWriter), ClientError> {
        let mut lines = self.open(&wire::request_value(request), None).await?;
        let writer = lines.writer.take().ok_or(ClientError::NoAnswer)?;
        Ok((lines, AttachWriter { writer }))
    }

    async fn call_value(
        &self,
        request: &Value,
        request_id: Option<&str>,
        wait: Duration,
    ) -> Result<Value, ClientError> {
        let mut lines = self.open::<Value>(request, request_id).await?;
        match tokio::time::timeout(wait, lines.read_line()).await {
            Ok(line) => wire::answer_value(&line?),
            Err(_) => Err(ClientError::NoAnswerWithin(wait)),
        }
    }

    async fn open<M>(
        &self,
        request: &Value,
        request_id: Option<&str>,
    ) -> Result<AsyncLines<M>, ClientError> {
        let endpoint = self.client.endpoint;
        let unreachable = |source| ClientError::Unreachable {
            endpoint: endpoint.to_string(),
            source,
        };
        let stream = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(endpoint)).await
        {
            Ok(connected) => connected.map_err(unreachable)?,
            Err(_) => return Err(unreachable(std::io::ErrorKind::TimedOut.into())),
        };
        let _ = stream.set_nodelay(true);
        let line = wire::envelope_line(&self.client, request, request_id)?;
        let (reader, mut writer) = stream.into_split();
        match tokio::time::timeout(CONNECT_TIMEOUT, writer.write_all(&line)).await {
            Ok(written) => written?,
            Err(_) => return Err(ClientError::Io(std::io::ErrorKind::TimedOut.into())),
        }
        Ok(AsyncLines {
            reader: BufReader::new(reader),
            writer: Some(writer),
            message: PhantomData,
        })
    }
}

/// The lines of a stream read async, each decoded to a [`Line`] of messages `M`.
#[derive(Debug)]
pub struct AsyncLines<M> {
    reader: BufReader<OwnedReadHalf>,
    /// Kept while the lines are read: dropped, it would shut the connection's
    /// write side, which the app takes for the client leaving (a stream ends,
    /// a waiting request is cancelled).
    writer: Option<OwnedWriteHalf>,
    message: PhantomData<fn() -> M>,
}

impl<M> AsyncLines<M> {
    /// One line as read (empty when the app closed).
    async fn read_line(&mut self) -> Result<Vec<u8>, ClientError> {
        let mut line = Vec::new();
        (&mut self.reader)
            .take(MAX_RESPONSE as u64 + 1)
            .read_until(b'\n', &mut line)
            .await?;
        Ok(line)
    }
}

impl<M: DeserializeOwned> AsyncLines<M> {
    /// The next line, typed; `None` when the app closed the stream.
    pub async fn next(&mut self) -> Option<Result<Line<M>, ClientError>> {
        match self.read_line().await {
            Ok(line) if line.is_empty() => None,
            Ok(line) => Some(Line::decode(&line)),
            Err(e) => Some(Err(e)),
        }
    }
}

/// The client's side of an Attach: its lines up.
#[derive(Debug)]
pub struct AttachWriter {
    writer: OwnedWriteHalf,
}

impl AttachWriter {
    /// Sends one line (keys or a size) to the attached terminal.
    pub async fn send(&mut self, input: &AttachInput) -> std::io::Result<()> {
        self.writer.write_all(&input.to_line()).await
    }

    /// Says the client is done writing.
    pub async fn shutdown(&mut self) -> std::io::Result<()> {
        self.writer.shutdown().await
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt as _;
    use tokio::net::TcpListener;

    use super::*;
    use crate::protocol::{Caller, Token};
    use crate::request::hello::Hello;

    /// The async call sends the envelope the blocking one sends and decodes
    /// the answer the same way.
    #[tokio::test]
    async fn a_typed_call_and_a_stream() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = listener.local_addr().unwrap();
        let app = tokio::spawn(async move {
            let mut seen = Vec::new();
            for answer in [
                &br#"{"Hello":{"api_version":1,"build":"x","requests":[]}}"#[..],
                b"{\"Heartbeat\":{\"rev\":1}}\n\"ShuttingDown\"\n",
            ] {
                let (stream, _) = listener.accept().await.unwrap();
                let (reader, mut writer) = stream.into_split();
                let mut line = String::new();
                BufReader::new(reader).read_line(&mut line).await.unwrap();
                seen.push(line);
                writer.write_all(answer).await.unwrap();
                writer.write_all(b"\n").await.unwrap();
            }
            seen
        });
        let client = Client::at(endpoint, Token::new("t".repeat(32)), Caller::Client).into_async();
        let hello = client
            .call(Hello::default(), None, Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(hello.answer.unwrap().build, "x");
        let mut lines = client.subscribe(SubscribeAgents::default()).await.unwrap();
        assert!(matches!(
            lines.next().await.unwrap().unwrap().item,
            super::super::Item::Message(StreamMessage::Heartbeat(_))
        ));
        assert!(matches!(
            lines.next().await.unwrap().unwrap().item,
            super::super::Item::Message(StreamMessage::ShuttingDown)
        ));
        let seen = app.await.unwrap();
        let hello_line: Value = serde_json::from_str(&seen[0]).unwrap();
        let blocking = wire::envelope_line(
            client.client(),
            &wire::request_value(Hello::default()),
            None,
        )
        .unwrap();
        assert_eq!(
            hello_line,
            serde_json::from_slice::<Value>(&blocking).unwrap()
        );
    }
}
