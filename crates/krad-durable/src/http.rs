//! The routes of `/session/v1`: one request in, one JSON answer out.
//!
//! The order of checks: the bearer token (TLS) before anything, then the
//! caller (a descendant of the app is refused), the path, the version header
//! (hello may come without it; a version the facet does not speak gets the
//! telling 409), `ready`, the body (≤ 64 KiB, a JSON object; empty is `{}`),
//! the call's own fields, and for a POST its request id.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{
    AUTHORIZATION, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE, ETAG, HeaderValue, IF_NONE_MATCH,
};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Map, Value, json};

use crate::limits;
use crate::request_ids::{Claim, Finished, RequestIds};
use crate::tls::Token;
use crate::wire::{
    Call, Caller, Facet, SERVICE, Target, Transport, VERSION, VERSION_HEADER, WireError,
};

/// The path every route starts with.
const PREFIX: &str = "/session/v1";

/// What every connection of the facet shares.
pub(crate) struct Shared {
    pub facet: Arc<dyn Facet>,
    /// The request-id log of socket callers.
    pub socket_ids: Arc<RequestIds>,
    /// The request-id log of TLS callers: a request id never crosses transports,
    /// so a TLS caller is never handed (as a replay) what a socket caller was
    /// allowed to do or see, nor the other way round.
    pub tls_ids: Arc<RequestIds>,
    /// Collie versions whose telling hello was logged (once per epoch each).
    pub told: Mutex<HashSet<String>>,
    /// The verdicts on socket callers (the app's own agents are refused).
    pub callers: crate::socket::Callers,
}

/// What the accept loop learned of one connection.
pub(crate) struct Connection {
    pub caller: Caller,
    /// The bearer token every request must carry (TLS).
    pub token: Option<Arc<Token>>,
    /// Why the caller is refused (it is one of the app's own descendants).
    pub refused: Option<String>,
}

type Reply = Response<Full<Bytes>>;

/// Answers one request.
pub(crate) async fn handle(
    shared: Arc<Shared>,
    connection: Arc<Connection>,
    request: Request<Incoming>,
) -> Reply {
    let (parts, incoming) = request.into_parts();
    let request = Request::from_parts(parts, ());
    let mut body = Some(incoming);
    let reply = answer(&shared, &connection, &request, &mut body).await;
    if let Some(unread) = body {
        // A body left unread when the connection closes makes the kernel
        // reset it, and the caller may lose the answer: read it first.
        let _ =
            tokio::time::timeout(DRAIN_TIME, Limited::new(unread, limits::BODY).collect()).await;
    }
    reply
}

/// How long an early answer waits for the rest of the body it did not need.
const DRAIN_TIME: std::time::Duration = std::time::Duration::from_secs(1);

async fn answer(
    shared: &Arc<Shared>,
    connection: &Connection,
    request: &Request<()>,
    body: &mut Option<Incoming>,
) -> Reply {
    if let Some(token) = &connection.token {
        let header = request
            .headers()
            .get(AUTHORIZATION)
            .map(HeaderValue::as_bytes);
        if !token.matches_header(header) {
            return json_reply(StatusCode::UNAUTHORIZED, &json!({"code": "unauthorized"}));
        }
    }
    if let Some(why) = &connection.refused {
        return error_reply(&WireError::new(403, "caller-refused", why.clone()));
    }
    match route(shared, connection, request, body).await {
        Ok(reply) => reply,
        Err(error) => error_reply(&error),
    }
}

