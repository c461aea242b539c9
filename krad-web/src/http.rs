//! The page's HTTP side: the accept loop and the routes, each behind the Host
//! check, the page's own behind a session, the WebSocket and every
//! state-changing request behind the Origin check too. No CORS headers.
//!
//! | route | who | what |
//! |---|---|---|
//! | `GET /login?token=…` | a one-time login URL | a session cookie, then `/` |
//! | `POST /api/login-link` | `Authorization: Bearer <client token>` (`krad ui`) | `{"url":…,"expires_in_secs":…}` |
//! | `GET /`, `GET /assets/…` | a session | the page |
//! | `GET /ws` | a session, our Origin | the page's WebSocket ([`crate::relay`]) |

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

use crate::assets;
use crate::auth::{self, Sessions};
use crate::bus;
use crate::relay::{self, Relay};
use crate::reviews::Reviews;
use crate::{LOGIN_TTL, WebSettings};

/// Connections served at once; more wait to be accepted.
const MAX_CONNECTIONS: usize = 256;

/// What every route needs.
pub(crate) struct State {
    address: SocketAddr,
    client_token: String,
    sessions: Sessions,
    relay: Arc<Relay>,
}

impl State {
    /// The server's state for `address`.
    pub(crate) fn new(address: SocketAddr, settings: WebSettings) -> State {
        State {
            address,
            client_token: settings.client_token.expose().to_owned(),
            sessions: Sessions::default(),
            relay: Arc::new(Relay {
                bus: bus::client(settings.bus, settings.client_token),
                reviews: Arc::new(Reviews::new(&settings.state_dir)),
            }),
        }
    }
}

/// Accepts connections until stopped.
pub(crate) async fn serve(
    listener: TcpListener,
    state: Arc<State>,
    mut stopped: watch::Receiver<bool>,
) {
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopped.changed() => return,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) => {
                tracing::warn!(%error, "the page's server cannot accept");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let (state, stopped) = (state.clone(), stopped.clone());
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let (state, stopped) = (state.clone(), stopped.clone());
                async move { Ok::<_, Infallible>(route(&state, request, stopped)) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades()
                .await;
            drop(permit);
        });
    }
}

fn route(
    state: &Arc<State>,
    mut request: Request<Incoming>,
    stopped: watch::Receiver<bool>,
) -> Response<Full<Bytes>> {
    let header = |name: header::HeaderName| {
        request
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    if !auth::host_allowed(header(header::HOST).as_deref(), state.address) {
        return text(
            StatusCode::FORBIDDEN,
            "wrong Host: this page answers only to 127.0.0.1 and localhost at its own port",
        );
    }
    let origin = header(header::ORIGIN);
    let path = request.uri().path().to_owned();
    let method = request.method().clone();
    if method != Method::GET && !origin_ok_if_any(origin.as_deref(), state.address) {
        return text(StatusCode::FORBIDDEN, "wrong Origin");
    }
    if method == Method::POST && path == "/api/login-link" {
        return login_link(state, header(header::AUTHORIZATION).as_deref());
    }
    if method != Method::GET {
        return text(StatusCode::METHOD_NOT_ALLOWED, "not a route of this page");
    }
    if path == "/login" {
        return login(state, request.uri().query().unwrap_or(""));
    }
    let cookie = header(header::COOKIE);
    let session = auth::cookie_value(cookie.as_deref(), &auth::cookie_name(state.address));
    if !session.is_some_and(|s| state.sessions.check(s)) {
        return text(
            StatusCode::UNAUTHORIZED,
            "not logged in: run `krad ui` and open the login link it prints",
        );
    }
    if path == "/ws" {
        if !auth::origin_allowed(origin.as_deref(), state.address) {
            return text(StatusCode::FORBIDDEN, "wrong Origin");
        }
        if !hyper_tungstenite::is_upgrade_request(&request) {
            return text(StatusCode::BAD_REQUEST, "a WebSocket upgrade is expected");
        }
        let config = hyper_tungstenite::tungstenite::protocol::WebSocketConfig::default()
            .max_message_size(Some(1 << 20));
        return match hyper_tungstenite::upgrade(&mut request, Some(config)) {
            Ok((response, socket)) => {
                tokio::spawn(relay::serve(socket, state.relay.clone(), stopped));
                secured(response)
            }
            Err(e) => text(StatusCode::BAD_REQUEST, &format!("not a WebSocket: {e}")),
        };
    }
    match assets::find(&path) {
        Some((content_type, body)) => {
            let mut response = Response::new(Full::new(Bytes::from_static(body)));
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
            secured(response)
        }
        None => text(StatusCode::NOT_FOUND, "no such page"),
    }
}

/// A request without an Origin is not a browser's cross-site one (browsers
/// send Origin on every POST); one with an Origin must name us.
fn origin_ok_if_any(origin: Option<&str>, address: SocketAddr) -> bool {
    origin.is_none() || auth::origin_allowed(origin, address)
}

/// `krad ui` asks for a login URL with the client token (from api.json, in a
/// header, never in argv).
fn login_link(state: &State, authorization: Option<&str>) -> Response<Full<Bytes>> {
    let presented = authorization
        .and_then(|a| a.strip_prefix("Bearer "))
        .unwrap_or("");
    if !auth::same_secret(presented, &state.client_token) {
        return text(StatusCode::UNAUTHORIZED, "the client token is wrong");
    }
    match state.sessions.mint_login() {
        Ok(token) => {
            let body = serde_json::json!({
                "url": format!("http://{}/login?token={token}", state.address),
                "expires_in_secs": LOGIN_TTL.as_secs(),
            });
            let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            secured(response)
        }
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

/// Takes a one-time login token: a session cookie, and the page.
fn login(state: &State, query: &str) -> Response<Full<Bytes>> {
    let token = query
        .split('&')
        .find_map(|pair| pair.strip_prefix("token="))
        .unwrap_or("");
    let Some(session) = state.sessions.redeem(token) else {
        return text(
            StatusCode::FORBIDDEN,
            "this login link was used already or has expired: run `krad ui` for a new one",
        );
    };
    let cookie = format!(
        "{}={session}; HttpOnly; SameSite=Strict; Path=/",
        auth::cookie_name(state.address)
    );
    let mut response = Response::new(Full::new(Bytes::from_static(b"logged in")));
    *response.status_mut() = StatusCode::SEE_OTHER;
    let headers = response.headers_mut();
    headers.insert(header::LOCATION, HeaderValue::from_static("/"));
    if let Ok(cookie) = HeaderValue::from_str(&cookie) {
        headers.insert(header::SET_COOKIE, cookie);
    }
    secured(response)
}

fn text(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(format!("{message}\n"))));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    secured(response)
}

/// The headers every answer carries: not cached, not framed, no referrer, the
/// page's own scripts only. (And never an Access-Control-* header.)
fn secured(mut response: Response<Full<Bytes>>) -> Response<Full<Bytes>> {
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; connect-src 'self'; img-src 'self' data:; \
             style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
        ),
    );
    response
}
