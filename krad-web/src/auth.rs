//! Who may use the page: one-time login tokens, session cookies, and the Host
//! and Origin checks that keep other sites (DNS rebinding, cross-site requests)
//! out. Every secret is compared in constant time.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::TryRng;
use subtle::ConstantTimeEq;

/// How long a login URL works (once).
pub const LOGIN_TTL: Duration = Duration::from_secs(120);
/// How long a session lasts without use.
const SESSION_IDLE: Duration = Duration::from_secs(12 * 3600);
/// More outstanding login tokens than this and the oldest are dropped.
const MAX_PENDING: usize = 64;

/// Draws 32 random bytes as 64 hex digits.
pub(crate) fn random_hex() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    rand::rngs::SysRng
        .try_fill_bytes(&mut bytes)
        .map_err(|e| std::io::Error::other(format!("the OS random generator failed: {e}")))?;
    Ok(hex::encode(bytes))
}

/// Whether two secrets are equal, in time that does not depend on where they differ.
pub(crate) fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// The login tokens handed out and the sessions they became.
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    pending: Mutex<Vec<(String, Instant)>>,
    live: Mutex<HashMap<String, Instant>>,
}

impl Sessions {
    /// A new one-time login token.
    pub(crate) fn mint_login(&self) -> std::io::Result<String> {
        let token = random_hex()?;
        let mut pending = lock(&self.pending);
        pending.retain(|(_, at)| at.elapsed() < LOGIN_TTL);
        if pending.len() >= MAX_PENDING {
            pending.remove(0);
        }
        pending.push((token.clone(), Instant::now()));
        Ok(token)
    }

    /// Takes a login token (it works once, within [`LOGIN_TTL`]) and opens a
    /// session: its cookie value.
    pub(crate) fn redeem(&self, token: &str) -> Option<String> {
        let mut pending = lock(&self.pending);
        // Every entry is compared, so the time says nothing about which matched.
        let mut found = None;
        for (i, (candidate, _)) in pending.iter().enumerate() {
            if same_secret(candidate, token) {
                found = Some(i);
            }
        }
        let (_, at) = pending.remove(found?);
        drop(pending);
        if at.elapsed() >= LOGIN_TTL {
            return None;
        }
        let session = random_hex().ok()?;
        let mut live = lock(&self.live);
        live.retain(|_, used| used.elapsed() < SESSION_IDLE);
        live.insert(session.clone(), Instant::now());
        Some(session)
    }

    /// Whether a cookie value is a live session (and marks it used).
    pub(crate) fn check(&self, cookie: &str) -> bool {
        let mut live = lock(&self.live);
        let mut hit = None;
        for (session, used) in live.iter() {
            if same_secret(session, cookie) && used.elapsed() < SESSION_IDLE {
                hit = Some(session.clone());
            }
        }
        match hit {
            Some(session) => {
                live.insert(session, Instant::now());
                true
            }
            None => false,
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The names this server answers to: `127.0.0.1:PORT` and `localhost:PORT`.
/// Anything else is another site pointing its name at us (DNS rebinding).
pub(crate) fn host_allowed(host: Option<&str>, address: SocketAddr) -> bool {
    let port = address.port();
    host.is_some_and(|host| {
        host == format!("127.0.0.1:{port}") || host == format!("localhost:{port}")
    })
}

/// Whether an `Origin` is this page's own.
pub(crate) fn origin_allowed(origin: Option<&str>, address: SocketAddr) -> bool {
    let port = address.port();
    origin.is_some_and(|origin| {
        origin == format!("http://127.0.0.1:{port}") || origin == format!("http://localhost:{port}")
    })
}

/// The session cookie's name: per port, since browsers keep cookies per host
/// and not per port, and two apps must not log each other out.
pub(crate) fn cookie_name(address: SocketAddr) -> String {
    format!("krad_session_{}", address.port())
}

/// The value of cookie `name` in a `Cookie` header.
pub(crate) fn cookie_value<'a>(header: Option<&'a str>, name: &str) -> Option<&'a str> {
    header?.split(';').find_map(|pair| {
        let (key, value) = pair.trim().split_once('=')?;
        (key == name).then_some(value)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_login_token_works_once() {
        let sessions = Sessions::default();
        let token = sessions.mint_login().unwrap();
        let session = sessions.redeem(&token).unwrap();
        assert!(sessions.check(&session));
        assert!(sessions.redeem(&token).is_none());
        assert!(!sessions.check(&token));
        assert!(!sessions.check(""));
    }

    #[test]
    fn only_our_own_names_pass() {
        let address: SocketAddr = "127.0.0.1:4100".parse().unwrap();
        assert!(host_allowed(Some("127.0.0.1:4100"), address));
        assert!(host_allowed(Some("localhost:4100"), address));
        assert!(!host_allowed(Some("evil.example:4100"), address));
        assert!(!host_allowed(Some("127.0.0.1:4101"), address));
        assert!(!host_allowed(None, address));
        assert!(origin_allowed(Some("http://localhost:4100"), address));
        assert!(!origin_allowed(Some("http://evil.example"), address));
        assert!(!origin_allowed(Some("null"), address));
        assert_eq!(
            cookie_value(Some("a=1; krad_session_4100=xyz"), "krad_session_4100"),
            Some("xyz")
        );
    }
}
