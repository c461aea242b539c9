//! One page's WebSocket: the bus's requests and streams, multiplexed.
//!
//! # Format
//!
//! The page sends JSON text messages, each with an `id` it chose:
//!
//! ```json
//! {"id":1,"call":"List"}                                   one request, one answer
//! {"id":2,"open":{"Attach":{"target":4}}}                  a stream: SubscribeAgents or Attach
//! {"id":2,"send":{"Input":{"data":"bHMK"}}}                a line into an open Attach
//! {"id":2,"close":true}                                    ends a stream
//! {"id":3,"review":{"environment":"fix","target":4,"head":"9c1d…","comments":[…]}}
//! {"id":4,"reviews":"fix"}                                 the reviews kept for an environment
//! ```
//!
//! and gets `{"id":1,"answer":<the bus's answer line>}`, `{"id":2,"line":<a
//! stream's line>}`, `{"id":2,"end":true}`, or `{"id":n,"error":"…"}` (refused
//! before reaching the bus). Requests are judged as the bus judges them and
//! carry the client token, so the page has the rights of `Client` (less
//! Shutdown).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use hyper_tungstenite::HyperWebsocket;
use hyper_tungstenite::tungstenite::Message;
use krad_bus::client::{AsyncClient, AsyncLines, AttachWriter};
use krad_bus::protocol::{AttachInput, Response, SentInfo};
use krad_bus::request::Request;
use krad_bus::request::send::{Send, When};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use crate::bus;
use crate::reviews::{Draft, Review, Reviews};

/// Streams one page may hold open at once (a board and a grid of terminals).
const MAX_STREAMS: usize = 64;

/// How long past a request's deadline the page's server waits for its answer.
const ANSWER_MARGIN: Duration = Duration::from_secs(5);

/// What a page's socket needs.
pub(crate) struct Relay {
    /// The bus.
    pub bus: AsyncClient,
    /// Where reviews are kept.
    pub reviews: Arc<Reviews>,
}

/// Serves one page until it leaves or the server stops.
pub(crate) async fn serve(
    socket: HyperWebsocket,
    relay: Arc<Relay>,
    mut stopped: watch::Receiver<bool>,
) {
    let Ok(socket) = socket.await else {
        return;
    };
    let (mut sink, mut source) = socket.split();
    let (out, mut outgoing) = mpsc::channel::<Value>(256);
    let mut streams: Streams = HashMap::new();
    loop {
        tokio::select! {
            message = source.next() => {
                let text = match message {
                    Some(Ok(Message::Text(text))) => text,
                    Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Binary(_) | Message::Frame(_))) => continue,
                    _ => break,
                };
                match serde_json::from_str::<Value>(&text) {
                    Ok(message) => handle(message, &relay, &out, &mut streams),
                    Err(e) => { let _ = out.send(json!({"error": format!("not JSON: {e}")})).await; }
                }
            }
            Some(message) = outgoing.recv() => {
                if let Some(id) = message.get("end").and(message.get("id")).and_then(Value::as_u64) {
                    streams.remove(&id);
                }
                if sink.send(Message::text(message.to_string())).await.is_err() {
                    break;
                }
            }
            _ = stopped.changed() => break,
        }
    }
    for (task, _) in streams.into_values() {
        task.abort();
    }
    let _ = sink.close().await;
}

type Streams = HashMap<u64, (tokio::task::JoinHandle<()>, mpsc::Sender<AttachInput>)>;

fn handle(message: Value, relay: &Arc<Relay>, out: &mpsc::Sender<Value>, streams: &mut Streams) {
    let id = message.get("id").and_then(Value::as_u64).unwrap_or(0);
    let refuse = |why: String| {
        let out = out.clone();
        tokio::spawn(async move {
            let _ = out.send(json!({"id": id, "error": why})).await;
        });
    };
    if let Some(request) = message.get("call") {
        let request = match bus::judge(request) {
            Ok(request) => request,
            Err(why) => return refuse(why),
        };
        let (relay, out) = (relay.clone(), out.clone());
        tokio::spawn(async move {
            let reply = match relay.bus.call_request(&request, ANSWER_MARGIN).await {
                Ok(answer) => json!({"id": id, "answer": answer}),
                Err(why) => json!({"id": id, "error": bus::why(why)}),
            };
            let _ = out.send(reply).await;
        });
    } else if let Some(request) = message.get("open") {
        let request = match bus::judge(request) {
            Ok(request) => request,
            Err(why) => return refuse(why),
        };
        if !matches!(request, Request::SubscribeAgents(_) | Request::Attach(_)) {
            return refuse("only SubscribeAgents and Attach are streams".into());
        }
        if streams.len() >= MAX_STREAMS || streams.contains_key(&id) {
            return refuse(format!(
                "at most {MAX_STREAMS} streams per page, each id once"
            ));
        }
        let (input, inputs) = mpsc::channel(256);
        let task = tokio::spawn(stream(relay.bus.clone(), request, id, out.clone(), inputs));
        streams.insert(id, (task, input));
    } else if let Some(line) = message.get("send") {
        let attach_input = serde_json::from_value::<AttachInput>(line.clone());
        match (streams.get(&id), attach_input) {
            (Some((_, input)), Ok(line)) => {
                let _ = input.try_send(line);
            }
            (Some(_), Err(_)) => refuse("a stream takes only Input and Resize lines".into()),
            (None, _) => refuse(format!("no open stream {id}")),
        }
    } else if message.get("close").is_some() {
        if let Some((task, _)) = streams.remove(&id) {
            task.abort();
        }
    } else if let Some(draft) = message.get("review") {
        let draft: Draft = match serde_json::from_value(draft.clone()) {
            Ok(draft) => draft,
            Err(e) => return refuse(format!("a review: {e}")),
        };
        if let Some(why) = draft.problem() {
            return refuse(why);
        }
        let (relay, out) = (relay.clone(), out.clone());
        tokio::spawn(async move {
            let reply = send_review(&relay, draft).await;
            let _ = out
                .send(match reply {
                    Ok(answer) => json!({"id": id, "answer": answer}),
                    Err(why) => json!({"id": id, "error": why}),
                })
                .await;
        });
    } else if let Some(environment) = message.get("reviews").and_then(Value::as_str) {
        let kept = relay.reviews.of(environment);
        let out = out.clone();
        tokio::spawn(async move {
            let _ = out
                .send(json!({"id": id, "answer": {"Reviews": kept}}))
                .await;
        });
    } else {
        refuse("a message has call, open, send, close, review or reviews".into());
    }
}

