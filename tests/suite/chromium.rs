//! A real headless Chromium driven over the DevTools protocol, for the page's
//! tests: started with a fresh profile and `--remote-debugging-port=0`, its
//! port read from `DevToolsActivePort`, its first page driven through that
//! page's WebSocket (tungstenite). Every wait has a deadline.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

/// A Chromium and the page it shows.
pub(crate) struct Chromium {
    child: Child,
    _profile: tempfile::TempDir,
    socket: WebSocket<MaybeTlsStream<TcpStream>>,
    next: u64,
}

impl Drop for Chromium {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn program() -> &'static str {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("Chromium is not installed: scripts/test installs Debian's `chromium`")
}

impl Chromium {
    /// Starts a headless Chromium with a fresh profile, 1280×800.
    pub(crate) fn start() -> Chromium {
        let profile = tempfile::tempdir().unwrap();
        let child = Command::new(program())
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-dev-shm-usage",
                "--window-size=1280,800",
                "--remote-debugging-port=0",
                "--remote-allow-origins=*",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let active = profile.path().join("DevToolsActivePort");
        let until = Instant::now() + Duration::from_secs(60);
        let port = loop {
            if let Some(port) = std::fs::read_to_string(&active)
                .ok()
                .and_then(|t| t.lines().next().and_then(|l| l.trim().parse::<u16>().ok()))
            {
                break port;
            }
            assert!(Instant::now() < until, "Chromium did not start within 60 s");
            std::thread::sleep(Duration::from_millis(50));
        };
        let page = loop {
            let list = http_get(port, "/json/list");
            let pages: Vec<Value> = serde_json::from_str(&list).unwrap_or_default();
            if let Some(url) = pages
                .iter()
                .find(|p| p["type"] == "page")
                .and_then(|p| p["webSocketDebuggerUrl"].as_str())
            {
                break url.to_owned();
            }
            assert!(Instant::now() < until, "Chromium shows no page: {list}");
            std::thread::sleep(Duration::from_millis(50));
        };
        let (socket, _) = tungstenite::connect(page.as_str()).unwrap();
        let mut chromium = Chromium {
            child,
            _profile: profile,
            socket,
            next: 1,
        };
        chromium.call("Page.enable", json!({}));
        chromium.call("Runtime.enable", json!({}));
        chromium.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": false}),
        );
        chromium
    }

    /// One DevTools call: its result (events in between are skipped).
    pub(crate) fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        let message = json!({"id": id, "method": method, "params": params});
        self.socket
            .send(Message::text(message.to_string()))
            .unwrap();
        loop {
            let Message::Text(text) = self.socket.read().unwrap() else {
                continue;
            };
            let answer: Value = serde_json::from_str(&text).unwrap();
            if answer["id"] == id {
                assert!(answer["error"].is_null(), "{method}: {answer}");
                return answer["result"].clone();
            }
        }
    }

    /// Opens `url` in the page.
    pub(crate) fn navigate(&mut self, url: &str) {
        self.call("Page.navigate", json!({"url": url}));
    }

    /// Evaluates a JavaScript expression in the page (promises awaited).
    pub(crate) fn eval(&mut self, expression: &str) -> Value {
        let result = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "awaitPromise": true, "returnByValue": true}),
        );
        assert!(
            result["exceptionDetails"].is_null(),
            "{expression}: {}",
            result["exceptionDetails"]
        );
        result["result"]["value"].clone()
    }

    /// Waits until `expression` is truthy in the page; its value.
    pub(crate) fn until(&mut self, expression: &str, limit: Duration) -> Value {
        let until = Instant::now() + limit;
        loop {
            let value = self.eval(&format!(
                "(() => {{ try {{ return {expression}; }} catch (e) {{ return null; }} }})()"
            ));
            if !(value.is_null() || value == false || value == "" || value == 0) {
                return value;
            }
            assert!(
                Instant::now() < until,
                "not true in the page within {limit:?}: {expression}\nthe page says: {}",
                self.eval("document.body ? document.body.innerText.slice(0, 3000) : ''")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Clicks the element `selector` finds (it must exist).
    pub(crate) fn click(&mut self, selector: &str) {
        let found = self.eval(&format!(
            "(() => {{ const e = document.querySelector({s}); if (!e) return false; e.scrollIntoView(); e.click(); return true; }})()",
            s = json!(selector)
        ));
        assert_eq!(found, true, "nothing to click at {selector}");
    }

    /// Types text as keystrokes into the focused element.
    pub(crate) fn type_text(&mut self, text: &str) {
        self.call("Input.insertText", json!({"text": text}));
    }

    /// Presses Enter in the focused element.
    pub(crate) fn press_enter(&mut self) {
        for (kind, text) in [("keyDown", "\r"), ("keyUp", "")] {
            self.call(
                "Input.dispatchKeyEvent",
                json!({"type": kind, "key": "Enter", "code": "Enter",
                       "windowsVirtualKeyCode": 13, "text": text}),
            );
        }
    }

    /// Writes a screenshot of the view at `selector` (scrolled to the top)
    /// into `$KRAD_UI_SCREENSHOTS/<name>.png`, when that variable is set.
    pub(crate) fn screenshot(&mut self, selector: &str, name: &str) {
        let Some(dir) = std::env::var_os("KRAD_UI_SCREENSHOTS") else {
            return;
        };
        // The clip is in the document's coordinates: from where it scrolled to.
        let top = self.eval(&format!(
            "(() => {{ const e = document.querySelector({s}); e && e.scrollIntoView(); window.scrollBy(0, -60); return window.scrollY; }})()",
            s = json!(selector)
        ));
        let shot = self.call(
            "Page.captureScreenshot",
            json!({"format": "png", "clip": {"x": 0, "y": top.as_f64().unwrap_or(0.0), "width": 1280, "height": 720, "scale": 0.75}}),
        );
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap())
            .unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(Path::new(&dir).join(format!("{name}.png")), png).unwrap();
    }
}

fn http_get(port: u16, path: &str) -> String {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    );
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default()
}
