//! The durable facet (`durable-facet-v1.md`): a Collie-like client on the real
//! socket and over real TLS — hello and versions, ready, snapshots with ETags,
//! events with cursors across a restart, every ask outcome, request ids,
//! steering, history, limits, and who may call.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::collie::{Collie, Reply, over_socket, panes};
use crate::support::{App, Launch};
/// Starts an app with the facet on a socket in its own folder.
pub(crate) fn start_with(
    extra_config: &str,
    args: &[&str],
    reuse: Option<tempfile::TempDir>,
) -> (App, PathBuf) {
    let dir = reuse.unwrap_or_else(|| tempfile::tempdir().unwrap());
    let socket = dir.path().join("collie").join("durable.sock");
    let config = format!(
        "[durable]\nname = \"test box\"\nsocket = \"{}\"\n{extra_config}",
        socket.display()
    );
    let app = App::launch(Launch {
        args,
        config: Some(&config),
        reuse: Some(dir),
        ..Launch::default()
    });
    (app, socket)
}

pub(crate) fn start() -> (App, PathBuf) {
    start_with("", &[], None)
}

pub(crate) const ASK_SCRIPT: &str = r#"krad raw '{"Ask":{"kind":"permission","tool":{"name":"Bash","input":{"command":"make deploy"}},"tool_call_id":"call-1"}}'; sleep 60"#;

/// Spawns a shell raising a permission ask; returns its pane and the ask.
pub(crate) fn pane_with_ask(app: &App, collie: &mut Collie, script: &str) -> (u64, String, Value) {
    let id = app.spawn_sh(script);
    let pane = format!("p{id}");
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(ask) = collie.asks(&pane).into_iter().next() {
            return (id, pane, ask);
        }
        assert!(Instant::now() < until, "no ask in the snapshot");
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// A tap that came after the decision: 409 decided, who decided, what.
pub(crate) fn assert_decided(reply: &Reply, by: &str, option: Option<&str>) {
    assert_eq!(
        (reply.status, reply.code()),
        (409, "decided"),
        "{}",
        reply.text
    );
    assert_eq!(reply.body["decidedBy"], by, "{}", reply.text);
    if let Some(option) = option {
        assert_eq!(reply.body["outcome"]["option"], option, "{}", reply.text);
    }
}

#[test]
fn hello_versions_routes_and_bodies() {
    let (app, socket) = start();
    assert_eq!(app.serving["Serving"]["durable"]["socket"], json!(socket));
    // Collie's first hello carries no version header.
    let collie = Collie::connect(&socket);
    let hello = &collie.hello;
    assert_eq!(hello["protocol"], json!({"min": 1, "max": 1}));
    assert_eq!(hello["host"]["name"], "test box");
    assert_eq!(hello["ready"], true);
    assert_eq!(collie.epoch.len(), 32, "128 bits in hex");
    assert_eq!(hello["caps"]["allowAlways"], true, "on the socket");
    // Every other call carries it.
    let bare = over_socket(&socket, "GET", "/session/v1/snapshot", &[], None);
    assert_eq!(
        (bare.status, bare.code()),
        (400, "bad-request"),
        "{}",
        bare.text
    );
    // The telling hello: a version the app does not speak.
    let told = over_socket(
        &socket,
        "GET",
        "/session/v1/hello",
        &[("X-Collie-Session", "2".into())],
        None,
    );
    assert_eq!(
        (told.status, told.code()),
        (409, "incompatible"),
        "{}",
        told.text
    );
    assert_eq!(told.body["refusal"]["agent"], json!({"min": 1, "max": 1}));
    assert_eq!(told.body["refusal"]["collie"], json!({"min": 2, "max": 2}));
    assert_eq!(
        told.body["refusal"]["sentence"],
        "The durable agent speaks wire v1, this Collie speaks v2. Update Collie, or the agent's SDK."
    );
    over_socket(
        &socket,
        "GET",
        "/session/v1/hello",
        &[("X-Collie-Session", "2".into())],
        None,
    );
    let logged = app.log().matches("this Collie speaks v2").count();
    assert_eq!(logged, 1, "logged once per epoch: {}", app.log());
    // Other paths, methods and bodies.
    for path in [
        "/session/v1/nope",
        "/session/v2/hello",
        "/",
        "/session/v1/pane/p1/events/x",
    ] {
        let reply = collie.get(path.strip_prefix("/session/v1").unwrap_or(path));
        let reply = if path.starts_with("/session/v1") {
            reply
        } else {
            over_socket(
                &socket,
                "GET",
                path,
                &[("X-Collie-Session", "1".into())],
                None,
            )
        };
        assert_eq!(
            (reply.status, reply.code()),
            (404, "not-found"),
            "{path}: {}",
            reply.text
        );
    }
    assert_eq!(collie.get("/pane/p1/answer").status, 405);
    let big = json!({"request_id": "r1", "text": "x".repeat(70 * 1024)});
    let too_large = collie.post("/pane/p1/send", &big);
    assert_eq!(
        (too_large.status, too_large.code()),
        (413, "too-large"),
        "{}",
        too_large.text
    );
    let no_id = collie.post("/pane/p1/send", &json!({"text": "hi"}));
    assert_eq!((no_id.status, no_id.code()), (400, "bad-request"));
    let bad_id = collie.post("/pane/p1/send", &json!({"request_id": "a b", "text": "hi"}));
    assert_eq!(bad_id.status, 400);
    let not_json = over_socket(
        &socket,
        "POST",
        "/session/v1/rename",
        &[("X-Collie-Session", "1".into())],
        Some(b"[1, 2"),
    );
    assert_eq!(not_json.status, 400);
    // An empty POST body is {}: it names no request id.
    let empty = over_socket(
        &socket,
        "POST",
        "/session/v1/reopen",
        &[("X-Collie-Session", "1".into())],
        Some(b""),
    );
    assert_eq!(
        (empty.status, empty.code()),
        (400, "bad-request"),
        "{}",
        empty.text
    );
    let missing = collie.post("/pane/p99/send", &json!({"request_id": "r2", "text": "hi"}));
    assert_eq!((missing.status, missing.code()), (404, "no-such-pane"));
    // The socket and its folder are private.
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&socket), 0o600);
    assert_eq!(mode(socket.parent().unwrap()), 0o700);
}

