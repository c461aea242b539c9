//! A client of the durable facet that behaves as the seed says Collie does:
//! hello without the version header, then the version on every call; the
//! snapshot polled with `If-None-Match`; events read with a cursor and the
//! epoch it belongs to; one request id per intent, the same one on a retry.
//! HTTP/1.1 is written and read by hand, over the real socket or real TLS.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

/// One HTTP answer.
#[derive(Debug)]
pub(crate) struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub text: String,
    pub body: Value,
}

impl Reply {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn code(&self) -> &str {
        self.body["code"].as_str().unwrap_or("")
    }
}

/// Writes one request (`Connection: close`) and reads the whole answer.
pub(crate) fn exchange<S: Read + Write>(
    mut stream: S,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: Option<&[u8]>,
) -> Reply {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: durable\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = body {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    if let Some(body) = body {
        // A body the app refuses early may find the connection closed.
        let _ = stream.write_all(body);
    }
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    parse(&raw)
}

fn parse(raw: &[u8]) -> Reply {
    let text = String::from_utf8_lossy(raw).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP answer: {text:?}"));
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    Reply {
        status,
        headers,
        text: body.to_owned(),
        body: serde_json::from_str(body).unwrap_or(Value::Null),
    }
}

/// One request over the socket.
pub(crate) fn over_socket(
    socket: &Path,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: Option<&[u8]>,
) -> Reply {
    let stream =
        UnixStream::connect(socket).unwrap_or_else(|e| panic!("connect {}: {e}", socket.display()));
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    exchange(stream, method, path, headers, body)
}

/// One request over TLS, trusting the certificate in `cert` (PEM).
pub(crate) fn over_tls(
    address: SocketAddr,
    cert: &Path,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: Option<&[u8]>,
) -> Reply {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from_pem_file(cert).unwrap())
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let connection = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let tcp = TcpStream::connect(address).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    exchange(
        rustls::StreamOwned::new(connection, tcp),
        method,
        path,
        headers,
        body,
    )
}

/// Collie, on the socket.
pub(crate) struct Collie {
    pub socket: PathBuf,
    pub version: u32,
    pub epoch: String,
    pub hello: Value,
    etag: Option<String>,
    cursors: HashMap<String, (String, u64)>,
    next_request: u64,
}

impl Collie {
    /// hello without the header, then the highest version both speak.
    pub(crate) fn connect(socket: &Path) -> Collie {
        let hello = over_socket(socket, "GET", "/session/v1/hello", &[], None);
        assert_eq!(hello.status, 200, "{}", hello.text);
        assert_eq!(hello.body["service"], "collie-durable");
        let (min, max) = (
            hello.body["protocol"]["min"].as_u64().unwrap(),
            hello.body["protocol"]["max"].as_u64().unwrap(),
        );
        assert!(min <= 1 && 1 <= max, "no common version: {}", hello.text);
        Collie {
            socket: socket.to_path_buf(),
            version: 1,
            epoch: hello.body["epoch"].as_str().unwrap().to_owned(),
            hello: hello.body,
            etag: None,
            cursors: HashMap::new(),
            next_request: 0,
        }
    }

    /// hello again (with the version): a new epoch means the app restarted.
    pub(crate) fn rehello(&mut self) -> bool {
        let hello = self.get("/hello");
        assert_eq!(hello.status, 200, "{}", hello.text);
        let epoch = hello.body["epoch"].as_str().unwrap().to_owned();
        let restarted = epoch != self.epoch;
        self.epoch = epoch;
        self.hello = hello.body;
        restarted
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        vec![("X-Collie-Session", self.version.to_string())]
    }

    pub(crate) fn get(&self, path: &str) -> Reply {
        over_socket(
            &self.socket,
            "GET",
            &format!("/session/v1{path}"),
            &self.headers(),
            None,
        )
    }

    pub(crate) fn post(&self, path: &str, body: &Value) -> Reply {
        over_socket(
            &self.socket,
            "POST",
            &format!("/session/v1{path}"),
            &self.headers(),
            Some(body.to_string().as_bytes()),
        )
    }