/// Sends a review's comments as one message to the agent, when it is idle,
/// then keeps them with the environment.
async fn send_review(relay: &Relay, draft: Draft) -> Result<Value, String> {
    let send = Send {
        target: draft.target,
        text: draft.message(),
        enter: Some(true),
        when: Some(When::Idle),
        ..Send::default()
    };
    let answered = relay
        .bus
        .call(send, None, ANSWER_MARGIN)
        .await
        .map_err(|e| match e {
            krad_bus::client::ClientError::BadAnswer(why) => {
                format!("the app's answer to Send could not be read: {why}")
            }
            other => bus::why(other),
        })?;
    let sent = match answered.answer {
        Ok(sent) => sent,
        Err(Response::TimedOut) => {
            return Err(format!(
                "agent {} did not come to its prompt within Send's deadline, so the comments \
                 were not sent; they are still on the page: send them again when it is idle",
                draft.target
            ));
        }
        // An error of the bus's (an exited agent: conflict), for the page to show.
        Err(other) => return serde_json::to_value(&other).map_err(|e| e.to_string()),
    };
    let review = relay
        .reviews
        .keep(&draft)
        .map_err(|e| format!("the comments were sent but cannot be kept: {e}"))?;
    serde_json::to_value(Reviewed::Reviewed { sent, review }).map_err(|e| e.to_string())
}

/// The page's answer to a review: what the bus said of the Send, and the
/// review as kept.
#[derive(Serialize)]
enum Reviewed {
    Reviewed { sent: SentInfo, review: Review },
}

/// Relays one stream: its lines to the page, the page's lines to it (Attach).
async fn stream(
    bus: AsyncClient,
    request: Request,
    id: u64,
    out: mpsc::Sender<Value>,
    inputs: mpsc::Receiver<AttachInput>,
) {
    let opened = match request {
        Request::SubscribeAgents(request) => match bus.subscribe(request).await {
            Ok(lines) => Ok(relay_lines(lines, None, id, &out, inputs).await),
            Err(why) => Err(bus::why(why)),
        },
        Request::Attach(request) => match bus.attach(request).await {
            Ok((lines, writer)) => Ok(relay_lines(lines, Some(writer), id, &out, inputs).await),
            Err(why) => Err(bus::why(why)),
        },
        _ => Err("only SubscribeAgents and Attach are streams".to_owned()),
    };
    match opened {
        // The page is gone.
        Ok(Relayed::PageGone) => return,
        Ok(Relayed::Ended) => {}
        Err(why) => {
            let _ = out.send(json!({"id": id, "error": why})).await;
        }
    }
    let _ = out.send(json!({"id": id, "end": true})).await;
}

/// How relaying a stream ended.
enum Relayed {
    /// The stream ended (or broke).
    Ended,
    /// The page's socket is gone.
    PageGone,
}

/// Sends a stream's lines, as the app wrote them, to the page, and the
/// page's lines up the stream, until it ends.
async fn relay_lines<M: DeserializeOwned>(
    mut lines: AsyncLines<M>,
    mut writer: Option<AttachWriter>,
    id: u64,
    out: &mpsc::Sender<Value>,
    mut inputs: mpsc::Receiver<AttachInput>,
) -> Relayed {
    loop {
        tokio::select! {
            line = lines.next() => match line {
                Some(Ok(line)) => if out.send(json!({"id": id, "line": line.raw})).await.is_err() {
                    return Relayed::PageGone;
                },
                Some(Err(_)) | None => return Relayed::Ended,
            },
            Some(input) = inputs.recv() => {
                if let Some(writer) = writer.as_mut()
                    && writer.send(&input).await.is_err()
                {
                    return Relayed::Ended;
                }
            }
        }
    }
}
