//! A POST: its body read (≤ 64 KiB, a JSON object), its request id claimed so
//! that the call runs at most once, and the [`WireCall`] its route and body name.

use std::sync::Arc;

use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::CONTENT_LENGTH;
use hyper::{Request, StatusCode};
use serde_json::{Map, Value};

use super::route::PostRoute;
use super::{Reply, Shared, json_reply};
use crate::limits;
use crate::request_ids::{Claim, Finished};
use crate::wire::{Peer, Target, Transport, WireCall, WireError};

/// A POST: read the body, take its request id, run the call once.
pub(super) async fn post_call(
    shared: &Arc<Shared>,
    caller: Peer,
    route: PostRoute,
    path: &str,
    request: &Request<()>,
    incoming: Incoming,
) -> Result<Reply, WireError> {
    let body = read_body(request, incoming).await?;
    let request_id = request_id(&body)?;
    let call = post_body(route, &body)?;
    let fingerprinted = Value::Object(body);
    let request_ids = match caller.transport {
        Transport::Socket => &shared.socket_ids,
        Transport::Tls => &shared.tls_ids,
    };
    let finished = match request_ids.claim(&request_id, path, &fingerprinted) {
        Claim::Reused => {
            return Err(WireError::conflict(
                "request-id-reused",
                format!(
                    "request id {request_id} was used before with another route or body; make a new id per intent"
                ),
            ));
        }
        Claim::Replay(first) => replayed(first),
        Claim::Running(mut wait) => {
            let first = wait
                .wait_for(Option::is_some)
                .await
                .map_err(|_| {
                    WireError::internal(
                        "the first try of this request id ended without an answer; try again",
                    )
                })?
                .clone();
            match first {
                Some(first) => replayed(first),
                None => return Err(WireError::internal("no answer recorded")),
            }
        }
        Claim::Fresh(ticket) => {
            // The call runs on its own task: a caller that leaves does not stop
            // it, and its retry finds the answer.
            let facet = shared.facet.clone();
            let work = tokio::spawn(async move {
                let finished = match facet.call(call, caller).await {
                    Ok(body) => Finished { status: 200, body },
                    Err(error) => Finished {
                        status: error.status,
                        body: error.body(),
                    },
                };
                ticket.finish(finished.clone());
                finished
            });
            work.await
                .map_err(|e| WireError::internal(format!("the call failed: {e}")))?
        }
    };
    let status = StatusCode::from_u16(finished.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    Ok(json_reply(status, &finished.body))
}

/// The body's `request_id`, which every POST carries.
fn request_id(body: &Map<String, Value>) -> Result<String, WireError> {
    match body.get("request_id") {
        Some(Value::String(id)) if limits::valid_id(id) => Ok(id.clone()),
        Some(_) => Err(WireError::bad_request(
            "request_id is an id: 1–128 bytes, no spaces, controls, /, ? or #",
        )),
        None => Err(WireError::bad_request(
            "every POST carries a request_id (one per intent; the same one when retrying)",
        )),
    }
}

fn replayed(mut first: Finished) -> Finished {
    if let Value::Object(body) = &mut first.body {
        body.insert("replayed".into(), Value::Bool(true));
    }
    first
}

/// The call a POST body asks for.
fn post_body(route: PostRoute, body: &Map<String, Value>) -> Result<WireCall, WireError> {
    Ok(match route {
        PostRoute::Answer(pane) => answer(pane, body)?,
        PostRoute::Send(pane) => WireCall::Send {
            pane,
            text: match body.get("text") {
                Some(Value::String(text)) => limits::cut(text, limits::SENT_TEXT),
                _ => return Err(WireError::bad_request("send needs text")),
            },
            turn: number_field(body, "turn")?,
        },
        PostRoute::Abort(pane) => WireCall::Abort {
            pane,
            turn: number_field(body, "turn")?.ok_or_else(|| {
                WireError::bad_request("abort needs turn: the turn the phone saw")
            })?,
        },
        PostRoute::Action(pane) => WireCall::Action {
            pane,
            action: id_field(body, "action")?
                .ok_or_else(|| WireError::bad_request("action needs action: a belt button's id"))?,
        },
        PostRoute::Rename => rename(body)?,
        PostRoute::Close => close(body)?,
        PostRoute::Starter(starter) => WireCall::Starter {
            starter,
            workspace: id_field(body, "workspace")?,
            prompt: match body.get("prompt") {
                Some(Value::String(prompt)) => Some(limits::cut(prompt, limits::SENT_TEXT)),
                None | Some(Value::Null) => None,
                Some(_) => return Err(WireError::bad_request("prompt is text")),
            },
        },
        PostRoute::Reopen => WireCall::Reopen {
            conversation: id_field(body, "conversation")?
                .ok_or_else(|| WireError::bad_request("reopen needs conversation"))?,
        },
    })
}

/// `POST /pane/:id/answer`: `{ask, revision?, answer}`.
fn answer(pane: String, body: &Map<String, Value>) -> Result<WireCall, WireError> {
    Ok(WireCall::Answer {
        pane,
        ask: id_field(body, "ask")?
            .ok_or_else(|| WireError::bad_request("answer needs ask: the ask's id"))?,
        revision: number_field(body, "revision")?,
        answer: match body.get("answer") {
            Some(answer @ Value::Object(_)) => answer.clone(),
            _ => {
                return Err(WireError::bad_request(
                    "answer needs answer: {\"option\"}, {\"text\"} or {\"fields\"}",
                ));
            }
        },
    })
}

/// `POST /rename`: `{workspace | tab, title}`.
fn rename(body: &Map<String, Value>) -> Result<WireCall, WireError> {
    let target = match (id_field(body, "workspace")?, id_field(body, "tab")?) {
        (Some(workspace), None) => Target::Workspace(workspace),
        (None, Some(tab)) => Target::Tab(tab),
        _ => {
            return Err(WireError::bad_request(
                "rename names one of workspace or tab",
            ));
        }
    };
    let title = match body.get("title") {
        Some(Value::String(title)) => limits::cut(title.trim(), limits::TITLE),
        _ => return Err(WireError::bad_request("rename needs title")),
    };
    if title.trim().is_empty() {
        return Err(WireError::bad_request("title is empty"));
    }
    Ok(WireCall::Rename { target, title })
}

/// `POST /close`: `{pane | tab | workspace}`.
fn close(body: &Map<String, Value>) -> Result<WireCall, WireError> {
    let target = match (
        id_field(body, "pane")?,
        id_field(body, "tab")?,
        id_field(body, "workspace")?,
    ) {
        (Some(pane), None, None) => Target::Pane(pane),
        (None, Some(tab), None) => Target::Tab(tab),
        (None, None, Some(workspace)) => Target::Workspace(workspace),
        _ => {
            return Err(WireError::bad_request(
                "close names one of pane, tab or workspace",
            ));
        }
    };
    Ok(WireCall::Close { target })
}

fn id_field(body: &Map<String, Value>, key: &str) -> Result<Option<String>, WireError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(id)) if limits::valid_id(id) => Ok(Some(id.clone())),
        Some(_) => Err(WireError::bad_request(format!(
            "{key} is an id: 1–128 bytes, no spaces, controls, /, ? or #"
        ))),
    }
}

fn number_field(body: &Map<String, Value>, key: &str) -> Result<Option<u64>, WireError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .map(Some)
            .ok_or_else(|| WireError::bad_request(format!("{key} is a whole number"))),
    }
}

/// Reads a body of at most 64 KiB: a JSON object, or nothing (`{}`).
async fn read_body(
    request: &Request<()>,
    incoming: Incoming,
) -> Result<Map<String, Value>, WireError> {
    let too_large = || {
        WireError::new(
            413,
            "too-large",
            format!("a request body is at most {} bytes", limits::BODY),
        )
    };
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limits::BODY as u64) {
        return Err(too_large());
    }
    let bytes = Limited::new(incoming, limits::BODY)
        .collect()
        .await
        .map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                too_large()
            } else {
                WireError::bad_request(format!("the body could not be read: {e}"))
            }
        })?
        .to_bytes();
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(WireError::bad_request("the body is a JSON object")),
        Err(e) => Err(WireError::bad_request(format!("the body is not JSON: {e}"))),
    }
}
