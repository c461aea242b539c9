//! A sandbox's network with an allowlist (`[sandbox] network = "allow"`):
//! the rules ([`Policy`]), and the app's side of the one Unix socket each
//! such sandbox gets ([`Net`]), bound into it. The first process inside
//! (`krad internal sandboxed`) passes every connection made in the sandbox's
//! own network namespace to that socket, saying first what it is:
//!
//! * `proxy\n`: a connection to the HTTP proxy the sandbox's programs are
//!   pointed at (`HTTPS_PROXY`…): an HTTP `CONNECT host:port` (a tunnel) or a
//!   plain request for an absolute `http://` URL, forwarded;
//! * `relay HOST:PORT\n`: a connection to a loopback address allowed by the
//!   list (the model double, a CLI's base URL on 127.0.0.1), taken inside.
//!
//! The app checks each against the rules, connects to what is allowed, and
//! logs every attempt (host, port, allowed or refused, bytes) in a bounded
//! log per terminal, read by the Connections request (`krad net ID`). A
//! refused tunnel or request is answered at once with a 403 whose body says
//! what to add to the list; a refused relay is closed at once.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use krad_bus::request::connections::{ConnectionAttempt, ConnectionsInfo};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpStream, UnixListener, UnixStream};

pub use crate::config::allow::Rule;
use crate::config::allow::split_host_port;

/// The most attempts a terminal's log keeps (older ones are counted).
pub const LOG_CAPACITY: usize = 1000;
/// The longest request head the proxy reads.
const MAX_HEAD: usize = 64 * 1024;
/// The longest first line the inner process sends.
const MAX_INTRO: usize = 512;

/// The host and port a base URL (`https://api.example.com/v1`) leads to.
pub fn url_host_port(url: &str) -> Option<(String, u16)> {
    let (scheme, rest) = url.trim().split_once("://")?;
    let default = match scheme.to_ascii_lowercase().as_str() {
        "http" | "ws" => 80,
        "https" | "wss" => 443,
        _ => return None,
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let (host, port) = split_host_port(authority)?;
    let port = match port {
        Some(port) => port.parse().ok()?,
        None => default,
    };
    (!host.is_empty()).then(|| (host.to_ascii_lowercase(), port))
}

/// An allowlist: what a sandbox may reach.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    rules: Vec<Rule>,
}

impl Policy {
    /// The rules of these entries (the config's were checked at start; one
    /// that does not parse is left out).
    pub fn new<S: AsRef<str>>(entries: impl IntoIterator<Item = S>) -> Policy {
        let mut rules: Vec<Rule> = Vec::new();
        for rule in entries
            .into_iter()
            .filter_map(|e| Rule::parse(e.as_ref()).ok())
        {
            if !rules.contains(&rule) {
                rules.push(rule);
            }
        }
        Policy { rules }
    }

    /// Whether `host:port` may be reached.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        self.rules.iter().any(|r| r.allows(host, port))
    }

    /// The loopback ports taken inside the sandbox and relayed out.
    pub fn loopback_ports(&self) -> Vec<u16> {
        let mut ports: Vec<u16> = self.rules.iter().filter_map(Rule::loopback_port).collect();
        ports.sort_unstable();
        ports.dedup();
        ports
    }

    /// The rules as written back.
    pub fn entries(&self) -> Vec<String> {
        self.rules.iter().map(ToString::to_string).collect()
    }
}

/// A terminal's connection log, bounded.
#[derive(Debug, Default)]
struct Log {
    attempts: VecDeque<ConnectionAttempt>,
    last: u64,
    dropped: u64,
}

/// The app's side of one sandbox's network: its rules, its log, and the task
/// serving its socket (ended when it is dropped).
pub struct Net {
    id: u64,
    policy: Policy,
    log: Mutex<Log>,
    task: Mutex<Option<tokio::task::AbortHandle>>,
}

impl Drop for Net {
    fn drop(&mut self) {
        if let Some(task) = self
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            task.abort();
        }
    }
}

impl Net {
    /// A network for terminal `id` under `policy`, not yet serving.
    pub fn new(id: u64, policy: Policy) -> Arc<Net> {
        Arc::new(Net {
            id,
            policy,
            log: Mutex::default(),
            task: Mutex::default(),
        })
    }

