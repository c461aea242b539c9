//! Crash torture of the page (issue 49, item 2; the page is issue 37's,
//! docs/ui.md): SIGKILLs while review comments are sent and kept through the
//! page's WebSocket. This file owns that test. The page is a client of the
//! bus and the same on both terminal hosts: it runs on the PTY host.
//!
//! A round: a fixed `[ui] port`; a session logged in, a second login URL
//! issued and not used; an agent that reports idle after each line it
//! reads; a WebSocket sending reviews of `main` to it one after the other,
//! each comment unique. The app is killed after a seeded random 0–6 s (a review takes about 3 s); the
//! next app starts on the same port. Violations, by kind:
//!
//! * `start` — the app did not start again;
//! * `ws-gone` — the WebSocket open at the kill did not end within 10 s (a
//!   client must see the app go);
//! * `ws-back` — a new login's WebSocket on the same address is not answered
//!   (a client must see the app come back);
//! * `login` — the session, or the unused login URL, of the killed app is
//!   accepted by the next one;
//! * `review` — a review answered `Reviewed` is not kept once (lost, or
//!   kept twice), or one not answered is kept twice.
//!
//! 4 rounds by default (CI); by hand:
//! `KRAD_TORTURE_ROUNDS=200 cargo test -p krad-cli --test suite crash_page:: -- --nocapture`.

use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tungstenite::client::IntoClientRequest;
use tungstenite::{Message, WebSocket};

use crate::support::{App, Launch};
use crate::torture::{self, Tally, eventually, next_random};
use crate::ui::{get, log_in, login_url, page_address};

const KINDS: &[&str] = &["start", "ws-gone", "ws-back", "login", "review"];

/// Reviews a round sends at most.
const REVIEWS: usize = 4;

/// The page's WebSocket with a session `cookie` (a `Cookie:` line).
pub(crate) fn socket(address: &str, cookie: &str) -> Option<WebSocket<TcpStream>> {
    let mut request = format!("ws://{address}/ws").into_client_request().ok()?;
    let value = cookie.strip_prefix("Cookie: ")?;
    request.headers_mut().insert("Cookie", value.parse().ok()?);
    let origin = format!("http://{address}");
    request.headers_mut().insert("Origin", origin.parse().ok()?);
    let stream = TcpStream::connect(address).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .ok()?;
    tungstenite::client(request, stream).ok().map(|(ws, _)| ws)
}

/// Sends `message` and reads until the answer of its id (None: the socket
/// ended).
fn call(ws: &mut WebSocket<TcpStream>, message: Value) -> Option<Value> {
    let id = message["id"].clone();
    ws.send(Message::text(message.to_string())).ok()?;
    loop {
        let Message::Text(text) = ws.read().ok()? else {
            continue;
        };
        let answer: Value = serde_json::from_str(text.as_str()).ok()?;
        if answer["id"] == id {
            return Some(answer);
        }
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[test]
fn page_crash_torture() {
    let _alone = crate::support::loading_the_machine();
    let what = "page, pty host";
    let (rounds, seed) = torture::rounds_and_seed(what, 4);
    let mut random = seed;
    let mut tally = Tally::new(what, KINDS);
    let config = format!("[ui]\nport = {}\n", free_port());
    let mut app = App::launch(Launch {
        config: Some(&config),
        ..Launch::default()
    });
    let address = page_address(&app);
    for r in 1..=rounds {
        // A review takes about 3 s (Send waits for the agent to be idle).
        let delay = next_random(&mut random) % 6001;
        let cookie = log_in(&app);
        let unused = login_url(&app);
        let target = app.spawn_sh(
            "stty -echo; krad report idle -m ready; \
             while read line; do krad report idle -m heard; done",
        );
        app.until(target, Duration::from_secs(30), |a| a["message"] == "ready");
        let Some(mut ws) = socket(&address, &cookie) else {
            tally.violation("ws-back", r, "no WebSocket before the kill".into());
            break;
        };
        let texts: Vec<String> = (1..=REVIEWS).map(|n| format!("r{r}-c{n}")).collect();
        let sent = texts.clone();
        let storm = std::thread::spawn(move || {
            // Each text: None (unsent), Some(false) (no answer), Some(true)
            // (answered Reviewed).
            let mut outcomes: Vec<Option<bool>> = vec![None; sent.len()];
            for (n, text) in sent.iter().enumerate() {
                let review = json!({"id": n + 1, "review": {"environment": "main",
                    "target": target, "head": "",
                    "comments": [{"path": "README", "line": 1, "text": text}]}});
                outcomes[n] = Some(false);
                match call(&mut ws, review) {
                    Some(answer) if answer["answer"]["Reviewed"].is_object() => {
                        outcomes[n] = Some(true);
                    }
                    Some(answer) => panic!("{answer}"),
                    None => break,
                }
            }
            // The app goes: the socket must end.
            let since = Instant::now();
            let _ = ws.get_mut().set_read_timeout(Some(Duration::from_secs(10)));
            let ended = loop {
                match ws.read() {
                    Err(tungstenite::Error::Io(e))
                        if e.kind() == std::io::ErrorKind::WouldBlock
                            || e.kind() == std::io::ErrorKind::TimedOut =>
                    {
                        break false;
                    }
                    Err(_) | Ok(Message::Close(_)) => break true,
                    Ok(_) => {}
                }
            };
            (outcomes, ended, since.elapsed())
        });
        std::thread::sleep(Duration::from_millis(delay));
        torture::kill(&mut app);
        tally.killed(None);
        let (outcomes, ended, took) = storm.join().unwrap();
        tally.expect(
            "ws-gone",
            r,
            ended,
            format!("the WebSocket did not end ({took:?})"),
        );
        let acknowledged = outcomes.iter().filter(|o| **o == Some(true)).count();
        println!("round {r}: killed after {delay} ms; {acknowledged} reviews acknowledged");
        app = match torture::relaunch(app, &config, None) {
            Ok(app) => app,
            Err(why) => {
                tally.violation("start", r, format!("no start after the kill: {why}"));
                break;
            }
        };
        // No login of the dead app is taken.
        let (status, _) = get(&address, "/", &[&cookie]);
        tally.expect("login", r, status == 401, format!("its session: {status}"));
        let path = unused.split_once(&address).map(|(_, p)| p.to_owned());
        let (status, _) = get(&address, &path.unwrap_or_default(), &[]);
        tally.expect(
            "login",
            r,
            status != 303,
            format!("its login URL: {status}"),
        );
        tally.expect(
            "login",
            r,
            socket(&address, &cookie).is_none(),
            "its session opened a WebSocket".into(),
        );
        // A client comes back: a new login, a WebSocket, answered.
        let cookie = log_in(&app);
        let mut kept = Value::Null;
        let back = eventually(Duration::from_secs(10), || {
            let Some(mut ws) = socket(&address, &cookie) else {
                return false;
            };
            kept = call(&mut ws, json!({"id": 1, "reviews": "main"})).unwrap_or_default();
            kept["answer"]["Reviews"].is_array()
        });
        tally.expect("ws-back", r, back, format!("no answer: {kept}"));
        let kept = kept.to_string();
        for (text, outcome) in texts.iter().zip(&outcomes) {
            let times = kept.matches(&format!("\"{text}\"")).count();
            let ok = match outcome {
                Some(true) => times == 1,
                _ => times <= 1,
            };
            tally.expect(
                "review",
                r,
                ok,
                format!("{text} ({outcome:?}) kept {times} times"),
            );
        }
        let _ = app.request(json!({"Close": {"target": target}}));
    }
    tally.finish(seed);
}