#[test]
fn while_the_app_restores_every_route_but_hello_is_starting() {
    let (_app, socket) = start_with("", &["--durable-ready-delay-ms", "1500"], None);
    let collie = Collie::connect(&socket);
    assert_eq!(collie.hello["ready"], false);
    let starting = collie.get("/snapshot");
    assert_eq!(
        (starting.status, starting.code()),
        (503, "starting"),
        "{}",
        starting.text
    );
    let post = collie.post("/close", &json!({"request_id": "r1", "pane": "p1"}));
    assert_eq!(post.status, 503);
    let until = Instant::now() + Duration::from_secs(10);
    while collie.get("/hello").body["ready"] != true {
        assert!(Instant::now() < until, "never ready");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(collie.get("/snapshot").status, 200);
}

#[test]
fn the_snapshot_is_polled_with_etags() {
    let (app, socket) = start();
    let mut collie = Collie::connect(&socket);
    let first = collie.poll_snapshot().expect("the first poll reads it");
    let etag = collie.etag().unwrap().to_owned();
    assert!(etag.starts_with(&format!("\"{}-", collie.epoch)), "{etag}");
    assert_eq!(first["workspaces"][0]["id"], "main");
    assert!(
        first["starters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["id"] == "shell")
    );
    assert!(collie.poll_snapshot().is_none(), "nothing changed: 304");
    // A proxy's weak tag matches too.
    let weak = over_socket(
        &socket,
        "GET",
        "/session/v1/snapshot",
        &[
            ("X-Collie-Session", "1".into()),
            ("If-None-Match", format!("W/{etag}")),
        ],
        None,
    );
    assert_eq!(weak.status, 304);
    assert_eq!(weak.header("etag"), Some(etag.as_str()));
    // A new agent is a new snapshot.
    let id = app.spawn_sh("echo hello; sleep 60");
    let after = collie.poll_snapshot().expect("changed");
    let pane = panes(&after)
        .into_iter()
        .find(|p| p["id"] == format!("p{id}"))
        .unwrap();
    assert_eq!(
        pane["belt"][0],
        json!({"id": "interrupt", "label": "Ctrl-C"})
    );
    assert!(
        matches!(
            pane["state"].as_str(),
            Some("starting" | "working" | "idle")
        ),
        "{pane}"
    );
    assert_eq!(after["workspaces"][0]["tabs"][0]["id"], format!("t{id}"));
}

#[test]
fn request_ids_run_once_and_replay() {
    let (app, socket) = start();
    let mut collie = Collie::connect(&socket);
    let (id, pane, ask) = pane_with_ask(&app, &mut collie, ASK_SCRIPT);
    let request_id = collie.request_id();
    let body = json!({"request_id": request_id, "ask": ask["id"], "revision": 1, "answer": {"option": "deny"}});
    // The connection is lost before the answer is read: the answer lands anyway.
    let lost = collie.post_unread(&format!("/pane/{pane}/answer"), &body);
    app.until_screen(id, "\"option\":\"deny\"");
    drop(lost);
    // "Try again" sends the same request id: the first answer, replayed.
    let retry = collie.post(&format!("/pane/{pane}/answer"), &body);
    assert_eq!(retry.status, 200, "{}", retry.text);
    assert_eq!(retry.body["result"], "taken");
    assert_eq!(retry.body["replayed"], true);
    // The same id with another body is refused.
    let mut other = body.clone();
    other["answer"]["option"] = json!("allow");
    let reused = collie.post(&format!("/pane/{pane}/answer"), &other);
    assert_eq!((reused.status, reused.code()), (409, "request-id-reused"));
    // A replayed error is the same error.
    let late_id = collie.request_id();
    let late = json!({"request_id": late_id, "ask": ask["id"], "answer": {"option": "allow"}});
    assert_eq!(
        collie.post(&format!("/pane/{pane}/answer"), &late).code(),
        "decided"
    );
    let again = collie.post(&format!("/pane/{pane}/answer"), &late);
    assert_eq!(
        (again.status, again.code(), &again.body["replayed"]),
        (409, "decided", &json!(true))
    );
}

#[test]
fn events_carry_cursors_and_reset_across_a_restart() {
    let config = crate::tmux::TMUX;
    let (app, socket) = start_with(config, &[], None);
    let mut collie = Collie::connect(&socket);
    let id = app.spawn_sh("while read -r line; do echo \"got $line\"; done");
    let _server = crate::tmux::TmuxServer::of(&app, id);
    let pane = format!("p{id}");
    let first = collie.events(&pane);
    assert_eq!(first["reset"], true, "a first read is the whole view");
    let send = collie.send(&pane, "one");
    assert_eq!(send.body["result"], "sent", "{}", send.text);
    let seen = collie.events_until(&pane, |e| e["item"]["text"] == "one");
    let read = collie.events(&pane);
    assert_eq!(read["reset"], false, "{read}");
    let cursors: Vec<u64> = seen.iter().filter_map(|e| e["cursor"].as_u64()).collect();
    assert!(cursors.windows(2).all(|w| w[0] < w[1]), "{cursors:?}");
    // Another epoch's cursor gets the whole view.
    let foreign = collie.get(&format!("/pane/{pane}/events?after=1&epoch=0123"));
    assert_eq!(foreign.body["reset"], true);
    // An ask answered before the restart.
    let (asker, ask_pane, ask) = pane_with_ask(&app, &mut collie, ASK_SCRIPT);
    assert_eq!(
        collie.answer(&ask_pane, &ask, "deny").body["result"],
        "taken"
    );
    app.until_screen(asker, "\"option\":\"deny\"");

    // The app is killed and starts again; its terminal lives on in tmux.
    let old_epoch = collie.epoch.clone();
    app.signal(nix::sys::signal::Signal::SIGKILL);
    let dir = app.stop_keep_dir();
    let (app, socket2) = start_with(config, &[], Some(dir));
    assert_eq!(socket, socket2);
    assert!(collie.rehello(), "a new epoch");
    assert_ne!(collie.epoch, old_epoch);
    let snapshot = collie.poll_snapshot().unwrap();
    assert!(
        panes(&snapshot).iter().any(|p| p["id"] == pane),
        "{snapshot}"
    );
    // The old cursor and epoch: the pane's whole view, with what came before.
    let view = collie.events(&pane);
    assert_eq!(view["reset"], true, "{view}");
    assert!(
        view["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["item"]["text"] == "one"),
        "{view}"
    );
    // A late tap on the ask decided before the restart: decided, not too-late.
    assert_decided(
        &collie.answer(&ask_pane, &ask, "allow"),
        "phone",
        Some("deny"),
    );
    // And from there on, cursors again.
    let turn = collie.pane(&pane)["turn"].clone();
    let send = collie.post(
        &format!("/pane/{pane}/send"),
        &json!({"request_id": "r-again", "text": "two", "turn": turn}),
    );
    assert_eq!(send.body["result"], "sent", "{}", send.text);
    collie.events_until(&pane, |e| e["item"]["text"] == "two");
    assert_eq!(collie.events(&pane)["reset"], false);
    drop(app);
}

#[test]
fn limits_cut_long_text_and_drop_control_characters() {
    let (app, socket) = start();
    let mut collie = Collie::connect(&socket);
    let id = app.spawn_sh("cat > /dev/null");
    let pane = format!("p{id}");
    let text = format!("start\u{1b}[31m\u{202e}{}", "é".repeat(20_000));
    let sent = collie.send(&pane, &text);
    assert_eq!(sent.body["result"], "sent", "{}", sent.text);
    let events = collie.events_until(&pane, |e| {
        e["type"] == "item" && e["item"]["kind"] == "user"
    });
    let item = &events.iter().find(|e| e["item"]["kind"] == "user").unwrap()["item"];
    let stored = item["text"].as_str().unwrap();
    assert!(stored.len() <= 32 * 1024, "{}", stored.len());
    assert!(
        stored.starts_with("start[31m"),
        "controls and invisibles removed: {:?}",
        &stored[..20]
    );
    assert!(!stored.contains('\u{202e}'));
    // A title with controls is cleaned; a long one is cut.
    let renamed = collie.post(
        "/rename",
        &json!({"request_id": "l2", "tab": format!("t{id}"), "title": format!("a\u{7}b{}", "x".repeat(1000))}),
    );
    assert_eq!(renamed.status, 200, "{}", renamed.text);
    let snapshot = collie.get("/snapshot").body;
    let title = snapshot["workspaces"][0]["tabs"][0]["title"]
        .as_str()
        .unwrap();
    assert!(title.starts_with("abxxx") && title.len() <= 256, "{title}");
    // An agent's message at the end of its turn is a reply item, cleaned.
    let token = app.terminal_token(id);
    let long = format!("done\u{7}\u{200b}{}", "y".repeat(60 * 1024));
    let reported = app.call_as(
        id,
        &token,
        json!({"Report": {"state": "idle", "message": long}}),
    );
    assert_eq!(reported, json!("Ok"));
    let events = collie.events_until(&pane, |e| e["item"]["kind"] == "reply");
    let reply = events
        .iter()
        .find(|e| e["item"]["kind"] == "reply")
        .unwrap();
    let text = reply["item"]["text"].as_str().unwrap();
    assert!(
        text.starts_with("doneyyy") && text.len() == 4 + 60 * 1024,
        "{}",
        &text[..10]
    );
}

#[test]
fn steering_history_and_reopen() {
    let (app, socket) = start();
    let mut collie = Collie::connect(&socket);
    // A starter makes a new agent and names its pane.
    let started = collie.post(
        "/starter/shell",
        &json!({"request_id": "st1", "prompt": "echo started-here"}),
    );
    assert_eq!(started.status, 200, "{}", started.text);
    let pane = started.body["pane"].as_str().unwrap().to_owned();
    let id: u64 = pane[1..].parse().unwrap();
    assert_eq!(started.body["tab"], format!("t{id}"));
    app.until_screen(id, "started-here");
    assert_eq!(
        collie
            .post("/starter/nope", &json!({"request_id": "st2"}))
            .code(),
        "no-such-starter"
    );
    // Turns: the send names the turn the phone saw; abort of another turn is refused.
    collie.events_until(&pane, |e| e["type"] == "state" && e["state"] == "idle");
    let turn = collie.pane(&pane)["turn"].as_u64().unwrap();
    assert!(turn >= 1);
    let moved = collie.post(
        &format!("/pane/{pane}/abort"),
        &json!({"request_id": "ab1", "turn": turn + 5}),
    );
    assert_eq!(
        (moved.status, moved.code()),
        (409, "turn-moved"),
        "{}",
        moved.text
    );
    let sent = collie.post(
        &format!("/pane/{pane}/send"),
        &json!({"request_id": "se1", "text": "sleep 30", "turn": turn}),
    );
    assert_eq!(sent.body["result"], "sent", "{}", sent.text);
    let working = collie.events_until(&pane, |e| {
        e["type"] == "turn" && e["turn"].as_u64() > Some(turn)
    });
    let now = working.iter().rev().find(|e| e["type"] == "turn").unwrap()["turn"]
        .as_u64()
        .unwrap();
    // A send for an older turn while the agent works waits for the next turn.
    let queued = collie.post(
        &format!("/pane/{pane}/send"),
        &json!({"request_id": "se2", "text": "echo after-the-turn", "turn": turn}),
    );
    assert_eq!(queued.body["result"], "queued", "{}", queued.text);
    // The belt: an unknown button, then Ctrl-C ends the sleep; the queued text is typed.
    assert_eq!(
        collie
            .post(
                &format!("/pane/{pane}/action"),
                &json!({"request_id": "ac1", "action": "nope"})
            )
            .code(),
        "no-such-action"
    );
    let aborted = collie.post(
        &format!("/pane/{pane}/abort"),
        &json!({"request_id": "ab2", "turn": now}),
    );
    assert_eq!(aborted.body["result"], "aborted", "{}", aborted.text);
    // Its output, on a line of its own: typed and submitted.
    app.until_screen(id, "\nafter-the-turn");
    // Rename a workspace; close the pane; the conversation stays in the history.
    assert_eq!(
        collie
            .post(
                "/rename",
                &json!({"request_id": "rn1", "workspace": "main", "title": "Home"})
            )
            .status,
        200
    );
    assert_eq!(
        collie.get("/snapshot").body["workspaces"][0]["title"],
        "Home"
    );
    assert_eq!(
        collie
            .post(
                "/rename",
                &json!({"request_id": "rn2", "workspace": "nope", "title": "x"})
            )
            .code(),
        "no-such-workspace"
    );
    let closed = collie.post("/close", &json!({"request_id": "cl1", "pane": pane}));
    assert_eq!(closed.status, 200, "{}", closed.text);
    assert!(panes(&collie.get("/snapshot").body).is_empty());
    let history = collie.get("/conversations?limit=10").body;
    let conversation = &history["conversations"][0];
    assert_eq!(conversation["id"], format!("c{id}"));
    assert_eq!(conversation["open"], false);
    // Items, oldest first, page by page with an opaque cursor.
    let mut items = Vec::new();
    let mut path = format!("/conversation/c{id}/items?limit=1");
    loop {
        let page = collie.get(&path).body;
        assert!(page["items"].as_array().unwrap().len() <= 1, "{page}");
        items.extend(page["items"].as_array().unwrap().iter().cloned());
        match page["next"].as_str() {
            Some(next) => path = format!("/conversation/c{id}/items?limit=1&after={next}"),
            None => break,
        }
    }
    let sent: Vec<&str> = items
        .iter()
        .filter(|i| i["kind"] == "user")
        .map(|i| i["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        sent,
        ["echo started-here", "sleep 30", "echo after-the-turn"],
        "{items:?}"
    );
    // A turn's end without a reply from the agent shows its screen.
    assert!(
        items
            .iter()
            .any(|i| i["kind"] == "code" && i["text"].as_str().unwrap().contains("started-here")),
        "{items:?}"
    );
    assert_eq!(Some(items.len() as u64), conversation["items"].as_u64());
    assert_eq!(
        collie.get("/conversation/c999/items").code(),
        "no-such-conversation"
    );
    assert_eq!(collie.get("/conversations?after=a%20b").status, 400);
    // Reopen shows it again, read-only, with its items.
    let reopened = collie.post(
        "/reopen",
        &json!({"request_id": "ro1", "conversation": format!("c{id}")}),
    );
    assert_eq!(reopened.body["result"], "reopened", "{}", reopened.text);
    let shown = panes(&collie.get("/snapshot").body);
    assert_eq!(shown[0]["readOnly"], true);
    let view = collie.get(&format!("/pane/{pane}/events")).body;
    assert!(
        view["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["item"]["text"] == "echo started-here"),
        "{view}"
    );
}

#[test]
fn a_claude_conversation_is_resumed_in_a_new_terminal() {
    let (app, socket) = start();
    let mut collie = Collie::connect(&socket);
    assert_eq!(collie.hello["caps"]["resume"], true);
    let started = collie.post(
        "/starter/claude",
        &json!({"request_id": "c1", "prompt": "task one"}),
    );
    let pane = started.body["pane"].as_str().unwrap().to_owned();
    let id: u64 = pane[1..].parse().unwrap();
    app.until_screen(id, "may I?");
    // The hooks' messages: Claude Code's last answer is the turn's reply.
    app.until_state(id, "asking");
    assert_eq!(collie.send(&pane, "yes").body["result"], "sent");
    let events = collie.events_until(&pane, |e| e["item"]["text"] == "Done: yes");
    let reply = events
        .iter()
        .find(|e| e["item"]["text"] == "Done: yes")
        .unwrap();
    assert_eq!(reply["item"]["kind"], "reply");
    // Closed, then reopened: resumed with `--resume <its session>` in a new terminal.
    let closed = collie.post(
        "/close",
        &json!({"request_id": "c2", "tab": format!("t{id}")}),
    );
    assert_eq!(closed.status, 200, "{}", closed.text);
    let reopened = collie.post(
        "/reopen",
        &json!({"request_id": "c3", "conversation": format!("c{id}")}),
    );
    assert_eq!(reopened.body["result"], "resumed", "{}", reopened.text);
    let new: u64 = reopened.body["pane"].as_str().unwrap()[1..]
        .parse()
        .unwrap();
    assert_ne!(new, id);
    let screen = app.until_screen(new, "fake claude: resumed fake-session-");
    assert!(
        screen.contains("may I?") || screen.contains("resumed"),
        "{screen}"
    );
    let items = collie.get(&format!("/conversation/c{new}/items")).body;
    assert_eq!(
        items["items"][0]["text"],
        format!("Resumed from conversation c{id}."),
        "{items}"
    );
}

#[test]
fn malformed_requests_get_errors_and_the_facet_goes_on() {
    use std::io::{Read, Write};
    let (_app, socket) = start();
    let raw = |bytes: &[u8]| -> String {
        let mut stream = std::os::unix::net::UnixStream::connect(&socket).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(15)))
            .unwrap();
        let _ = stream.write_all(bytes);
        let _ = stream.shutdown(std::net::Shutdown::Write);
        let mut out = Vec::new();
        let _ = stream.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    };
    let status = |answer: &str| answer.split(' ').nth(1).unwrap_or("").to_owned();
    assert_eq!(status(&raw(b"GARBAGE\r\n\r\n")), "400");
    assert_eq!(status(&raw(b"\xff\xfe\x00\x01\r\n\r\n")), "400");
    let huge_header = format!(
        "GET /session/v1/hello HTTP/1.1\r\nX-Big: {}\r\n\r\n",
        "a".repeat(200 * 1024)
    );
    assert_eq!(status(&raw(huge_header.as_bytes())), "431");
    let bad_length =
        b"POST /session/v1/rename HTTP/1.1\r\nX-Collie-Session: 1\r\nContent-Length: abc\r\n\r\n{}";
    assert_eq!(status(&raw(bad_length)), "400");
    // A chunked body past 64 KiB is refused while it is read.
    let mut chunked = b"POST /session/v1/rename HTTP/1.1\r\nX-Collie-Session: 1\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..20 {
        chunked.extend_from_slice(format!("{:x}\r\n{}\r\n", 8192, "x".repeat(8192)).as_bytes());
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let answer = raw(&chunked);
    assert_eq!(status(&answer), "413", "{answer}");
    assert!(answer.contains("too-large"));
    let invalid_utf8 = b"POST /session/v1/rename HTTP/1.1\r\nX-Collie-Session: 1\r\nContent-Length: 4\r\n\r\n\"\xff\"}";
    assert_eq!(status(&raw(invalid_utf8)), "400");
    // Idle connections that never send a request do not stop the others.
    let idle: Vec<_> = (0..50)
        .map(|_| std::os::unix::net::UnixStream::connect(&socket).unwrap())
        .collect();
    let collie = Collie::connect(&socket);
    assert_eq!(collie.get("/snapshot").status, 200);
    drop(idle);
}

/// Issue 35: the phone's rename of a tab is `krad rename`'s — the record's name
/// and the tab's title are one, under Rename's one length limit.
#[test]
fn renaming_a_tab_on_the_phone_renames_the_terminal() {
    let (app, socket) = start();
    let collie = Collie::connect(&socket);
    let id = app.spawn_sh("sleep 60");
    let renamed = collie.post(
        "/rename",
        &json!({"request_id": "rt1", "tab": format!("t{id}"), "title": "fix-login"}),
    );
    assert_eq!(renamed.status, 200, "{}", renamed.text);
    assert_eq!(app.record(id)["name"], "fix-login");
    let long = "y".repeat(150);
    let cut = collie.post(
        "/rename",
        &json!({"request_id": "rt2", "tab": format!("t{id}"), "title": long}),
    );
    assert_eq!(cut.status, 200, "{}", cut.text);
    assert_eq!(app.record(id)["name"], "y".repeat(100));
}