    /// The loopback ports its sandbox relays out (a check sharing it relays
    /// the same).
    pub fn loopback_ports(&self) -> Vec<u16> {
        self.policy.loopback_ports()
    }

    /// Serves `path` (made anew) until the network is dropped.
    pub fn serve(self: &Arc<Net>, path: &Path) -> std::io::Result<()> {
        let _ = std::fs::remove_file(path);
        let listener = UnixListener::bind(path)?;
        let net = Arc::downgrade(self);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let Some(net) = net.upgrade() else { break };
                tokio::spawn(async move { net.connection(stream).await });
            }
        });
        *self.task.lock().unwrap_or_else(PoisonError::into_inner) = Some(task.abort_handle());
        Ok(())
    }

    /// What Connections answers: the rules and the attempts after `since`.
    pub fn info(&self, since: Option<u64>) -> ConnectionsInfo {
        let log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        ConnectionsInfo {
            terminal: self.id,
            network: Some("allow".into()),
            allow: self.policy.entries(),
            attempts: log
                .attempts
                .iter()
                .filter(|a| since.is_none_or(|s| a.seq > s))
                .cloned()
                .collect(),
            dropped: log.dropped,
        }
    }

    /// Logs an attempt; returns its number.
    fn record(&self, host: &str, port: u16, via: &str, allowed: bool) -> u64 {
        let mut log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        log.last += 1;
        let seq = log.last;
        if log.attempts.len() == LOG_CAPACITY {
            log.attempts.pop_front();
            log.dropped += 1;
        }
        log.attempts.push_back(ConnectionAttempt {
            seq,
            at: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
            host: host.to_owned(),
            port,
            via: via.to_owned(),
            allowed,
            sent: 0,
            received: 0,
            error: None,
        });
        drop(log);
        if allowed {
            tracing::debug!(
                terminal = self.id,
                host,
                port,
                via,
                "sandbox connection allowed"
            );
        } else {
            tracing::info!(
                terminal = self.id,
                host,
                port,
                via,
                "sandbox connection refused"
            );
        }
        seq
    }

    /// Adds to attempt `seq` what it moved, or why it failed.
    fn finish(&self, seq: u64, moved: (u64, u64), error: Option<String>) {
        let mut log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(attempt) = log.attempts.iter_mut().rev().find(|a| a.seq == seq) {
            attempt.sent += moved.0;
            attempt.received += moved.1;
            attempt.error = error;
        }
    }

    /// One connection from inside: its first line says what it is.
    async fn connection(&self, stream: UnixStream) {
        let mut inside = BufReader::new(stream);
        let Some(intro) = read_line(&mut inside, MAX_INTRO).await else {
            return;
        };
        let intro = intro.trim_end();
        if intro == "proxy" {
            self.proxy(inside).await;
        } else if let Some(target) = intro.strip_prefix("relay ") {
            let Some((host, Some(port))) = split_host_port(target) else {
                return;
            };
            let Ok(port) = port.parse::<u16>() else {
                return;
            };
            let host = host.to_owned();
            let allowed = self.policy.allows(&host, port);
            let seq = self.record(&host, port, "relay", allowed);
            if allowed {
                let _ = self.forward(seq, inside, (&host, port), (&[], &[])).await;
            }
        }
    }

    /// Connects to `host:port`, writes `to_host` there and `to_inside` back,
    /// then copies both ways; the attempt's bytes (or its failure) go to the
    /// log. The error when the host cannot be reached (the caller says so).
    async fn forward<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        seq: u64,
        mut inside: S,
        (host, port): (&str, u16),
        (to_host, to_inside): (&[u8], &[u8]),
    ) -> std::io::Result<()> {
        let mut outside = TcpStream::connect((host, port)).await.inspect_err(|e| {
            self.finish(seq, (0, 0), Some(format!("cannot connect: {e}")));
        })?;
        crate::crash_point::here("sandbox-proxy-traffic");
        if outside.write_all(to_host).await.is_err() || inside.write_all(to_inside).await.is_err() {
            return Ok(());
        }
        let moved = tokio::io::copy_bidirectional(&mut inside, &mut outside)
            .await
            .unwrap_or_default();
        self.finish(seq, (moved.0 + to_host.len() as u64, moved.1), None);
        Ok(())
    }

    /// The HTTP proxy: a CONNECT tunnel, or a plain `http://` request.
    async fn proxy(&self, mut inside: BufReader<UnixStream>) {
        let Some(head) = read_head(&mut inside).await else {
            let _ = answer(inside.get_mut(), 400, "krad: a bad proxy request\n").await;
            return;
        };
        let Some(request) = ProxyRequest::parse(&head) else {
            let _ = answer(
                inside.get_mut(),
                400,
                "krad: this proxy takes CONNECT host:port or an absolute http:// URL\n",
            )
            .await;
            return;
        };
        let via = if request.tunnel { "tunnel" } else { "proxy" };
        let (host, port) = (request.host.as_str(), request.port);
        let allowed = self.policy.allows(host, port);
        let seq = self.record(host, port, via, allowed);
        if !allowed {
            let body = format!(
                "krad: {host}:{port} is not on this sandbox's allowlist; add it to [sandbox] \
                 allow in .krad/config.toml to reach it\n"
            );
            let _ = answer(inside.get_mut(), 403, &body).await;
            return;
        }
        let first: (&[u8], &[u8]) = if request.tunnel {
            (&[], b"HTTP/1.1 200 Connection Established\r\n\r\n")
        } else {
            (&request.forwarded, &[])
        };
        if let Err(e) = self.forward(seq, &mut inside, (host, port), first).await {
            let body = format!("krad: cannot reach {host}:{port}: {e}\n");
            let _ = answer(inside.get_mut(), 502, &body).await;
        }
    }
}