/// The routes the facet knows, and the methods each takes.
enum Route {
    Hello,
    Snapshot,
    Events(String),
    PanePost(String, &'static str),
    Rename,
    Close,
    Starter(String),
    Conversations,
    Items(String),
    Reopen,
}

fn find_route(method: &Method, path: &str) -> Result<Route, WireError> {
    let not_found = || {
        WireError::missing(
            "not-found",
            format!("no route {path}; routes are under {PREFIX}/"),
        )
    };
    let rest = path
        .strip_prefix(PREFIX)
        .and_then(|r| r.strip_prefix('/'))
        .ok_or_else(not_found)?;
    let segments: Vec<&str> = rest.split('/').collect();
    let (route, post) = match segments.as_slice() {
        ["hello"] => (Route::Hello, false),
        ["snapshot"] => (Route::Snapshot, false),
        ["conversations"] => (Route::Conversations, false),
        ["pane", id, "events"] => (Route::Events(pane_id(id)?), false),
        ["conversation", id, "items"] => {
            (Route::Items(path_id(id, "no-such-conversation")?), false)
        }
        ["pane", id, verb @ ("answer" | "send" | "abort" | "action")] => {
            let verb = match *verb {
                "answer" => "answer",
                "send" => "send",
                "abort" => "abort",
                _ => "action",
            };
            (Route::PanePost(pane_id(id)?, verb), true)
        }
        ["rename"] => (Route::Rename, true),
        ["close"] => (Route::Close, true),
        ["reopen"] => (Route::Reopen, true),
        ["starter", id] => (Route::Starter(path_id(id, "no-such-starter")?), true),
        _ => return Err(not_found()),
    };
    let wanted = if post { Method::POST } else { Method::GET };
    if *method != wanted {
        return Err(WireError::new(
            405,
            "method-not-allowed",
            format!("{path} takes {wanted}"),
        ));
    }
    Ok(route)
}

fn pane_id(id: &str) -> Result<String, WireError> {
    path_id(id, "no-such-pane")
}

fn path_id(id: &str, code: &'static str) -> Result<String, WireError> {
    let id = percent_decode(id);
    if limits::valid_id(&id) {
        Ok(id)
    } else {
        Err(WireError::missing(
            code,
            "not an id (1–128 bytes, no spaces, controls, /, ? or #)",
        ))
    }
}

async fn route(
    shared: &Arc<Shared>,
    connection: &Connection,
    request: &Request<()>,
    body: &mut Option<Incoming>,
) -> Result<Reply, WireError> {
    let path = request.uri().path().to_owned();
    let route = find_route(request.method(), &path)?;
    let version = request
        .headers()
        .get(VERSION_HEADER)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).trim().to_owned());
    match (&route, version) {
        (Route::Hello, None) => {}
        (_, Some(v)) if v == VERSION.to_string() => {}
        (_, Some(v)) => return Err(incompatible(shared, &v)),
        (_, None) => {
            return Err(WireError::bad_request(format!(
                "every call but the first hello carries {}: {VERSION}",
                "X-Collie-Session"
            )));
        }
    }
    let facet = &shared.facet;
    if matches!(route, Route::Hello) {
        return Ok(json_reply(
            StatusCode::OK,
            &hello(facet.as_ref(), &connection.caller),
        ));
    }
    if !facet.ready() {
        return Err(WireError::new(
            503,
            "starting",
            "the app is laying out its panes after a start; ask again in a moment",
        ));
    }
    let query = query_pairs(request.uri().query().unwrap_or(""));
    let if_none_match = request
        .headers()
        .get(IF_NONE_MATCH)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let caller = connection.caller;
    let call =
        match route {
            Route::Hello => return Err(WireError::internal("hello answered above")),
            Route::Snapshot => {
                let etag = format!("\"{}-{}\"", facet.epoch(), facet.rev());
                if if_none_match
                    .as_deref()
                    .is_some_and(|seen| etag_matches(seen, &etag))
                {
                    let mut reply = Response::new(Full::new(Bytes::new()));
                    *reply.status_mut() = StatusCode::NOT_MODIFIED;
                    set_header(&mut reply, ETAG, &etag);
                    return Ok(reply);
                }
                let body = facet.clone().call(Call::Snapshot, caller).await?;
                let mut reply = json_reply(StatusCode::OK, &body);
                set_header(&mut reply, ETAG, &etag);
                return Ok(reply);
            }
            Route::Events(pane) => Call::Events {
                pane,
                after: match query_value(&query, "after") {
                    Some(after) => Some(after.parse::<u64>().map_err(|_| {
                        WireError::bad_request("after is a cursor: a whole number")
                    })?),
                    None => None,
                },
                epoch: query_value(&query, "epoch").map(str::to_owned),
            },
            Route::Conversations => Call::Conversations {
                after: cursor(&query)?,
                limit: limit(&query, limits::CONVERSATIONS_PAGE)?,
            },
            Route::Items(conversation) => Call::Items {
                conversation,
                after: cursor(&query)?,
                limit: limit(&query, limits::ITEMS_PAGE)?,
            },
            post => {
                let incoming = body
                    .take()
                    .ok_or_else(|| WireError::internal("the body was read twice"))?;
                return post_call(shared, caller, post, &path, request, incoming).await;
            }
        };
    let body = facet.clone().call(call, caller).await?;
    Ok(json_reply(StatusCode::OK, &body))
}