    /// A POST whose answer is never read: the request leaves, the write side
    /// is shut, and the connection is dropped when the caller drops the stream.
    pub(crate) fn post_unread(&self, path: &str, body: &Value) -> UnixStream {
        let mut stream = UnixStream::connect(&self.socket).unwrap();
        let body = body.to_string();
        let request = format!(
            "POST /session/v1{path} HTTP/1.1\r\nHost: durable\r\nX-Collie-Session: {}\r\nContent-Length: {}\r\n\r\n{body}",
            self.version,
            body.len()
        );
        stream.write_all(request.as_bytes()).unwrap();
        stream.shutdown(Shutdown::Write).unwrap();
        stream
    }

    /// A new request id (one per intent).
    pub(crate) fn request_id(&mut self) -> String {
        self.next_request += 1;
        format!("r-{}-{}", std::process::id(), self.next_request)
    }

    /// The snapshot if it changed since the last poll (`None` on 304).
    pub(crate) fn poll_snapshot(&mut self) -> Option<Value> {
        let mut headers = self.headers();
        if let Some(etag) = &self.etag {
            headers.push(("If-None-Match", etag.clone()));
        }
        let reply = over_socket(&self.socket, "GET", "/session/v1/snapshot", &headers, None);
        match reply.status {
            304 => None,
            200 => {
                self.etag = reply.header("etag").map(str::to_owned);
                Some(reply.body)
            }
            other => panic!("snapshot answered {other}: {}", reply.text),
        }
    }

    /// Whether the last ETag seen is the app's current one.
    pub(crate) fn etag(&self) -> Option<&str> {
        self.etag.as_deref()
    }

    /// The pane's events after the cursor read last (with its epoch).
    pub(crate) fn events(&mut self, pane: &str) -> Value {
        let path = match self.cursors.get(pane) {
            Some((epoch, cursor)) => format!("/pane/{pane}/events?after={cursor}&epoch={epoch}"),
            None => format!("/pane/{pane}/events"),
        };
        let reply = self.get(&path);
        assert_eq!(reply.status, 200, "{}", reply.text);
        let epoch = reply.body["epoch"].as_str().unwrap().to_owned();
        let cursor = reply.body["cursor"].as_u64().unwrap();
        self.cursors.insert(pane.to_owned(), (epoch, cursor));
        reply.body
    }

    /// Events until one matches `check`; returns every event read.
    pub(crate) fn events_until(
        &mut self,
        pane: &str,
        check: impl Fn(&Value) -> bool,
    ) -> Vec<Value> {
        let until = std::time::Instant::now() + Duration::from_secs(20);
        let mut seen = Vec::new();
        loop {
            let read = self.events(pane);
            seen.extend(read["events"].as_array().unwrap().iter().cloned());
            if seen.iter().any(&check) {
                return seen;
            }
            assert!(
                std::time::Instant::now() < until,
                "no such event in {seen:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The pane's open asks in the snapshot.
    pub(crate) fn asks(&mut self, pane: &str) -> Vec<Value> {
        let snapshot = self.get("/snapshot").body;
        panes(&snapshot)
            .into_iter()
            .find(|p| p["id"] == pane)
            .map(|p| p["asks"].as_array().unwrap().clone())
            .unwrap_or_default()
    }

    /// A pane as the snapshot shows it.
    pub(crate) fn pane(&self, pane: &str) -> Value {
        let snapshot = self.get("/snapshot").body;
        panes(&snapshot)
            .into_iter()
            .find(|p| p["id"] == pane)
            .unwrap_or_else(|| panic!("no pane {pane} in {snapshot}"))
    }

    /// Sends a text for the turn the snapshot shows, with a fresh request id.
    pub(crate) fn send(&mut self, pane: &str, text: &str) -> Reply {
        let turn = self.pane(pane)["turn"].clone();
        let id = self.request_id();
        self.post(
            &format!("/pane/{pane}/send"),
            &json!({"request_id": id, "text": text, "turn": turn}),
        )
    }

    /// Answers an ask with a fresh request id.
    pub(crate) fn answer(&mut self, pane: &str, ask: &Value, option: &str) -> Reply {
        let id = self.request_id();
        self.post(
            &format!("/pane/{pane}/answer"),
            &json!({"request_id": id, "ask": ask["id"], "revision": ask["revision"], "answer": {"option": option}}),
        )
    }
}

/// Every pane of a snapshot.
pub(crate) fn panes(snapshot: &Value) -> Vec<Value> {
    snapshot["workspaces"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|w| w["tabs"].as_array().unwrap().clone())
        .flat_map(|t| t["panes"].as_array().unwrap().clone())
        .collect()
}