/// A proxy request's head, understood.
#[derive(Debug, PartialEq, Eq)]
struct ProxyRequest {
    tunnel: bool,
    host: String,
    port: u16,
    /// For a plain request: its head as sent on (origin-form, `Connection:
    /// close`, no proxy headers).
    forwarded: Vec<u8>,
}

impl ProxyRequest {
    fn parse(head: &str) -> Option<ProxyRequest> {
        let mut lines = head.split("\r\n");
        let mut words = lines.next()?.split(' ');
        let (method, target, version) = (words.next()?, words.next()?, words.next()?);
        if words.next().is_some() || !version.starts_with("HTTP/") {
            return None;
        }
        if method.eq_ignore_ascii_case("CONNECT") {
            let (host, port) = split_host_port(target)?;
            return Some(ProxyRequest {
                tunnel: true,
                host: host.to_ascii_lowercase(),
                port: port?.parse().ok()?,
                forwarded: Vec::new(),
            });
        }
        let rest = target.strip_prefix("http://")?;
        let path_at = rest.find(['/', '?']).unwrap_or(rest.len());
        let (host, port) = url_host_port(&format!("http://{}", &rest[..path_at]))?;
        let path = match &rest[path_at..] {
            "" => "/".to_owned(),
            p if p.starts_with('?') => format!("/{p}"),
            p => p.to_owned(),
        };
        let mut forwarded = format!("{method} {path} {version}\r\n");
        for line in lines.filter(|l| !l.is_empty()) {
            let name = line.split(':').next().unwrap_or_default().trim();
            let dropped = [
                "proxy-connection",
                "proxy-authorization",
                "connection",
                "keep-alive",
            ];
            if !dropped.iter().any(|d| name.eq_ignore_ascii_case(d)) {
                forwarded.push_str(line);
                forwarded.push_str("\r\n");
            }
        }
        forwarded.push_str("Connection: close\r\n\r\n");
        Some(ProxyRequest {
            tunnel: false,
            host,
            port,
            forwarded: forwarded.into_bytes(),
        })
    }
}

/// One line of at most `max` bytes.
async fn read_line<R: AsyncBufReadExt + Unpin>(reader: &mut R, max: usize) -> Option<String> {
    let mut line = Vec::new();
    let mut limited = (&mut *reader).take(max as u64);
    limited.read_until(b'\n', &mut line).await.ok()?;
    line.ends_with(b"\n")
        .then(|| String::from_utf8(line).ok())
        .flatten()
}

