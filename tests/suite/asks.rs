//! Asks on the bus (section 10's first part): an agent asks, a client answers,
//! the first decision wins, the same tool call is the same ask, and Claude
//! Code's permission requests go through it.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{App, code, each, exit_code, listed, stderr, stdout};

/// The open asks.
fn asks(app: &App) -> Vec<Value> {
    listed(app, "Asks")
}

fn until_ask(app: &App) -> Value {
    let until = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(ask) = asks(app).into_iter().next() {
            return ask;
        }
        assert!(std::time::Instant::now() < until, "no ask was raised");
        std::thread::sleep(Duration::from_millis(25));
    }
}

const BASH_ASK: &str = r#"{"Ask":{"kind":"permission","tool":{"name":"Bash","input":{"command":"rm -rf build"}},"tool_call_id":"toolu_1","title":"the model says so"}}"#;

#[test]
fn an_agent_asks_a_client_answers_and_the_first_answer_wins() {
    let app = App::start();
    let id = app.spawn_sh(&format!("krad raw '{BASH_ASK}'; sleep 60"));
    let ask = until_ask(&app);
    assert_eq!(ask["terminal"], id);
    assert_eq!(
        ask["title"], "Bash: rm -rf build",
        "built from the tool, not the model's words"
    );
    let options = each(&ask["options"], "id");
    assert_eq!(options, ["allow", "allow-always", "deny"]);
    let asking = app.until_state(id, "asking");
    assert_eq!(asking["state_source"], "hook");
    assert_eq!(asking["message"], "Bash: rm -rf build");
    let ask_id = ask["ask"].as_str().unwrap();
    assert_eq!(
        exit_code(&app.krad(&["answer", ask_id, "maybe"])),
        2,
        "not an option"
    );
    let out = app.krad(&["answer", ask_id, "deny"]);
    assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
    app.until_screen(id, "\"by\":\"client\"");
    app.until_screen(id, "\"option\":\"deny\"");
    assert_eq!(app.until_state(id, "working")["state_source"], "hook");
    let again = app.request(json!({"Answer": {"ask": ask_id, "answer": {"option": "allow"}}}));
    assert_eq!(code(&again), "conflict");
    assert_eq!(
        again["Error"]["detail"]["decided"]["answer"]["option"],
        "deny"
    );
    assert_eq!(exit_code(&app.krad(&["answer", ask_id, "allow"])), 8);
    assert_eq!(
        code(&app.request(json!({"Answer": {"ask": "a-nope", "answer": {"option": "allow"}}}))),
        "not_found"
    );
    assert!(asks(&app).is_empty());
}

#[test]
fn the_same_tool_call_is_the_same_ask_across_a_reconnect() {
    let app = App::start();
    let id = app.spawn_sh(&format!(
        "krad raw '{BASH_ASK}' > first.json & sleep 0.5; krad raw '{BASH_ASK}' > second.json; wait; cat first.json second.json; sleep 60"
    ));
    let ask = until_ask(&app);
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(asks(&app).len(), 1, "one ask for one tool call");
    app.request(json!({"Answer": {"ask": ask["ask"], "answer": {"option": "allow"}}}));
    let screen = app.until_screen(id, "}}\n{\"Answered\"");
    assert_eq!(
        screen.matches("\"option\":\"allow\"").count(),
        2,
        "{screen}"
    );
    // Raised again once decided, it gets the decision at once.
    let first = screen.lines().next().unwrap().to_owned();
    let late = app.spawn_sh(&format!(
        "krad raw '{BASH_ASK}' | grep -c '\"by\":\"client\"'; sleep 60"
    ));
    let _ = first;
    // A different terminal's same tool-call id is a different ask: it waits.
    let waiting = until_ask(&app);
    assert_eq!(waiting["terminal"], late);
}

#[test]
fn asks_expire_and_no_agent_answers_its_own() {
    let app = App::start();
    let lead = app.spawn(json!({"profile": "exec", "lead": true, "command": ["sh", "-c",
        "krad raw '{\"Ask\":{\"kind\":\"text\",\"title\":\"Name?\",\"expires_in_secs\":2}}'; sleep 60"]}));
    let id = lead["terminal"].as_u64().unwrap();
    let ask = until_ask(&app);
    assert_eq!(ask["kind"], "text");
    let token = app.terminal_token(id);
    let own = app.call_as(
        id,
        &token,
        json!({"Answer": {"ask": ask["ask"], "answer": {"text": "me"}}}),
    );
    assert_eq!(code(&own), "forbidden");
    app.until_screen(id, "\"by\":\"timeout\"");
    // A plain terminal may not answer at all.
    let (plain, token) = app.plain_terminal();
    assert_eq!(
        code(&app.call_as(
            plain,
            &token,
            json!({"Answer": {"ask": "a-x", "answer": {}}})
        )),
        "forbidden"
    );
    assert_eq!(
        code(&app.request(json!({"Ask": {"kind": "text"}}))),
        "forbidden",
        "Client does not ask"
    );
    assert_eq!(
        code(&app.call_as(plain, &token, json!({"Ask": {"kind": "choice"}}))),
        "invalid"
    );
}

