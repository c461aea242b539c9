//! Tool results as the server sent them.
//!
//! rmcp decodes every message into its typed model, and that model is lossy
//! for tool results: `annotations.priority` becomes an `f32` (`0.7` comes out
//! as `0.699999988079071`), members and fields it does not define are dropped,
//! and a kind of content it does not know makes the whole result unreadable.
//! The tap sits under rmcp, which goes on doing everything else (framing,
//! dispatch, JSON-RPC errors, cancellation): its transport notes the id of
//! every `tools/call` request as it is sent, and its reader, as the server's
//! stdout streams by, keeps the `result` of the responses to them as JSON.
//! The caller takes that JSON once rmcp hands it the response.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use rmcp::RoleClient;
use rmcp::model::{CancelledNotificationParam, ClientRequest, JsonRpcMessage, RequestId};
use rmcp::service::{Peer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::{AsyncRwTransport, DEFAULT_MAX_LINE_LENGTH};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A buffer that grew past this is given back after its line.
const KEEP_CAPACITY: usize = 64 * 1024;

/// The `tools/call` requests of one session that wait for their result.
#[derive(Default)]
pub(crate) struct Calls {
    slots: Mutex<HashMap<RequestId, Slot>>,
}

enum Slot {
    /// Sent; no result seen yet.
    Waiting,
    /// The result, as the server sent it.
    Answered(Value),
    /// The caller left before the request was sent: it is not waited for.
    Abandoned,
}

impl Calls {
    fn slots(&self) -> MutexGuard<'_, HashMap<RequestId, Slot>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A `tools/call` request with this id is being sent.
    fn sent(&self, id: RequestId) {
        match self.slots().entry(id) {
            Entry::Occupied(slot) if matches!(slot.get(), Slot::Abandoned) => {
                slot.remove();
            }
            Entry::Occupied(mut slot) => {
                slot.insert(Slot::Waiting);
            }
            Entry::Vacant(slot) => {
                slot.insert(Slot::Waiting);
            }
        }
    }

    fn waiting(&self) -> bool {
        self.slots()
            .values()
            .any(|slot| matches!(slot, Slot::Waiting))
    }

    /// One line the server sent (without its `\n`): the result of a response
    /// to a waiting call is kept. Anything else, or anything that is not JSON,
    /// is rmcp's business.
    fn line(&self, line: &[u8]) {
        let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        let Ok(Value::Object(mut message)) = serde_json::from_slice::<Value>(line) else {
            return;
        };
        let Some(id) = message
            .get("id")
            .and_then(|id| serde_json::from_value::<RequestId>(id.clone()).ok())
        else {
            return;
        };
        let Some(result) = message.remove("result") else {
            return;
        };
        let mut slots = self.slots();
        // rmcp takes "7" as the answer to request 7; so does the tap.
        let key = match &id {
            RequestId::String(text) if !slots.contains_key(&id) => {
                text.parse::<i64>().map(RequestId::Number).unwrap_or(id)
            }
            _ => id,
        };
        if let Some(slot @ Slot::Waiting) = slots.get_mut(&key) {
            *slot = Slot::Answered(result);
        }
    }

    /// The result of call `id`, if the tap saw it; the call is forgotten.
    fn take(&self, id: &RequestId) -> Option<Value> {
        match self.slots().remove(id) {
            Some(Slot::Answered(result)) => Some(result),
            _ => None,
        }
    }

    /// The caller of `id` left: its result, if it still comes, is not kept.
    fn abandon(&self, id: RequestId) {
        match self.slots().entry(id) {
            Entry::Occupied(slot) => {
                slot.remove();
            }
            Entry::Vacant(slot) => {
                slot.insert(Slot::Abandoned);
            }
        }
    }
}

/// A call in flight. Dropped before [`Pending::done`] (its client left, the
/// deadline passed), it tells the server with `notifications/cancelled`, as
/// rmcp's own `call_tool` does.
pub(crate) struct Pending {
    peer: Peer<RoleClient>,
    calls: Arc<Calls>,
    id: Option<RequestId>,
}

impl Pending {
    pub(crate) fn new(peer: &Peer<RoleClient>, calls: &Arc<Calls>, id: RequestId) -> Pending {
        Pending {
            peer: peer.clone(),
            calls: calls.clone(),
            id: Some(id),
        }
    }

    /// The call ended (answered or failed): its result as the server sent it,
    /// if it sent one.
    pub(crate) fn done(mut self) -> Option<Value> {
        let id = self.id.take()?;
        self.calls.take(&id)
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        self.calls.abandon(id.clone());
        // Without a runtime (it is going away) there is no one to tell.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let peer = self.peer.clone();
        runtime.spawn(async move {
            let cancelled = CancelledNotificationParam::new(
                Some(id),
                Some("request abandoned by the caller".to_owned()),
            );
            let _ = peer.notify_cancelled(cancelled).await;
        });
    }
}

/// rmcp's stdio transport, with the tap: the ids of `tools/call` requests are
/// noted as they are sent, their results kept as they are read.
pub(crate) struct TapTransport<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    inner: AsyncRwTransport<RoleClient, TapReader<R>, W>,
    calls: Arc<Calls>,
}

impl<R, W> TapTransport<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    /// A transport reading the server's `read` (its stdout) and writing its
    /// `write` (its stdin), keeping tool results in `calls`.
    pub(crate) fn new(read: R, write: W, calls: Arc<Calls>) -> Self {
        let reader = TapReader::new(read, calls.clone());
        TapTransport {
            inner: AsyncRwTransport::new_client(reader, write),
            calls,
        }
    }
}