/// A request head, up to its blank line (without it).
async fn read_head<R: AsyncBufReadExt + Unpin>(reader: &mut R) -> Option<String> {
    let mut head = String::new();
    loop {
        let line = read_line(reader, MAX_HEAD.saturating_sub(head.len()).max(1)).await?;
        if line == "\r\n" || line == "\n" {
            return Some(head.trim_end().to_owned());
        }
        head.push_str(line.trim_end_matches(['\r', '\n']));
        head.push_str("\r\n");
        if head.len() >= MAX_HEAD {
            return None;
        }
    }
}

/// An HTTP answer from the proxy itself, then the connection's end.
async fn answer(stream: &mut UnixStream, status: u16, body: &str) -> std::io::Result<()> {
    let reason = match status {
        403 => "Forbidden",
        502 => "Bad Gateway",
        _ => "Bad Request",
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_take_hosts_ports_and_domains() {
        let policy = Policy::new([
            "API.example.com",
            "127.0.0.1:8080",
            "*.github.com",
            "[::1]:9",
        ]);
        assert!(policy.allows("api.example.com", 443));
        assert!(policy.allows("api.example.com", 80));
        assert!(!policy.allows("example.com", 443));
        assert!(policy.allows("127.0.0.1", 8080));
        assert!(!policy.allows("127.0.0.1", 8081));
        assert!(policy.allows("raw.github.com", 443));
        assert!(
            !policy.allows("github.com", 443),
            "*. is the names under it"
        );
        assert!(!policy.allows("evilgithub.com", 443));
        assert!(policy.allows("::1", 9));
        assert_eq!(policy.loopback_ports(), vec![8080]);
        assert_eq!(
            policy.entries(),
            [
                "api.example.com",
                "127.0.0.1:8080",
                "*.github.com",
                "[::1]:9"
            ]
        );
        for bad in ["", "host:0", "host:x", "a/b", "*", "x@y"] {
            assert!(Rule::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn base_urls_give_their_host_and_port() {
        assert_eq!(
            url_host_port("https://api.anthropic.com"),
            Some(("api.anthropic.com".into(), 443))
        );
        assert_eq!(
            url_host_port("http://127.0.0.1:4123/v1"),
            Some(("127.0.0.1".into(), 4123))
        );
        assert_eq!(
            url_host_port("http://user:pw@Host:81?x"),
            Some(("host".into(), 81))
        );
        assert_eq!(url_host_port("file:///etc"), None);
    }

    #[test]
    fn a_plain_request_is_sent_on_in_origin_form() {
        let head = "GET http://example.com:8080/a?b HTTP/1.1\r\nHost: example.com:8080\r\n\
                    Proxy-Connection: keep-alive\r\nAccept: */*";
        let request = ProxyRequest::parse(head).unwrap();
        assert_eq!((request.tunnel, request.port), (false, 8080));
        assert_eq!(
            String::from_utf8(request.forwarded).unwrap(),
            "GET /a?b HTTP/1.1\r\nHost: example.com:8080\r\nAccept: */*\r\n\
             Connection: close\r\n\r\n"
        );
        let tunnel = ProxyRequest::parse("CONNECT api.openai.com:443 HTTP/1.1").unwrap();
        assert_eq!(
            (tunnel.tunnel, tunnel.host.as_str()),
            (true, "api.openai.com")
        );
        assert!(ProxyRequest::parse("GET /relative HTTP/1.1").is_none());
        assert!(ProxyRequest::parse("CONNECT host HTTP/1.1").is_none());
    }

    #[test]
    fn the_log_is_bounded_and_counts_what_it_dropped() {
        let net = Net::new(3, Policy::default());
        for _ in 0..LOG_CAPACITY + 5 {
            net.record("example.com", 443, "tunnel", false);
        }
        let info = net.info(None);
        assert_eq!((info.attempts.len(), info.dropped), (LOG_CAPACITY, 5));
        assert_eq!(info.attempts[0].seq, 6);
        assert_eq!(net.info(Some(LOG_CAPACITY as u64 + 3)).attempts.len(), 2);
    }
}
