//! The page's server as a client of the bus: one connection per request, the
//! client token in the envelope, over loopback (async, unlike the CLI's
//! blocking client; the envelope is krad-bus's own).

use std::net::SocketAddr;
use std::time::Duration;

use krad_bus::protocol::{
    API_VERSION, Caller, MAX_RESPONSE, OutgoingEnvelope, Response, Token, TypedAnswer,
};
use krad_bus::request::{Call, Request, RequestKind};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

/// Requests the page may not make, though Client may: stopping the app is
/// for `krad stop`, not for a browser tab.
const NOT_FROM_THE_PAGE: &[RequestKind] = &[RequestKind::Shutdown];

/// Where the bus is and the token to show it.
#[derive(Debug, Clone)]
pub(crate) struct BusClient {
    address: SocketAddr,
    token: Token,
}

/// Lines read from a streaming request.
pub(crate) struct Lines {
    reader: BufReader<tokio::io::Take<OwnedReadHalf>>,
}

impl Lines {
    /// The next line, `None` when the app closed.
    pub(crate) async fn next(&mut self) -> Option<Value> {
        let mut line = Vec::new();
        self.reader.get_mut().set_limit(MAX_RESPONSE as u64 + 1);
        match self.reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => None,
            Ok(_) => serde_json::from_slice(&line).ok(),
        }
    }
}

impl BusClient {
    /// The bus at `address`, called with the client token.
    pub(crate) fn new(address: SocketAddr, token: Token) -> BusClient {
        BusClient { address, token }
    }

    /// Checks a request from the page as the bus would (name and fields), and
    /// that the page may make it. The error is for the page to show.
    pub(crate) fn judge(request: &Value) -> Result<Request, String> {
        let (name, fields) = match request {
            Value::String(name) => (name.as_str(), None),
            Value::Object(map) if map.len() == 1 => {
                let Some((name, fields)) = map.iter().next() else {
                    return Err("an empty request".into());
                };
                (name.as_str(), Some(fields.clone()))
            }
            _ => return Err("a request is a name or an object with one key".into()),
        };
        let parsed = Request::parse(name, fields).map_err(|e| e.message.clone())?;
        if NOT_FROM_THE_PAGE.contains(&parsed.kind()) {
            return Err(format!("{name} is not made from the page"));
        }
        Ok(parsed)
    }

    /// Sends one request and reads its one answer line.
    pub(crate) async fn call(&self, request: &Request) -> Result<Value, String> {
        let wait = request.deadline().unwrap_or(Duration::from_secs(10)) + Duration::from_secs(5);
        let (reader, _writer) = self.open(&request.to_value()).await?;
        let mut lines = Lines {
            reader: BufReader::new(reader.take(MAX_RESPONSE as u64 + 1)),
        };
        match tokio::time::timeout(wait, lines.next()).await {
            Ok(Some(answer)) => Ok(answer),
            Ok(None) => Err("the app closed the connection without answering".into()),
            Err(_) => Err("the app did not answer in time".into()),
        }
    }

    /// Sends one typed request of the page's server's own and decodes its
    /// answer: the typed answer, or the response that is not one (an
    /// `Error`, `"TimedOut"`) for the page to show.
    pub(crate) async fn call_typed<R: Call>(
        &self,
        request: R,
    ) -> Result<Result<R::Answer, Response>, String> {
        let request: Request = request.into();
        let raw = self.call(&request).await?;
        let decoded = Response::decode(raw).map_err(|e| {
            format!(
                "the app's answer to {} could not be read: {e}",
                request.kind().name()
            )
        })?;
        Ok(R::Answer::from_response(decoded.response))
    }

    /// Opens a streaming request (SubscribeAgents, Attach): its lines, and the
    /// write side for Attach's input.
    pub(crate) async fn stream(
        &self,
        request: &Request,
    ) -> Result<(Lines, OwnedWriteHalf), String> {
        let (reader, writer) = self.open(&request.to_value()).await?;
        Ok((
            Lines {
                reader: BufReader::new(reader.take(MAX_RESPONSE as u64 + 1)),
            },
            writer,
        ))
    }

    async fn open(&self, request: &Value) -> Result<(OwnedReadHalf, OwnedWriteHalf), String> {
        let stream = TcpStream::connect(self.address)
            .await
            .map_err(|e| format!("cannot reach the app's bus at {}: {e}", self.address))?;
        let _ = stream.set_nodelay(true);
        let envelope = OutgoingEnvelope {
            api_version: API_VERSION,
            token: self.token.expose(),
            from: &Caller::Client,
            request,
            request_id: None,
        };
        let mut line = serde_json::to_vec(&envelope).map_err(|e| e.to_string())?;
        line.push(b'\n');
        let (reader, mut writer) = stream.into_split();
        writer
            .write_all(&line)
            .await
            .map_err(|e| format!("cannot write to the app's bus: {e}"))?;
        Ok((reader, writer))
    }
}

/// Writes one JSON line to a stream's write side.
pub(crate) async fn write_line(writer: &mut OwnedWriteHalf, value: &Value) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    line.push(b'\n');
    writer.write_all(&line).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_is_judged_like_any_client() {
        assert!(BusClient::judge(&serde_json::json!("List")).is_ok());
        assert!(BusClient::judge(&serde_json::json!({"Send":{"target":1,"text":"hi"}})).is_ok());
        assert!(BusClient::judge(&serde_json::json!("Shutdown")).is_err());
        assert!(BusClient::judge(&serde_json::json!("NoSuchThing")).is_err());
        assert!(BusClient::judge(&serde_json::json!({"Send":{"target":"x"}})).is_err());
    }
}
