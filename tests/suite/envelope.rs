//! Section 3, the envelope and the order of checks: line, token, version,
//! caller and request. Every error code the bus itself can give.

use serde_json::{Value, json};

use crate::support::{App, code};

fn raw(app: &App, line: &str) -> Value {
    let answer = app.send_raw(format!("{line}\n").as_bytes());
    serde_json::from_str(answer.trim_end()).unwrap_or_else(|e| panic!("{answer:?}: {e}"))
}

#[test]
fn malformed_lines_are_bad_request() {
    let app = App::start();
    let t = app.token();
    let cases = [
        "not json".to_owned(),
        "[\"Hello\"]".to_owned(),
        "\"Hello\"".to_owned(),
        "{}".to_owned(),
        format!(r#"{{"api_version":"1","token":"{t}","from":"Client","request":"Hello"}}"#),
        format!(r#"{{"api_version":1.0,"token":"{t}","from":"Client","request":"Hello"}}"#),
        r#"{"token":12,"from":"Client","request":"Hello"}"#.to_owned(),
        format!(r#"{{"token":"{t}","request":"Hello"}}"#),
        format!(r#"{{"token":"{t}","from":"client","request":"Hello"}}"#),
        format!(
            r#"{{"token":"{t}","from":{{"Terminal":{{"environment":"main"}}}},"request":"Hello"}}"#
        ),
        format!(
            r#"{{"token":"{t}","from":{{"Terminal":{{"environment":"main","terminal":-1}}}},"request":"Hello"}}"#
        ),
        format!(r#"{{"token":"{t}","from":"Client"}}"#),
        format!(r#"{{"token":"{t}","from":"Client","request":5}}"#),
        format!(r#"{{"token":"{t}","from":"Client","request":{{}}}}"#),
        format!(r#"{{"token":"{t}","from":"Client","request":{{"Hello":{{}},"Stats":{{}}}}}}"#),
        format!(r#"{{"token":"{t}","from":"Client","request":"Hello","request_id":"two words"}}"#),
        format!(
            r#"{{"token":"{t}","from":"Client","request":"Hello","request_id":"{}"}}"#,
            "x".repeat(129)
        ),
    ];
    for line in cases {
        let answer = raw(&app, &line);
        assert_eq!(code(&answer), "bad_request", "{line} → {answer}");
        assert!(
            !answer["Error"]["message"].as_str().unwrap().contains(t),
            "token echoed"
        );
    }
}

#[test]
fn a_wrong_token_is_unauthorized_and_not_named() {
    let app = App::start();
    let answer = app.call(&json!({"token":"0".repeat(32),"from":"Client","request":"Hello"}));
    assert_eq!(code(&answer), "unauthorized");
    let message = answer["Error"]["message"].as_str().unwrap();
    assert!(!message.contains(app.token()));
}

#[test]
fn the_token_is_checked_before_the_version() {
    let app = App::start();
    let answer =
        app.call(&json!({"api_version":2,"token":"wrong","from":"Client","request":"Hello"}));
    assert_eq!(code(&answer), "unauthorized");
}

#[test]
fn a_terminal_caller_with_the_client_token_is_unauthorized() {
    let app = App::start();
    let answer = app.call(&json!({
        "token": app.token(),
        "from": {"Terminal": {"environment": "main", "terminal": 1}},
        "request": "Hello"
    }));
    assert_eq!(code(&answer), "unauthorized");
}

#[test]
fn v2_is_refused_before_the_request_name_is_read() {
    let app = App::start();
    for request in [
        json!("Hello"),
        json!("TeleportV2"),
        json!({"Shutdown": "nonsense"}),
    ] {
        let mut envelope = app.envelope(request);
        envelope["api_version"] = json!(2);
        let answer = app.call(&envelope);
        assert_eq!(
            answer,
            json!({"Error":{"code":"unsupported_api_version","message":"This app serves the agents API v1, not v2"}})
        );
    }
    let mut envelope = app.envelope(json!("Hello"));
    envelope["api_version"] = json!(0);
    assert_eq!(code(&app.call(&envelope)), "unsupported_api_version");
}

#[test]
fn a_missing_api_version_means_1() {
    let app = App::start();
    let answer = app.call(&json!({"token": app.token(), "from": "Client", "request": "Hello"}));
    assert_eq!(answer["Hello"]["api_version"], 1);
}

#[test]
fn unknown_requests_are_named() {
    let app = App::start();
    for name in ["Teleport", "hello", ""] {
        let answer = app.request(json!(name));
        assert_eq!(code(&answer), "unknown_request", "{name}: {answer}");
        assert_eq!(answer["Error"]["detail"]["request"], name);
    }
}

#[test]
fn requests_of_later_issues_are_unknown_until_they_land() {
    // No fake answers: what the app does not serve yet says so.
    let app = App::start();
    let hello = app.request(json!("Hello"));
    let served: Vec<&str> = hello["Hello"]["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    for name in [
        "List",
        "Environments",
        "Check",
        "Wait",
        "Spawn",
        "Send",
        "Output",
        "Close",
        "CreateWorktree",
        "Changes",
        "RunVariants",
        "PickVariant",
        "Code",
        "Extensions",
        "ExtensionTool",
        "Report",
        "SubscribeAgents",
        "Attach",
        "Ask",
        "Answer",
        "Asks",
    ] {
        if served.contains(&name) {
            continue;
        }
        assert_eq!(code(&app.request(json!(name))), "unknown_request", "{name}");
    }
}

#[test]
fn bad_fields_are_bad_request_naming_request_and_field() {
    let app = App::start();
    let answer = app.request(json!({"Shutdown": {"close_terminals": "yes"}}));
    assert_eq!(code(&answer), "bad_request");
    let message = answer["Error"]["message"].as_str().unwrap();
    assert!(
        message.contains("Shutdown") && message.contains("close_terminals"),
        "{message}"
    );
    assert_eq!(answer["Error"]["detail"]["field"], "close_terminals");
    let answer = app.request(json!({"Stats": [1, 2]}));
    assert_eq!(code(&answer), "bad_request");
    // The app is still there: nothing was shut down.
    assert!(app.request(json!("Hello"))["Hello"].is_object());
}

#[test]
fn fieldless_requests_take_every_spelling_and_unknown_fields_are_ignored() {
    let app = App::start();
    for request in [
        json!("Stats"),
        json!({"Stats": {}}),
        json!({"Stats": null}),
        json!({"Stats": {"future": 1}}),
    ] {
        assert!(
            app.request(request.clone())["Stats"].is_object(),
            "{request}"
        );
    }
    let mut envelope = app.envelope(json!("Hello"));
    envelope["a_field_from_the_future"] = json!({"x": 1});
    assert!(app.call(&envelope)["Hello"].is_object());
}

#[test]
fn stats_counts_requests_and_errors_by_code() {
    let app = App::start();
    app.request(json!("Teleport"));
    app.call(&json!({"token": "x", "from": "Client", "request": "Hello"}));
    app.send_raw(b"nope\n");
    let stats = app.request(json!("Stats"))["Stats"].clone();
    assert_eq!(
        stats["errors_by_code"],
        json!({"bad_request":1,"unauthorized":1,"unknown_request":1})
    );
    assert_eq!(stats["requests_total"], 3);
    // This one, plus any earlier connection still in its post-answer linger.
    let open = stats["connections_open"].as_u64().unwrap();
    assert!((1..=4).contains(&open), "{open}");
    assert_eq!(stats["agents"], 0);
    for key in ["waits_pending", "subscribers", "uptime_secs"] {
        assert!(stats[key].is_u64(), "{key}");
    }
}
