//! The page's server (krad-web, docs/ui.md) at the HTTP level: `krad ui`'s
//! one-time login URL, the session cookie, and everything refused — a wrong
//! Host, a wrong Origin, a missing or forged cookie, a reused login URL, a
//! wrong client token — with no CORS header on any answer.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::Value;

use crate::support::{App, exit_code, stderr, stdout};

/// One HTTP/1.1 exchange on a fresh connection: the status and the whole answer.
pub(crate) fn http(address: &str, request: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, answer)
}

/// `GET path` with these extra header lines.
pub(crate) fn get(address: &str, path: &str, headers: &[&str]) -> (u16, String) {
    let mut request = format!("GET {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|h| h.starts_with("Host:")) {
        request.push_str(&format!("Host: {address}\r\n"));
    }
    for header in headers {
        request.push_str(header);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    http(address, &request)
}

/// The page's `host:port`, from what `krad serve --json` printed.
pub(crate) fn page_address(app: &App) -> String {
    let url = app.serving["Serving"]["ui"].as_str().unwrap();
    url.trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned()
}

/// A fresh one-time login URL from `krad ui --json --no-open`.
pub(crate) fn login_url(app: &App) -> String {
    let out = app.krad(&["ui", "--json", "--no-open"]);
    assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
    let answer: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(answer["Ui"]["opened_with"], Value::Null);
    answer["Ui"]["url"].as_str().unwrap().to_owned()
}

/// Logs in with a fresh URL: the `Cookie:` header line of the session.
pub(crate) fn log_in(app: &App) -> String {
    let address = page_address(app);
    let url = login_url(app);
    let path = url.split_once(&address).unwrap().1;
    let (status, answer) = get(&address, path, &[]);
    assert_eq!(status, 303, "{answer}");
    let cookie = answer
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .unwrap();
    assert!(
        cookie.contains("; HttpOnly; SameSite=Strict; Path=/"),
        "{cookie}"
    );
    format!("Cookie: {}", cookie.split(';').next().unwrap())
}

fn upgrade(origin: &str) -> [String; 5] {
    [
        "Upgrade: websocket".into(),
        "Connection: Upgrade".into(),
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==".into(),
        "Sec-WebSocket-Version: 13".into(),
        format!("Origin: {origin}"),
    ]
}

#[test]
fn a_login_url_works_once_and_gives_a_strict_http_only_cookie() {
    let app = App::start();
    let address = page_address(&app);
    assert!(address.starts_with("127.0.0.1:"), "{address}");
    let written: Value = serde_json::from_slice(&std::fs::read(&app.api_json).unwrap()).unwrap();
    assert_eq!(written["ui"], format!("http://{address}/"));

    let (status, answer) = get(&address, "/", &[]);
    assert_eq!(status, 401, "no cookie: {answer}");
    assert!(answer.contains("krad ui"), "says what to do: {answer}");

    let url = login_url(&app);
    let path = url.split_once(&address).unwrap().1.to_owned();
    let (status, answer) = get(&address, &path, &[]);
    assert_eq!(status, 303, "{answer}");
    let cookie = answer
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .unwrap();
    let session = format!("Cookie: {}", cookie.split(';').next().unwrap());
    let (status, page) = get(&address, "/", &[&session]);
    assert_eq!(status, 200);
    assert!(page.contains("/assets/xterm.js") && page.contains("<title>krad</title>"));
    let (status, xterm) = get(&address, "/assets/xterm.js", &[&session]);
    assert_eq!(status, 200);
    assert!(
        xterm.len() > 100_000 && !xterm.contains("KRAD_MISSING_ASSETS"),
        "xterm.js is embedded (vendored in krad-web/vendor/)"
    );

    let (status, again) = get(&address, &path, &[]);
    assert_eq!(status, 403, "a login URL works once: {again}");
    assert!(again.contains("krad ui"), "{again}");
    let (status, _) = get(&address, "/login?token=", &[]);
    assert_eq!(status, 403);
}

#[test]
fn a_wrong_host_a_forged_cookie_and_a_wrong_origin_are_refused() {
    let app = App::start();
    let address = page_address(&app);
    let session = log_in(&app);
    let port = address.rsplit(':').next().unwrap();

    for host in [
        format!("Host: evil.example:{port}"),
        "Host: 127.0.0.1:1".into(),
        format!("Host: 127.0.0.1.evil.example:{port}"),
    ] {
        let (status, answer) = get(&address, "/", &[&host, &session]);
        assert_eq!(status, 403, "{host}: {answer}");
        assert!(answer.contains("wrong Host"));
    }
    let (status, _) = get(
        &address,
        "/",
        &[&format!("Host: localhost:{port}"), &session],
    );
    assert_eq!(status, 200, "localhost is ours");

    let forged = format!("Cookie: krad_session_{port}={}", "a".repeat(64));
    assert_eq!(get(&address, "/", &[&forged]).0, 401);
    assert_eq!(get(&address, "/assets/app.js", &[]).0, 401);

    let own = format!("http://127.0.0.1:{port}");
    let ws = |origin: &str, cookie: &str| {
        let mut headers: Vec<String> = upgrade(origin).into();
        headers.push(cookie.to_owned());
        let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
        get(&address, "/ws", &headers)
    };
    assert_eq!(ws(&own, &session).0, 101, "our page's own socket");
    assert_eq!(ws("http://evil.example", &session).0, 403);
    assert_eq!(
        ws(&format!("http://127.0.0.1:{port}.evil.example"), &session).0,
        403
    );
    assert_eq!(ws("null", &session).0, 403);
    assert_eq!(ws(&own, &forged).0, 401, "a forged cookie opens no socket");
    assert_eq!(ws(&own, "X-No-Cookie: 1").0, 401);
    let mut no_origin: Vec<String> = upgrade(&own)[..4].to_vec();
    no_origin.push(session.clone());
    let no_origin: Vec<&str> = no_origin.iter().map(String::as_str).collect();
    assert_eq!(
        get(&address, "/ws", &no_origin).0,
        403,
        "no Origin, no socket"
    );
}

#[test]
fn only_the_client_token_gets_a_login_link_and_no_answer_has_cors_headers() {
    let app = App::start();
    let address = page_address(&app);
    let post = |headers: &str| {
        http(
            &address,
            &format!(
                "POST /api/login-link HTTP/1.1\r\nHost: {address}\r\n{headers}Content-Length: 0\r\nConnection: close\r\n\r\n"
            ),
        )
    };
    let (status, _) = post(&format!("Authorization: Bearer {}\r\n", "0".repeat(64)));
    assert_eq!(status, 401, "a wrong token");
    assert_eq!(post("").0, 401, "no token");
    let good = format!("Authorization: Bearer {}\r\n", app.token());
    let (status, cross) = post(&format!("{good}Origin: http://evil.example\r\n"));
    assert_eq!(
        status, 403,
        "a cross-site POST, even with the token: {cross}"
    );
    let (status, answer) = post(&good);
    assert_eq!(status, 200, "{answer}");
    assert!(answer.contains(&format!("http://{address}/login?token=")));
    let (status, _) = http(
        &address,
        &format!(
            "DELETE / HTTP/1.1\r\nHost: {address}\r\nOrigin: http://evil.example\r\nConnection: close\r\n\r\n"
        ),
    );
    assert_eq!(status, 403, "a state-changing method from another origin");

    let session = log_in(&app);
    for (status, answer) in [
        get(&address, "/", &[&session, "Origin: http://evil.example"]),
        get(&address, "/", &[]),
        post(&good),
        get(&address, "/nothing", &[&session]),
    ] {
        assert!(status > 0);
        let lower = answer.to_ascii_lowercase();
        assert!(!lower.contains("access-control-"), "no CORS: {answer}");
        assert!(lower.contains("x-frame-options: deny"), "{answer}");
    }
}

#[test]
fn the_page_can_be_turned_off_and_krad_ui_says_so() {
    let app = App::start_config("[ui]\nenabled = false\n");
    assert_eq!(app.serving["Serving"]["ui"], Value::Null);
    let out = app.krad(&["ui", "--no-open"]);
    assert_eq!(exit_code(&out), 1);
    assert!(stderr(&out).contains("enabled = false"), "{}", stderr(&out));
}

/// The vendored xterm.js (issue 46): `scripts/web-assets` passes the files
/// as committed and refuses one that is not the pinned build, with the fix.
#[test]
fn web_assets_checks_the_vendored_xterm_against_its_pins() {
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let tree = tempfile::tempdir().unwrap();
    let copy = |from: &str| {
        let to = tree.path().join(from);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(here.join(from), &to).unwrap();
    };
    copy("scripts/web-assets");
    copy("krad-web/web/package.json");
    for file in std::fs::read_dir(here.join("krad-web/vendor")).unwrap() {
        let name = file.unwrap().file_name();
        copy(&format!("krad-web/vendor/{}", name.to_str().unwrap()));
    }
    let check = || {
        std::process::Command::new(tree.path().join("scripts/web-assets"))
            .env("PATH", "/usr/bin:/bin")
            .output()
            .unwrap()
    };
    let out = check();
    assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
    let xterm = tree.path().join("krad-web/vendor/xterm.js");
    let mut bytes = std::fs::read(&xterm).unwrap();
    bytes.extend_from_slice(b"\n/* changed */\n");
    std::fs::write(&xterm, bytes).unwrap();
    let out = check();
    assert_eq!(exit_code(&out), 1, "{}", stderr(&out));
    let said = stderr(&out);
    assert!(
        said.contains("vendor/xterm.js is not the pinned @xterm/xterm")
            && said.contains("git checkout -- krad-web/vendor"),
        "{said}"
    );
}
