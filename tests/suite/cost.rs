//! A variant group's cost limit and the totals per environment and group,
//! with agents that write a transcript in Claude Code's format and name it
//! in their Report, as Claude Code's hooks do (the real CLIs' own files are
//! tested in `real::cost`).

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{App, app_with_first_commit, exit_code, stdout};

/// Writes a Claude Code transcript line worth 1000 uncached input tokens,
/// reports it, then waits; an interrupt (Ctrl-C) shows on its screen.
const AGENT: &str = r#"trap 'echo got-interrupted' INT
printf '%s\n' '{"type":"assistant","message":{"id":"msg_1","model":"test-model","usage":{"input_tokens":1000,"output_tokens":0}}}' > "$PWD/t.jsonl"
krad raw "{\"Report\":{\"state\":\"idle\",\"message\":\"spent\",\"transcript\":\"$PWD/t.jsonl\"}}" > /dev/null
while :; do sleep 1; done"#;

const CONFIG: &str = "[prices.test-model]\ninput = 2.0\noutput = 10.0\n";

fn until_all(app: &App, ids: &[u64], check: impl Fn(&Value) -> bool + Copy) {
    for &id in ids {
        app.until(id, Duration::from_secs(30), check);
    }
}

#[test]
fn a_group_past_its_limit_is_interrupted_asks_and_goes_on_when_raised() {
    let app = app_with_first_commit(&[("README", b"hi")], Some(CONFIG));
    let answer = app.request(json!({"RunVariants": {
        "count": 2, "name": "spend", "profile": "exec",
        "command": ["sh", "-c", AGENT, "sh"], "prompt": "go",
        // Each variant costs $0.002: one alone stays under it, both reach it.
        "max_group_cost_usd": 0.003
    }}));
    let ids: Vec<u64> = answer["Variants"]["variants"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"))
        .iter()
        .map(|v| v["terminal"].as_u64().unwrap())
        .collect();
    until_all(&app, &ids, |r| r["state_source"] == "budget");
    for &id in &ids {
        let record = app.record(id);
        assert_eq!(record["state"], "asking", "{record}");
        assert_eq!(
            record["message"], "budget reached: $0.0040 of $0.0030 (group spend)",
            "{record}"
        );
        assert_eq!(record["tokens"]["cost_usd"], 0.002, "{record}");
        app.until_screen(id, "got-interrupted");
    }
    // The totals: each variant's environment, and the group's in `krad envs`.
    let envs = app.request(json!("Environments"))["Environments"].clone();
    let variants: Vec<&Value> = envs
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["group"] == "spend")
        .collect();
    assert_eq!(variants.len(), 2, "{envs}");
    for env in variants {
        assert_eq!(env["tokens"]["input"], 1000, "{env}");
        assert_eq!(env["tokens"]["cost_usd"], 0.002, "{env}");
    }
    let table = app.krad_ok(&["envs"]);
    assert!(
        table.contains("group spend: $0.0040 (2.0k tokens) over 2 variants"),
        "{table}"
    );
    // A raise under what the group cost holds them; one past it frees them.
    let low = app.krad(&["budget", "--group", "spend", "--max-cost", "0.0035"]);
    assert_eq!(exit_code(&low), 0, "{low:?}");
    assert!(ids.iter().all(|&id| app.record(id)["state"] == "asking"));
    let raised = app.krad(&["budget", "--group", "spend", "--max-cost", "1", "--json"]);
    assert_eq!(exit_code(&raised), 0, "{raised:?}");
    let records: Value = serde_json::from_str(&stdout(&raised)).unwrap();
    assert_eq!(
        records["Agents"].as_array().map(Vec::len),
        Some(2),
        "{records}"
    );
    for &id in &ids {
        let record = app.record(id);
        assert_eq!(record["state"], "idle", "{record}");
        assert_eq!(
            record["message"], "group budget raised to $1.00",
            "{record}"
        );
    }
    let unknown = app.krad(&["budget", "--group", "nope", "--max-cost", "1"]);
    assert_ne!(exit_code(&unknown), 0);
}

#[test]
fn a_plain_agent_may_not_raise_a_budget_and_a_report_s_transcript_is_checked() {
    let app = App::start();
    let (id, token) = app.plain_terminal();
    let refused = app.call_as(
        id,
        &token,
        json!({"Budget": {"target": id, "max_cost_usd": 100}}),
    );
    assert_eq!(crate::support::code(&refused), "forbidden", "{refused}");
    let relative = app.call_as(
        id,
        &token,
        json!({"Report": {"state": "idle", "transcript": "t.jsonl"}}),
    );
    assert_eq!(crate::support::code(&relative), "invalid", "{relative}");
}

/// Spends $0.002 for each line it reads (a transcript line, named in a
/// Report); an interrupt shows on its screen and does not stop it.
const SPENDS_PER_LINE: &str = r#"trap 'echo got-interrupted' INT
t="$PWD/t-$KRAD_ADE_TERMINAL.jsonl"; n=0
while :; do read -r line || continue; n=$((n+1))
printf '{"type":"assistant","message":{"id":"m%s","model":"test-model","usage":{"input_tokens":1000,"output_tokens":0}}}\n' "$n" >> "$t"
krad raw "{\"Report\":{\"state\":\"idle\",\"message\":\"spent $n\",\"transcript\":\"$t\"}}" > /dev/null
done"#;

/// An agent its user sent to while it was held at its limit goes on past
/// it — also after the app is killed and started again, which takes it back that takes it back (the waiver is kept with
/// it), and with its cost as it was (each kept terminal's cost is kept).
#[test]
fn a_waived_limit_and_the_cost_survive_a_restart_on_the_tmux_host() {
    let config = format!("{}{CONFIG}", crate::tmux::TMUX);
    let app = App::start_config(&config);
    let id = app.spawn(
        json!({"profile": "exec", "command": ["sh", "-c", SPENDS_PER_LINE],
        "max_cost_usd": 0.003}),
    )["terminal"]
        .as_u64()
        .unwrap();
    let _server = crate::tmux::TmuxServer::of(&app, id);
    for line in ["a", "b"] {
        app.request(json!({"Send": {"target": id, "text": line, "enter": true}}));
    }
    let held = app.until(id, Duration::from_secs(30), |r| {
        r["state_source"] == "budget"
    });
    assert_eq!(held["state"], "asking", "{held}");
    // Its user goes on: it is not stopped again, past its limit.
    app.request(json!({"Send": {"target": id, "text": "c", "enter": true}}));
    app.until(id, Duration::from_secs(30), |r| {
        r["tokens"]["cost_usd"] == 0.006 && r["state_source"] != "budget"
    });
    // The app dies (its terminals live on in tmux), and starts again.
    let app = app.killed_then_again(Some(&config));
    // Its cost at once, as it was; and, read again from its transcript by the
    // new app's spend reader, still not stopped.
    let back = app.record(id);
    assert_eq!(back["tokens"]["cost_usd"], 0.006, "{back}");
    app.request(json!({"Send": {"target": id, "text": "d", "enter": true}}));
    let on = app.until(id, Duration::from_secs(30), |r| {
        r["tokens"]["cost_usd"] == 0.008
    });
    assert_ne!(on["state_source"], "budget", "{on}");
    assert_eq!(app.record(id)["state"], "idle");
}
