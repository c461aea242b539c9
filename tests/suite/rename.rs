//! Rename (an addition of krad's): a terminal's name in its record, who may
//! change it, what is refused, at-most-once, and the phone's pane title.

use serde_json::json;

use crate::collie::{Collie, panes};
use crate::support::{App, Launch, code, exit_code, stderr, stdout};

#[test]
fn a_rename_changes_the_record_and_its_rev_and_is_listed_in_hello() {
    let app = App::start();
    let hello = app.request(json!("Hello"));
    assert!(
        hello["Hello"]["requests"]
            .as_array()
            .unwrap()
            .contains(&json!("Rename")),
        "{hello}"
    );
    let id = app.spawn_sh("sleep 60");
    let before = app.record(id);
    let renamed = app.request(json!({"Rename": {"target": id, "name": "fix-login"}}));
    assert_eq!(renamed["Agent"]["name"], "fix-login", "{renamed}");
    assert!(renamed["Agent"]["rev"].as_u64() > before["rev"].as_u64());
    assert_eq!(app.record(id)["name"], "fix-login");
    // The same name again changes nothing.
    let again = app.request(json!({"Rename": {"target": id, "name": "fix-login"}}));
    assert_eq!(again["Agent"]["rev"], renamed["Agent"]["rev"]);
    // null takes it away.
    let cleared = app.request(json!({"Rename": {"target": id, "name": null}}));
    assert!(cleared["Agent"]["name"].is_null(), "{cleared}");
}

#[test]
fn bad_names_and_unknown_terminals_are_refused() {
    let app = App::start();
    let id = app.spawn_sh("sleep 60");
    for name in [
        json!(""),
        json!("   "),
        json!("a\u{1b}[31m"),
        json!("x".repeat(101)),
    ] {
        let answer = app.request(json!({"Rename": {"target": id, "name": name}}));
        assert_eq!(code(&answer), "invalid", "{answer}");
        assert_eq!(answer["Error"]["detail"]["field"], "name");
        // A Spawn's name is held to the same rule, and nothing is started.
        let spawned =
            app.request(json!({"Spawn": {"profile": "exec", "command": ["true"], "name": name}}));
        assert_eq!(code(&spawned), "invalid", "{spawned}");
        assert_eq!(spawned["Error"]["detail"]["request"], "Spawn", "{spawned}");
        assert_eq!(spawned["Error"]["detail"]["field"], "name");
    }
    assert_eq!(
        app.request(json!("List"))["Agents"]
            .as_array()
            .map(Vec::len),
        Some(1),
        "only the first terminal"
    );
    let longest =
        app.spawn(json!({"profile": "exec", "command": ["true"], "name": "y".repeat(100)}));
    assert_eq!(longest["name"], "y".repeat(100));
    let answer = app.request(json!({"Rename": {"target": id, "name": 7}}));
    assert_eq!(code(&answer), "bad_request", "{answer}");
    let answer = app.request(json!({"Rename": {"name": "x"}}));
    assert_eq!(code(&answer), "bad_request", "{answer}");
    let answer = app.request(json!({"Rename": {"target": 999, "name": "x"}}));
    assert_eq!(code(&answer), "not_found", "{answer}");
    assert_eq!(app.record(id)["name"], json!(null));
}

#[test]
fn a_plain_terminal_renames_itself_and_its_children_only() {
    let app = App::start();
    let stranger = app.spawn_sh("sleep 60");
    let (parent, token) = app.plain_terminal();
    let child = app.spawn_as(parent, &token, &["sleep", "60"]);
    let rename = |target: u64, name: &str| {
        app.call_as(
            parent,
            &token,
            json!({"Rename": {"target": target, "name": name}}),
        )
    };
    assert_eq!(rename(parent, "me")["Agent"]["name"], "me");
    assert_eq!(rename(child, "kid")["Agent"]["name"], "kid");
    let refused = rename(stranger, "nope");
    assert_eq!(code(&refused), "forbidden", "{refused}");
    assert_eq!(app.record(stranger)["name"], json!(null));
}

#[test]
fn a_rename_with_a_request_id_runs_once() {
    let app = App::start();
    let id = app.spawn_sh("sleep 60");
    let mut envelope = app.envelope(json!({"Rename": {"target": id, "name": "first"}}));
    envelope["request_id"] = json!("rename-1");
    let first = app.call(&envelope);
    assert_eq!(first["Agent"]["name"], "first");
    app.request(json!({"Rename": {"target": id, "name": "second"}}));
    let replay = app.call(&envelope);
    assert_eq!(replay["Agent"]["name"], "first", "{replay}");
    assert_eq!(replay["Agent"]["replayed"], true);
    assert_eq!(app.record(id)["name"], "second", "a replay changes nothing");
}

