//! The routes of `/session/v1`: one request in, one JSON answer out.
//!
//! The order of checks: the bearer token (TLS) before anything, then the
//! caller (a descendant of the app is refused), the path, the version header
//! (hello may come without it; a version the facet does not speak gets the
//! telling 409), `ready`, the body (≤ 64 KiB, a JSON object; empty is `{}`),
//! the call's own fields, and for a POST its request id.
//!
//! * `route` — which route a path and method name, and the query.
//! * `post` — a POST's body, its request id, and the call it asks for.
//! * this module — the order of checks above, GETs, and the replies.

mod post;
mod route;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Body as _;
use hyper::body::Incoming;
use hyper::header::{
    AUTHORIZATION, CACHE_CONTROL, CONTENT_TYPE, ETAG, HeaderName, HeaderValue, IF_NONE_MATCH,
};
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};

use self::route::{GetRoute, Query, Route, find_route};
use crate::limits;
use crate::request_ids::RequestIds;
use crate::tls::Token;
use crate::wire::{Facet, Peer, SERVICE, VERSION, VERSION_HEADER, WireCall, WireError};

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
    pub caller: Peer,
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
    // A GET has no body: nothing to drain, and no timer to arm for it.
    if let Some(unread) = body.filter(|b| !b.is_end_stream()) {
        // A body left unread when the connection closes makes the kernel
        // reset it, and the caller may lose the answer: read it first.
        // (Boxed, as a POST's call below: hyper keeps this future for every
        // connection, and a poll should not carry what a POST needs.)
        let _ = Box::pin(tokio::time::timeout(
            DRAIN_TIME,
            Limited::new(unread, limits::BODY).collect(),
        ))
        .await;
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

async fn route(
    shared: &Arc<Shared>,
    connection: &Connection,
    request: &Request<()>,
    body: &mut Option<Incoming>,
) -> Result<Reply, WireError> {
    let path = request.uri().path();
    let route = find_route(request.method(), path)?;
    check_version(shared, &route, request)?;
    let hello = matches!(route, Route::Get(GetRoute::Hello));
    if !hello && !shared.facet.ready() {
        return Err(WireError::new(
            503,
            "starting",
            "the app is laying out its panes after a start; ask again in a moment",
        ));
    }
    let caller = connection.caller;
    match route {
        Route::Get(get) => get_reply(&shared.facet, caller, get, request).await,
        Route::Post(post) => {
            let incoming = body
                .take()
                .ok_or_else(|| WireError::internal("the body was read twice"))?;
            Box::pin(post::post_call(
                shared, caller, post, path, request, incoming,
            ))
            .await
        }
    }
}

/// [`VERSION_HEADER`] as a header name, looked up without parsing it again.
const VERSION_NAME: HeaderName = HeaderName::from_static(VERSION_HEADER);

/// [`VERSION_HEADER`]'s value for [`VERSION`], as it is compared.
const VERSION_TEXT: &str = "1";

/// The version header: every call but the first hello carries ours.
fn check_version(shared: &Shared, route: &Route, request: &Request<()>) -> Result<(), WireError> {
    let version = request
        .headers()
        .get(VERSION_NAME)
        .map(HeaderValue::as_bytes);
    match (route, version) {
        (Route::Get(GetRoute::Hello), None) => Ok(()),
        // The common case, without allocating: exactly ours, give or take
        // ASCII spaces.
        (_, Some(v)) if v.trim_ascii() == VERSION_TEXT.as_bytes() => Ok(()),
        (_, Some(v)) => {
            let v = String::from_utf8_lossy(v);
            let v = v.trim();
            if v == VERSION_TEXT {
                Ok(())
            } else {
                Err(incompatible(shared, v))
            }
        }
        (_, None) => Err(WireError::bad_request(format!(
            "every call but the first hello carries {}: {VERSION}",
            "X-Collie-Session"
        ))),
    }
}

/// A GET: hello, the snapshot (with its ETag), or a call its query names.
async fn get_reply(
    facet: &Arc<dyn Facet>,
    caller: Peer,
    route: GetRoute,
    request: &Request<()>,
) -> Result<Reply, WireError> {
    let query = Query::parse(request.uri().query());
    let call = match route {
        GetRoute::Hello => return Ok(json_reply(StatusCode::OK, &hello(facet.as_ref(), &caller))),
        GetRoute::Snapshot => return snapshot(facet, caller, request).await,
        GetRoute::Events(pane) => WireCall::Events {
            pane,
            after: query.event_cursor()?,
            epoch: query.value("epoch").map(str::to_owned),
        },
        GetRoute::Conversations => WireCall::Conversations {
            after: query.page_cursor()?,
            limit: query.limit(limits::CONVERSATIONS_PAGE)?,
        },
        GetRoute::Items(conversation) => WireCall::Items {
            conversation,
            after: query.page_cursor()?,
            limit: query.limit(limits::ITEMS_PAGE)?,
        },
    };
    let body = facet.clone().call(call, caller).await?;
    Ok(json_reply(StatusCode::OK, &body))
}

/// `GET /snapshot`: 304 when `If-None-Match` names the current tag.
async fn snapshot(
    facet: &Arc<dyn Facet>,
    caller: Peer,
    request: &Request<()>,
) -> Result<Reply, WireError> {
    let etag = etag_of(facet.epoch(), facet.rev());
    let seen = request.headers().get(IF_NONE_MATCH);
    if seen.is_some_and(|seen| match seen.to_str() {
        Ok(seen) => etag_matches(seen, &etag),
        Err(_) => etag_matches(&String::from_utf8_lossy(seen.as_bytes()), &etag),
    }) {
        let mut reply = Response::new(Full::new(Bytes::new()));
        *reply.status_mut() = StatusCode::NOT_MODIFIED;
        set_etag(&mut reply, etag);
        return Ok(reply);
    }
    let body = facet.clone().call(WireCall::Snapshot, caller).await?;
    let mut reply = json_reply(StatusCode::OK, &body);
    set_etag(&mut reply, etag);
    Ok(reply)
}

/// The snapshot's tag, `"<epoch>-<rev>"`, made in one allocation.
fn etag_of(epoch: &str, rev: u64) -> String {
    use std::fmt::Write as _;
    // 20 digits of a u64, two quotes and the dash.
    let mut etag = String::with_capacity(epoch.len() + 23);
    etag.push('"');
    etag.push_str(epoch);
    let _ = write!(etag, "-{rev}\"");
    etag
}

/// Sets the ETag header from `etag`'s own bytes (no copy).
fn set_etag(reply: &mut Reply, etag: String) {
    if let Ok(value) = HeaderValue::from_maybe_shared(Bytes::from(etag)) {
        reply.headers_mut().insert(ETAG, value);
    }
}

fn hello(facet: &dyn Facet, caller: &Peer) -> Value {
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
    fn the_version_text_is_the_version() {
        assert_eq!(VERSION_TEXT, VERSION.to_string());
        assert_eq!(VERSION_NAME.as_str(), VERSION_HEADER);
    }

    #[test]
    fn etags_are_epoch_and_rev() {
        let epoch = "0123456789abcdef0123456789abcdef";
        for rev in [0, 7, u64::MAX] {
            let etag = etag_of(epoch, rev);
            assert_eq!(etag, format!("\"{epoch}-{rev}\""));
            assert!(HeaderValue::from_maybe_shared(Bytes::from(etag)).is_ok());
        }
    }

    #[test]
    fn weak_etags_match_once_stripped() {
        assert!(etag_matches("W/\"e-3\"", "\"e-3\""));
        assert!(etag_matches("\"e-3\"", "\"e-3\""));
        assert!(!etag_matches("\"e-2\"", "\"e-3\""));
    }
}