impl<R, W> Transport<RoleClient> for TapTransport<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        // Noted before a byte of it is written: its answer cannot come first.
        if let JsonRpcMessage::Request(request) = &item
            && let ClientRequest::CallToolRequest(_) = &request.request
        {
            self.calls.sent(request.id.clone());
        }
        self.inner.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.inner.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// Passes the server's output to rmcp unchanged, and hands each whole line to
/// [`Calls::line`] before rmcp can see its end. A line that began while no
/// call was waiting is not kept (no response to a call can be in it), nor is
/// one longer than rmcp accepts.
pub(crate) struct TapReader<R> {
    inner: R,
    calls: Arc<Calls>,
    line: Vec<u8>,
    /// Whether the current line is kept; `None` at the start of a line.
    keep: Option<bool>,
}

impl<R> TapReader<R> {
    fn new(inner: R, calls: Arc<Calls>) -> Self {
        TapReader {
            inner,
            calls,
            line: Vec::new(),
            keep: None,
        }
    }

    fn observe(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let keep = *self.keep.get_or_insert_with(|| self.calls.waiting());
            let (chunk, rest, ends) = match bytes.iter().position(|b| *b == b'\n') {
                Some(at) => (&bytes[..at], &bytes[at + 1..], true),
                None => (bytes, &[][..], false),
            };
            if keep {
                // rmcp counts the `\n` too.
                if self.line.len() + chunk.len() < DEFAULT_MAX_LINE_LENGTH {
                    self.line.extend_from_slice(chunk);
                } else {
                    self.line = Vec::new();
                    self.keep = Some(false);
                }
            }
            if ends {
                if self.keep == Some(true) {
                    self.calls.line(&self.line);
                }
                self.line.clear();
                if self.line.capacity() > KEEP_CAPACITY {
                    self.line = Vec::new();
                }
                self.keep = None;
            }
            bytes = rest;
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for TapReader<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            this.observe(&buf.filled()[before..]);
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;
    use tokio::io::AsyncReadExt;

    fn waiting(ids: &[i64]) -> Arc<Calls> {
        let calls = Arc::new(Calls::default());
        for id in ids {
            calls.sent(RequestId::Number(*id));
        }
        calls
    }

    /// Reads `input` through a tap in pieces of `piece` bytes; returns what
    /// came out.
    async fn read_through(calls: &Arc<Calls>, input: &[u8], piece: usize) -> Vec<u8> {
        let mut reader = TapReader::new(input, calls.clone());
        let mut out = Vec::new();
        let mut buf = vec![0; piece];
        loop {
            let n = reader.read(&mut buf).await.unwrap();
            if n == 0 {
                return out;
            }
            out.extend_from_slice(&buf[..n]);
        }
    }

    #[tokio::test]
    async fn results_of_waiting_calls_are_kept_as_sent_and_bytes_pass_unchanged() {
        let input = concat!(
            "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n",
            "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"tools\":[]}}\n",
            "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":\"7\",\"result\":{\"content\":[{\"type\":\"text\",",
            "\"text\":\"a\",\"annotations\":{\"priority\":0.7},\"x-extra\":1}]}}\r\n",
            "not json at all\n",
            "{\"jsonrpc\":\"2.0\",\"id\":8,\"error\":{\"code\":-32602,\"message\":\"no\"}}\n",
        );
        for piece in [1, 7, 4096] {
            let calls = waiting(&[7, 8]);
            let out = read_through(&calls, input.as_bytes(), piece).await;
            assert_eq!(out, input.as_bytes(), "piece {piece}");
            let result = calls.take(&RequestId::Number(7)).unwrap();
            assert_eq!(
                result,
                json!({"content": [{"type": "text", "text": "a",
                    "annotations": {"priority": 0.7}, "x-extra": 1}]})
            );
            let text = serde_json::to_string(&result).unwrap();
            assert!(text.contains(r#""priority":0.7}"#), "{text}");
            // An error is no result; 3 was never a call.
            assert!(calls.take(&RequestId::Number(8)).is_none());
            assert!(calls.take(&RequestId::Number(3)).is_none());
            assert!(calls.slots().is_empty());
        }
    }

    #[tokio::test]
    async fn nothing_is_kept_for_calls_that_were_abandoned_or_never_made() {
        let calls = waiting(&[1]);
        calls.abandon(RequestId::Number(1));
        // Abandoned before it was sent: the send does not wait for it.
        calls.abandon(RequestId::Number(2));
        calls.sent(RequestId::Number(2));
        let input =
            b"{\"id\":1,\"result\":{}}\n{\"id\":2,\"result\":{}}\n{\"id\":5,\"result\":5}\n";
        read_through(&calls, input, 64).await;
        assert!(calls.slots().is_empty());
    }

    #[tokio::test]
    async fn a_line_over_the_limit_is_not_kept() {
        let calls = waiting(&[1]);
        let text = "x".repeat(DEFAULT_MAX_LINE_LENGTH);
        let long = json!({"id": 1, "result": {"content": [{"type": "text", "text": text}]}});
        let mut input = serde_json::to_vec(&long).unwrap();
        input.extend_from_slice(b"\n{\"id\":1,\"result\":{\"content\":[]}}\n");
        read_through(&calls, &input, 1 << 20).await;
        // The next line is read as usual.
        assert_eq!(
            calls.take(&RequestId::Number(1)),
            Some(json!({"content": []}))
        );
    }
}