#[test]
fn the_phone_sees_the_new_name_as_the_pane_title_and_the_old_one_back_after_a_clear() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("collie").join("durable.sock");
    let config = format!("[durable]\nsocket = \"{}\"\n", socket.display());
    let app = App::launch(Launch {
        config: Some(&config),
        reuse: Some(dir),
        ..Launch::default()
    });
    let mut collie = Collie::connect(&socket);
    let id = app.spawn_sh("sleep 60");
    let title = |collie: &mut Collie| {
        let snapshot = collie.poll_snapshot().expect("the snapshot changed");
        panes(&snapshot)
            .into_iter()
            .find(|p| p["id"] == format!("p{id}"))
            .unwrap()["title"]
            .clone()
    };
    let original = title(&mut collie);
    app.request(json!({"Rename": {"target": id, "name": "deploy watcher"}}));
    assert_eq!(title(&mut collie), "deploy watcher");
    app.request(json!({"Rename": {"target": id, "name": null}}));
    assert_eq!(title(&mut collie), original);
}

#[test]
fn krad_rename_names_and_clears_and_says_so() {
    let app = App::start();
    let id = app.spawn_sh("sleep 60").to_string();
    let out = app.krad(&["rename", &id, "fix-login"]);
    assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        stdout(&out).trim(),
        format!("terminal {id} is now fix-login")
    );
    let out = app.krad(&["rename", &id, "--clear", "--json"]);
    let answer: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert!(answer["Agent"]["name"].is_null(), "{answer}");
    // Nothing to rename to is a usage error; a blank name is the app's `invalid`.
    assert_eq!(exit_code(&app.krad(&["rename", &id])), 2);
    let blank = app.krad(&["rename", &id, " "]);
    assert_eq!(exit_code(&blank), 2, "{}", stderr(&blank));
    assert!(stderr(&blank).contains("blank"), "{}", stderr(&blank));
    assert_eq!(exit_code(&app.krad(&["rename", "999", "x"])), 3);
}

/// Every command that takes a TARGET takes an agent's name too: found among
/// the agents when it runs; a name two agents share is refused with their
/// ids (exit 2), a name no agent has is exit 3, digits stay an id.
#[test]
fn a_target_may_be_an_agent_s_name() {
    let app = App::start();
    let named = |name: &str, script: &str| {
        app.spawn(json!({"profile": "exec", "name": name, "command": ["sh", "-c", script]}))
            ["terminal"]
            .as_u64()
            .unwrap()
    };
    let web = named("web", "read line; echo got:$line; sleep 60");
    let api = named("api", "sleep 60");
    let api_too = named("api", "sleep 60");
    let numbered = named("42", "sleep 60");

    let out = app.krad(&["check", "web", "--json"]);
    assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
    let record: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(record["Agent"]["terminal"], web);
    let out = app.krad(&["send", "web", "hello", "--enter"]);
    assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
    app.until_screen(web, "got:hello");
    assert!(stdout(&app.krad(&["read", "web"])).contains("got:hello"));
    let out = app.krad(&["rename", "web", "site"]);
    assert_eq!(stdout(&out).trim(), format!("terminal {web} is now site"));
    let out = app.krad(&["budget", "site", "--max-cost", "2"]);
    assert_eq!(exit_code(&out), 0, "{}", stderr(&out));

    let shared = app.krad(&["check", "api"]);
    assert_eq!(exit_code(&shared), 2, "{}", stderr(&shared));
    assert!(
        stderr(&shared).contains(&format!("terminals {api}, {api_too}")),
        "{}",
        stderr(&shared)
    );
    let nobody = app.krad(&["wait", "site", "nobody"]);
    assert_eq!(exit_code(&nobody), 3, "{}", stderr(&nobody));
    assert!(
        stderr(&nobody).contains("no agent is named \"nobody\""),
        "{}",
        stderr(&nobody)
    );
    // Digits are an id, whatever the agents are named.
    assert_eq!(exit_code(&app.krad(&["check", "42"])), 3);
    assert_eq!(exit_code(&app.krad(&["check", &numbered.to_string()])), 0);

    let out = app.krad(&["close", "site"]);
    assert_eq!(stdout(&out).trim(), format!("closed terminal {web}"));
    let out = app.krad(&["wait", "site", "--timeout", "1"]);
    assert_eq!(exit_code(&out), 3, "closed and gone: {}", stderr(&out));
}