/// A POST: read the body, take its request id, run the call once.
async fn post_call(
    shared: &Arc<Shared>,
    caller: Caller,
    route: Route,
    path: &str,
    request: &Request<()>,
    incoming: Incoming,
) -> Result<Reply, WireError> {
    let body = read_body(request, incoming).await?;
    let request_id = match body.get("request_id") {
        Some(Value::String(id)) if limits::valid_id(id) => id.clone(),
        Some(_) => {
            return Err(WireError::bad_request(
                "request_id is an id: 1–128 bytes, no spaces, controls, /, ? or #",
            ));
        }
        None => {
            return Err(WireError::bad_request(
                "every POST carries a request_id (one per intent; the same one when retrying)",
            ));
        }
    };
    let call = post_body(route, &body)?;
    let fingerprinted = Value::Object(body.clone());
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

fn replayed(mut first: Finished) -> Finished {
    if let Value::Object(body) = &mut first.body {
        body.insert("replayed".into(), Value::Bool(true));
    }
    first
}

/// The call a POST body asks for.
fn post_body(route: Route, body: &Map<String, Value>) -> Result<Call, WireError> {
    Ok(match route {
        Route::PanePost(pane, "answer") => Call::Answer {
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
        },
        Route::PanePost(pane, "send") => Call::Send {
            pane,
            text: match body.get("text") {
                Some(Value::String(text)) => limits::cut(text, limits::SENT_TEXT),
                _ => return Err(WireError::bad_request("send needs text")),
            },
            turn: number_field(body, "turn")?,
        },
        Route::PanePost(pane, "abort") => Call::Abort {
            pane,
            turn: number_field(body, "turn")?.ok_or_else(|| {
                WireError::bad_request("abort needs turn: the turn the phone saw")
            })?,
        },
        Route::PanePost(pane, _) => Call::Action {
            pane,
            action: id_field(body, "action")?
                .ok_or_else(|| WireError::bad_request("action needs action: a belt button's id"))?,
        },
        Route::Rename => {
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
            Call::Rename { target, title }
        }
        Route::Close => Call::Close {
            target: match (
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
            },
        },
        Route::Starter(starter) => Call::Starter {
            starter,
            workspace: id_field(body, "workspace")?,
            prompt: match body.get("prompt") {
                Some(Value::String(prompt)) => Some(limits::cut(prompt, limits::SENT_TEXT)),
                None | Some(Value::Null) => None,
                Some(_) => return Err(WireError::bad_request("prompt is text")),
            },
        },
        Route::Reopen => Call::Reopen {
            conversation: id_field(body, "conversation")?
                .ok_or_else(|| WireError::bad_request("reopen needs conversation"))?,
        },
        Route::Hello
        | Route::Snapshot
        | Route::Events(_)
        | Route::Conversations
        | Route::Items(_) => {
            return Err(WireError::internal("not a POST route"));
        }
    })
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

fn hello(facet: &dyn Facet, caller: &Caller) -> Value {
    json!({
        "service": SERVICE,
        "protocol": {"min": VERSION, "max": VERSION},
        "host": {"name": limits::cut(&facet.host_name(), limits::HOST_NAME)},
        "epoch": facet.epoch(),
        "ready": facet.ready(),
        "caps": facet.caps(caller),
    })
}

/// The telling hello: both ranges, and the sentence the phone shows.
fn incompatible(shared: &Shared, theirs: &str) -> WireError {
    let theirs = limits::cut(theirs, 16);
    let sentence = format!(
        "The durable agent speaks wire v{VERSION}, this Collie speaks v{theirs}. Update Collie, or the agent's SDK."
    );
    let first = shared
        .told
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(theirs.clone());
    if first {
        tracing::warn!(collie = %theirs, ours = VERSION, "durable facet: {sentence}");
    }
    let collie = theirs
        .parse::<u64>()
        .map_or(json!(theirs), |v| json!({"min": v, "max": v}));
    WireError::conflict("incompatible", sentence.clone()).with(
        "refusal",
        json!({"agent": {"min": VERSION, "max": VERSION}, "collie": collie, "sentence": sentence}),
    )
}

/// `If-None-Match` against our tag; a proxy's weak `W/` prefix is stripped.
fn etag_matches(seen: &str, etag: &str) -> bool {
    seen.split(',')
        .map(str::trim)
        .any(|tag| tag == "*" || tag.strip_prefix("W/").unwrap_or(tag) == etag)
}

fn query_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(key), percent_decode(value))
        })
        .collect()
}