#[test]
fn a_claude_permission_request_is_decided_through_an_ask() {
    let app = App::start();
    let event = r#"{"hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"make deploy"}}"#;
    let id = app.spawn_sh(&format!("printf '%s' '{event}' | krad hook claude > decision.json; cat decision.json; echo; echo hook-done; sleep 60"));
    let ask = until_ask(&app);
    assert_eq!(ask["title"], "Bash: make deploy");
    let out = app.krad(&["answer", ask["ask"].as_str().unwrap(), "allow"]);
    assert_eq!(exit_code(&out), 0, "{}", stdout(&out));
    let screen = app.until_screen(id, "hook-done");
    let line = screen
        .lines()
        .find(|l| l.contains("hookSpecificOutput"))
        .unwrap_or_else(|| panic!("{screen}"));
    let decision: Value = serde_json::from_str(line).unwrap();
    assert_eq!(
        decision["hookSpecificOutput"]["hookEventName"],
        "PermissionRequest"
    );
    assert_eq!(
        decision["hookSpecificOutput"]["decision"]["behavior"],
        "allow"
    );
}

#[test]
fn krad_asks_lists_what_waits() {
    let app = App::start();
    app.spawn_sh(r#"krad raw '{"Ask":{"kind":"choice","title":"Which database?","options":[{"id":"pg","label":"Postgres"},{"id":"lite","label":"SQLite"}]}}'; sleep 60"#);
    until_ask(&app);
    let out = app.krad(&["asks"]);
    assert!(
        stdout(&out).contains("Which database?") && stdout(&out).contains("pg (Postgres)"),
        "{}",
        stdout(&out)
    );
    assert_eq!(
        exit_code(&app.krad(&["answer", until_ask(&app)["ask"].as_str().unwrap(), "lite"])),
        0
    );
    assert!(stdout(&app.krad(&["asks"])).contains("no open asks"));
}

/// An Answer cut by a crash after its decision was kept, before its answer
/// was: its retry gets `"Ok"`, not `conflict` against its own decision. The
/// crash is built from a real run: the Answer's kept answer is taken out of
/// the store and its intent, at the step the dead app would have reached,
/// put in.
#[test]
fn an_answer_cut_by_a_crash_after_deciding_is_answered_ok_on_its_retry() {
    let app = App::start();
    app.spawn_sh(&format!("krad raw '{BASH_ASK}'; sleep 60"));
    let ask = until_ask(&app)["ask"].as_str().unwrap().to_owned();
    let request = json!({"Answer": {"ask": ask, "answer": {"option": "allow"}}});
    let mut envelope = app.envelope(request.clone());
    envelope["request_id"] = json!("answer-1");
    assert_eq!(app.call(&envelope), "Ok");
    let dir = app.stop_keep_dir();
    let db = rusqlite::Connection::open(dir.path().join("repo/.git/krad/state.db")).unwrap();
    let (caller, fingerprint): (String, String) = db
        .query_row(
            "SELECT caller, fingerprint FROM answers WHERE id = 'answer-1'",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    db.execute("DELETE FROM answers WHERE id = 'answer-1'", [])
        .unwrap();
    let intent = json!({
        "once": {"caller": caller, "id": "answer-1", "fingerprint": fingerprint},
        "plan": {"kind": "answer", "ask": ask, "decided": true},
        "since": "2026-12-02T00:00:00.000Z",
    });
    db.execute(
        "INSERT INTO records (kind, key, value) VALUES ('intent', ?1, ?2)",
        [format!("{caller}\nanswer-1"), intent.to_string()],
    )
    .unwrap();
    drop(db);
    let app = App::launch(crate::support::Launch {
        reuse: Some(dir),
        ..crate::support::Launch::default()
    });
    let mut envelope = app.envelope(request);
    envelope["request_id"] = json!("answer-1");
    let retried = app.call(&envelope);
    assert_eq!(retried, json!({"Ok": {"replayed": true}}));
}

/// Issue 48: a plain program could ask only through `krad raw '{"Ask":…}'`.
/// `krad ask` asks (a choice, a text, a form), and prints the answer for the
/// script; an ask nobody answers exits 5.
#[test]
fn a_plain_program_asks_with_krad_ask_and_reads_the_answer() {
    let app = App::start();
    let id = app.spawn_sh(
        "db=$(krad ask 'Which database?' --option pg=Postgres --option lite=SQLite); \
         name=$(krad ask 'What is it called?' --text); \
         where=$(krad ask 'Where?' --field host=Host --field port=Port | tr '\\n' ' '); \
         krad ask 'Nobody?' --option x --expires 1; gone=$?; \
         krad report idle -m \"db=$db name=$name where=$where gone=$gone\"; sleep 60",
    );
    let choice = until_ask(&app);
    assert_eq!(choice["terminal"], id);
    assert_eq!(choice["title"], "Which database?");
    let ask = choice["ask"].as_str().unwrap();
    let out = app.krad(&["answer", ask, "lite"]);
    assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
    let text = until_next_ask(&app, ask);
    let answered =
        app.request(json!({"Answer": {"ask": text["ask"], "answer": {"text": "krad 2"}}}));
    assert!(answered.get("Error").is_none(), "{answered}");
    let form = until_next_ask(&app, text["ask"].as_str().unwrap());
    let answered = app.request(json!({"Answer": {"ask": form["ask"],
        "answer": {"fields": {"host": "box", "port": "22"}}}}));
    assert!(answered.get("Error").is_none(), "{answered}");
    app.until(id, Duration::from_secs(30), |r| {
        r["message"] == "db=lite name=krad 2 where=host=box port=22  gone=5"
    });
}

/// The first open ask whose id is not `after`.
fn until_next_ask(app: &App, after: &str) -> Value {
    let until = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(ask) = asks(app).into_iter().find(|a| a["ask"] != after) {
            return ask;
        }
        assert!(std::time::Instant::now() < until, "no next ask was raised");
        std::thread::sleep(Duration::from_millis(25));
    }
}
