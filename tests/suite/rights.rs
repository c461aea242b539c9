//! Section 4: who may do what. A terminal holds a token for itself only; a plain
//! terminal acts inside its environment and on the terminals it spawned; a lead
//! terminal may act anywhere; only Client shuts the app down.

use serde_json::json;

use crate::support::{App, code};

#[test]
fn a_terminal_cannot_act_as_another_terminal_or_as_client() {
    let app = App::start();
    let one = app.spawn_sh("sleep 60");
    let two = app.spawn_sh("sleep 60");
    let token = app.terminal_token(one);
    assert!(app.call_as(one, &token, json!("Hello"))["Hello"].is_object());
    assert_eq!(
        code(&app.call_as(two, &token, json!("Hello"))),
        "unauthorized"
    );
    let as_client = app.call(&json!({"token": token, "from": "Client", "request": "Hello"}));
    assert_eq!(code(&as_client), "unauthorized");
    assert_eq!(
        code(&app.call_as(one, &token, json!("Shutdown"))),
        "forbidden"
    );
}

#[test]
fn a_plain_terminal_spawns_only_in_its_environment_and_never_a_lead() {
    let app = App::start();
    let (plain, token) = app.plain_terminal();
    let outside = app.call_as(
        plain,
        &token,
        json!({"Spawn": {"profile": "exec", "command": ["true"], "environment": "other"}}),
    );
    assert_eq!(code(&outside), "forbidden", "{outside}");
    let lead = app.call_as(
        plain,
        &token,
        json!({"Spawn": {"profile": "exec", "command": ["true"], "lead": true}}),
    );
    assert_eq!(code(&lead), "forbidden");
    let inside = app.call_as(
        plain,
        &token,
        json!({"Spawn": {"profile": "exec", "command": ["sleep", "60"]}}),
    );
    assert_eq!(inside["Agent"]["environment"], "main");
}

#[test]
fn a_plain_terminal_sends_to_and_closes_only_its_own_children() {
    let app = App::start();
    let stranger = app.spawn_sh("sleep 60");
    let (parent, token) = app.plain_terminal();
    let child = app.spawn_as(parent, &token, &["cat"]);
    assert_eq!(
        code(&app.call_as(
            parent,
            &token,
            json!({"Send": {"target": stranger, "text": "x"}})
        )),
        "forbidden"
    );
    assert_eq!(
        code(&app.call_as(parent, &token, json!({"Close": {"target": stranger}}))),
        "forbidden"
    );
    let sent = app.call_as(
        parent,
        &token,
        json!({"Send": {"target": child, "text": "x"}}),
    );
    assert_eq!(sent["Sent"]["delivered"], true, "{sent}");
    assert_eq!(
        app.call_as(parent, &token, json!({"Close": {"target": child}})),
        json!("Ok")
    );
    // Everyone may read.
    assert!(
        app.call_as(parent, &token, json!({"Output": {"target": stranger}}))["Output"].is_object()
    );
    assert!(app.call_as(parent, &token, json!("List"))["Agents"].is_array());
}

#[test]
fn a_lead_terminal_may_act_anywhere() {
    let app = App::start();
    let stranger = app.spawn_sh("sleep 60");
    let lead = app.spawn(json!({"profile": "exec", "command": ["sleep", "60"], "lead": true}));
    assert_eq!(lead["lead"], true);
    let id = lead["terminal"].as_u64().unwrap();
    let token = app.terminal_token(id);
    assert!(
        app.call_as(
            id,
            &token,
            json!({"Send": {"target": stranger, "text": "x"}})
        )["Sent"]
            .is_object()
    );
    assert_eq!(
        app.call_as(id, &token, json!({"Close": {"target": stranger}})),
        json!("Ok")
    );
    let spawned = app.call_as(
        id,
        &token,
        json!({"Spawn": {"profile": "exec", "command": ["sleep", "60"], "lead": true}}),
    );
    assert_eq!(spawned["Agent"]["lead"], true);
    assert_eq!(
        code(&app.call_as(id, &token, json!("Shutdown"))),
        "forbidden"
    );
}