fn query_value<'q>(query: &'q [(String, String)], key: &str) -> Option<&'q str> {
    query
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn cursor(query: &[(String, String)]) -> Result<Option<String>, WireError> {
    match query_value(query, "after") {
        None | Some("") => Ok(None),
        Some(c) if limits::valid_cursor(c) => Ok(Some(c.to_owned())),
        Some(_) => Err(WireError::bad_request(
            "after is a cursor from a previous page",
        )),
    }
}

fn limit(query: &[(String, String)], max: usize) -> Result<usize, WireError> {
    match query_value(query, "limit") {
        None | Some("") => Ok(max),
        Some(n) => n.parse::<usize>().map(|n| n.clamp(1, max)).map_err(|_| {
            WireError::bad_request(format!("limit is a whole number (at most {max})"))
        }),
    }
}

/// `%XX` decoding; anything malformed is kept as it is.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                i += 3;
            }
            (b'+', _, _) => {
                out.push(b' ');
                i += 1;
            }
            (byte, _, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub(crate) fn error_reply(error: &WireError) -> Reply {
    let status = StatusCode::from_u16(error.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_reply(status, &error.body())
}

fn json_reply(status: StatusCode, body: &Value) -> Reply {
    let mut reply = Response::new(Full::new(Bytes::from(body.to_string())));
    *reply.status_mut() = status;
    set_header(&mut reply, CONTENT_TYPE, "application/json");
    set_header(&mut reply, CACHE_CONTROL, "no-store");
    reply
}

fn set_header(reply: &mut Reply, name: hyper::header::HeaderName, value: &str) {
    if let Ok(value) = HeaderValue::from_str(value) {
        reply.headers_mut().insert(name, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weak_etags_match_once_stripped() {
        assert!(etag_matches("W/\"e-3\"", "\"e-3\""));
        assert!(etag_matches("\"e-3\"", "\"e-3\""));
        assert!(!etag_matches("\"e-2\"", "\"e-3\""));
    }

    #[test]
    fn routes_and_methods() {
        assert!(
            matches!(find_route(&Method::GET, "/session/v1/pane/p1/events"), Ok(Route::Events(p)) if p == "p1")
        );
        assert_eq!(
            find_route(&Method::GET, "/session/v1/pane/p1/answer")
                .err()
                .map(|e| e.status),
            Some(405)
        );
        assert_eq!(
            find_route(&Method::GET, "/session/v2/hello")
                .err()
                .map(|e| e.code),
            Some("not-found")
        );
        assert_eq!(
            find_route(&Method::GET, "/session/v1/nope")
                .err()
                .map(|e| e.code),
            Some("not-found")
        );
        assert_eq!(percent_decode("a%20b%2"), "a b%2");
    }
}
