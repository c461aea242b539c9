//! The durable facet's asks (`durable-facet-v1.md`): every way an ask ends as a
//! phone sees it, who may answer, and `allow-always` by transport.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::collie::{Collie, over_tls, panes};
use crate::durable::{ASK_SCRIPT, assert_decided, pane_with_ask, start, start_with};
use crate::support::each;

#[test]
fn every_ask_outcome() {
    let (app, socket) = start();
    let mut collie = Collie::connect(&socket);

    // Taken: the phone answers; the agent gets the phone's decision.
    let (id, pane, ask) = pane_with_ask(&app, &mut collie, ASK_SCRIPT);
    assert_eq!(ask["title"], "Bash: make deploy");
    assert_eq!(ask["revision"], 1);
    assert_eq!(collie.pane(&pane)["state"], "waiting");
    let view = collie.events(&pane);
    assert!(
        view["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["type"] == "ask" && e["ask"]["id"] == ask["id"]),
        "{view}"
    );
    let taken = collie.answer(&pane, &ask, "allow");
    assert_eq!(
        (taken.status, taken.body["result"].as_str()),
        (200, Some("taken")),
        "{}",
        taken.text
    );
    app.until_screen(id, "\"by\":\"phone\"");
    // A late tap after the decision: 409 decided, with the first outcome.
    assert_decided(&collie.answer(&pane, &ask, "deny"), "phone", Some("allow"));
    let events = collie.events_until(&pane, |e| e["type"] == "ask-closed");
    let closed = events.iter().find(|e| e["type"] == "ask-closed").unwrap();
    assert_eq!(closed["decidedBy"], "phone");

    // Stale: the agent changed the ask in place (the same tool call, new words).
    let (_, pane2, ask2) = pane_with_ask(
        &app,
        &mut collie,
        r#"krad raw '{"Ask":{"kind":"choice","title":"Which db?","options":[{"id":"pg","label":"Postgres"}],"tool_call_id":"q"}}' & sleep 0.5; krad raw '{"Ask":{"kind":"choice","title":"Which database?","options":[{"id":"pg","label":"Postgres"},{"id":"lite","label":"SQLite"}],"tool_call_id":"q"}}'; sleep 60"#,
    );
    collie.events(&pane2);
    let until = Instant::now() + Duration::from_secs(20);
    while collie.asks(&pane2)[0]["revision"] != 2 {
        assert!(Instant::now() < until, "the ask never changed");
        std::thread::sleep(Duration::from_millis(25));
    }
    let stale = collie.answer(&pane2, &ask2, "pg");
    assert_eq!(
        (stale.status, stale.code()),
        (409, "stale"),
        "{}",
        stale.text
    );
    assert_eq!(stale.body["ask"]["title"], "Which database?");
    let fresh = collie.asks(&pane2).remove(0);
    assert_eq!(
        collie.answer(&pane2, &fresh, "lite").body["result"],
        "taken"
    );
    let changed = collie.events_until(&pane2, |e| e["type"] == "ask-closed");
    assert!(
        changed
            .iter()
            .any(|e| e["type"] == "ask-changed" && e["ask"]["revision"] == 2),
        "{changed:?}"
    );

    // Decided by the program: the agent went on without an answer (its Ask
    // was interrupted), so a tap gets 409 decided by program.
    let (id3, pane3, ask3) = pane_with_ask(
        &app,
        &mut collie,
        r#"timeout 2 krad raw '{"Ask":{"kind":"permission","tool":{"name":"Bash","input":{"command":"ls"}},"tool_call_id":"c3"}}'; sleep 60"#,
    );
    collie.events(&pane3);
    let seen = collie.events_until(&pane3, |e| {
        e["item"]["text"]
            .as_str()
            .is_some_and(|t| t == "Decided in the durable agent: Bash: ls")
    });
    assert!(
        seen.iter()
            .any(|e| e["type"] == "ask-closed" && e["decidedBy"] == "program"),
        "{seen:?}"
    );
    assert_decided(&collie.answer(&pane3, &ask3, "allow"), "program", None);
    let _ = id3;

    // Timed out at expiresAt.
    let (_, pane4, ask4) = pane_with_ask(
        &app,
        &mut collie,
        r#"krad raw '{"Ask":{"kind":"permission","tool":{"name":"Bash","input":{"command":"ls -l"}},"tool_call_id":"c4","expires_in_secs":2}}'; sleep 60"#,
    );
    assert!(ask4["expiresAt"].as_str().unwrap().ends_with('Z'), "{ask4}");
    collie.events(&pane4);
    let seen = collie.events_until(&pane4, |e| {
        e["item"]["text"] == "Timed out before an answer: Bash: ls -l"
    });
    assert!(
        seen.iter()
            .any(|e| e["type"] == "ask-closed" && e["decidedBy"] == "timeout"),
        "{seen:?}"
    );
    assert_decided(&collie.answer(&pane4, &ask4, "allow"), "timeout", None);
    assert!(collie.asks(&pane4).is_empty(), "no longer open");

    // An ask the app does not know: 200 too-late.
    let unknown = collie.answer(
        &pane4,
        &json!({"id": "a-0000000000000000", "revision": 1}),
        "allow",
    );
    assert_eq!(
        (unknown.status, unknown.body["result"].as_str()),
        (200, Some("too-late")),
        "{}",
        unknown.text
    );
}

#[test]
fn an_agent_cannot_answer_its_own_ask_over_the_socket() {
    own_ask_refused("");
}

#[test]
fn an_agent_under_tmux_cannot_answer_its_own_ask_either() {
    // tmux runs the agents under its own server: not the app's descendants.
    own_ask_refused(crate::tmux::TMUX);
}

fn own_ask_refused(config: &str) {
    let (app, socket) = start_with(config, &[], None);
    let mut collie = Collie::connect(&socket);
    let out = app.dir.path().join("refused.txt");
    let script = format!(
        r#"krad raw '{{"Ask":{{"kind":"permission","tool":{{"name":"Bash","input":{{"command":"rm -rf /"}}}},"tool_call_id":"own"}}}}' & sleep 1; body='{{"request_id":"mine","ask":"x","answer":{{"option":"allow"}}}}'; printf 'POST /session/v1/pane/p1/answer HTTP/1.1\r\nHost: d\r\nX-Collie-Session: 1\r\nConnection: close\r\nContent-Length: %s\r\n\r\n%s' "${{#body}}" "$body" | nc -U -q 5 {} > {}; sleep 60"#,
        socket.display(),
        out.display()
    );
    let file = app.dir.path().join("own-ask.sh");
    std::fs::write(&file, script).unwrap();
    let (_, pane, _) = pane_with_ask(&app, &mut collie, &format!("sh {}", file.display()));
    let until = Instant::now() + Duration::from_secs(20);
    let answer = loop {
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        if text.contains("\r\n\r\n") {
            break text;
        }
        assert!(Instant::now() < until, "nc got no answer: {text:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(answer.contains("\"code\":\"caller-refused\""), "{answer}");
    assert_eq!(collie.asks(&pane).len(), 1, "the ask is still open");
    if !config.is_empty() {
        let id: u64 = pane[1..].parse().unwrap();
        drop(crate::tmux::TmuxServer::of(&app, id));
    }
}

#[test]
fn tls_takes_the_token_first_and_never_offers_allow_always() {
    let (app, _socket) = start_with("[durable.tls]\nlisten = \"127.0.0.1:0\"\n", &[], None);
    let tls = &app.serving["Serving"]["durable"]["tls"];
    let address = tls["address"].as_str().unwrap().parse().unwrap();
    let cert = PathBuf::from(tls["cert"].as_str().unwrap());
    let token_file = PathBuf::from(tls["token_file"].as_str().unwrap());
    let token = std::fs::read_to_string(&token_file)
        .unwrap()
        .trim()
        .to_owned();
    assert!(token.len() >= 32);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&token_file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(!app.log().contains(&token), "the token is never logged");
    let fingerprint = tls["fingerprint"].as_str().unwrap();
    assert_eq!(fingerprint.len(), 32 * 3 - 1, "{fingerprint}");
    for auth in [
        None,
        Some("Bearer wrong-token-wrong-token-wrong-token".to_owned()),
        Some(token.clone()),
    ] {
        let mut headers = vec![];
        if let Some(auth) = &auth {
            headers.push((
                "Authorization",
                if auth == &token {
                    format!("Bearer {auth}")
                } else {
                    auth.clone()
                },
            ));
        }
        // Unknown paths and bad versions are checked only after the token.
        for path in ["/session/v1/hello", "/session/v1/nope"] {
            let reply = over_tls(address, &cert, "GET", path, &headers, None);
            if auth.as_deref() == Some(token.as_str()) {
                assert_ne!(reply.status, 401, "{path}: {}", reply.text);
            } else {
                assert_eq!(reply.status, 401, "{path}");
                assert_eq!(reply.text, r#"{"code":"unauthorized"}"#, "a bare 401");
            }
        }
    }
    let bearer = vec![
        ("Authorization", format!("Bearer {token}")),
        ("X-Collie-Session", "1".to_owned()),
    ];
    let hello = over_tls(address, &cert, "GET", "/session/v1/hello", &bearer, None);
    assert_eq!(hello.body["caps"]["allowAlways"], false);
    // A permission ask shows no allow-always over TLS, and it cannot be chosen.
    let id = app.spawn_sh(ASK_SCRIPT);
    let pane = format!("p{id}");
    let until = Instant::now() + Duration::from_secs(60);
    let ask = loop {
        let snapshot = over_tls(address, &cert, "GET", "/session/v1/snapshot", &bearer, None).body;
        if let Some(ask) = panes(&snapshot)
            .iter()
            .find(|p| p["id"] == pane)
            .and_then(|p| p["asks"].get(0).cloned())
        {
            break ask;
        }
        assert!(Instant::now() < until, "no ask");
        std::thread::sleep(Duration::from_millis(50));
    };
    let options = each(&ask["options"], "id");
    assert_eq!(options, ["allow", "deny"]);
    let answer = |request_id: &str, option: &str| {
        let body =
            json!({"request_id": request_id, "ask": ask["id"], "answer": {"option": option}});
        let path = format!("/session/v1/pane/{pane}/answer");
        over_tls(
            address,
            &cert,
            "POST",
            &path,
            &bearer,
            Some(body.to_string().as_bytes()),
        )
    };
    let refused = answer("t1", "allow-always");
    assert_eq!(refused.status, 400, "{}", refused.text);
    let taken = answer("t2", "allow");
    assert_eq!(taken.body["result"], "taken", "{}", taken.text);
    // No redirects, ever: an unknown path is a 404.
    let nope = over_tls(address, &cert, "GET", "/", &bearer, None);
    assert_eq!(nope.status, 404);
}

/// With the socket and TLS on at once, each request is judged by its own
/// transport: the socket may see and choose `allow-always`, TLS may not, and a
/// request id never carries an answer from one transport to the other.
#[test]
fn allow_always_is_decided_per_request_by_its_transport_with_both_on() {
    let (app, socket) = start_with("[durable.tls]\nlisten = \"127.0.0.1:0\"\n", &[], None);
    let tls = &app.serving["Serving"]["durable"]["tls"];
    let address = tls["address"].as_str().unwrap().parse().unwrap();
    let cert = PathBuf::from(tls["cert"].as_str().unwrap());
    let token = std::fs::read_to_string(tls["token_file"].as_str().unwrap())
        .unwrap()
        .trim()
        .to_owned();
    let bearer = vec![
        ("Authorization", format!("Bearer {token}")),
        ("X-Collie-Session", "1".to_owned()),
    ];
    let over_tls_post = |path: &str, body: &Value| {
        over_tls(
            address,
            &cert,
            "POST",
            &format!("/session/v1{path}"),
            &bearer,
            Some(body.to_string().as_bytes()),
        )
    };
    let mut collie = Collie::connect(&socket);
    // Interleaved: socket, TLS, socket — each hello says its own.
    assert_eq!(collie.hello["caps"]["allowAlways"], true);
    let hello = over_tls(address, &cert, "GET", "/session/v1/hello", &bearer, None);
    assert_eq!(hello.body["caps"]["allowAlways"], false, "{}", hello.text);
    assert!(!collie.rehello(), "the same epoch");
    assert_eq!(collie.hello["caps"]["allowAlways"], true);

    let options = |ask: &Value| -> Vec<String> {
        ask["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let tls_ask = |pane: &str| -> Value {
        let snapshot = over_tls(address, &cert, "GET", "/session/v1/snapshot", &bearer, None);
        panes(&snapshot.body)
            .iter()
            .find(|p| p["id"] == pane)
            .and_then(|p| p["asks"].get(0).cloned())
            .unwrap_or_else(|| panic!("no ask over TLS: {}", snapshot.text))
    };
    let (_, pane_a, ask_a) = pane_with_ask(&app, &mut collie, ASK_SCRIPT);
    let (_, pane_b, ask_b) = pane_with_ask(&app, &mut collie, ASK_SCRIPT);
    // The same ask, seen at once over both.
    assert_eq!(options(&ask_a), ["allow", "allow-always", "deny"]);
    assert_eq!(options(&tls_ask(&pane_a)), ["allow", "deny"]);
    assert_eq!(
        options(&collie.asks(&pane_a)[0]),
        ["allow", "allow-always", "deny"]
    );
    let tls_events = over_tls(
        address,
        &cert,
        "GET",
        &format!("/session/v1/pane/{pane_a}/events"),
        &bearer,
        None,
    );
    assert!(
        !tls_events.text.contains("allow-always"),
        "TLS events never offer allow-always: {}",
        tls_events.text
    );

    // A: TLS may not choose it; the socket may, even with the request id and
    // body TLS used (TLS's refusal is not replayed to the socket).
    let body_a =
        json!({"request_id": "same-a", "ask": ask_a["id"], "answer": {"option": "allow-always"}});
    let path_a = format!("/pane/{pane_a}/answer");
    let refused = over_tls_post(&path_a, &body_a);
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert!(refused.text.contains("allow-always"), "{}", refused.text);
    let taken = collie.post(&path_a, &body_a);
    assert_eq!(taken.status, 200, "{}", taken.text);
    assert_eq!(taken.body["result"], "taken", "{}", taken.text);
    assert_eq!(taken.body.get("replayed"), None, "{}", taken.text);
    assert_eq!(taken.body["outcome"]["option"], "allow-always");

    // B: the socket chooses it first; TLS sending the very same request id and
    // body is not handed the socket's answer as a replay of its own.
    let body_b =
        json!({"request_id": "same-b", "ask": ask_b["id"], "answer": {"option": "allow-always"}});
    let path_b = format!("/pane/{pane_b}/answer");
    let taken = collie.post(&path_b, &body_b);
    assert_eq!(taken.body["result"], "taken", "{}", taken.text);
    let tls_try = over_tls_post(&path_b, &body_b);
    assert_ne!(tls_try.body["result"], "taken", "{}", tls_try.text);
    assert_eq!(tls_try.body.get("replayed"), None, "{}", tls_try.text);
    assert_eq!(tls_try.status, 409, "decided already: {}", tls_try.text);
}
