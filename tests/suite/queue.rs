//! Issue 38, the queue: a Spawn, RunVariants or Send sent with `"queue":
//! true` that `[limits]` leave no room for waits in the app's queue — a
//! queued terminal is on record as `queued` with its place (`krad ls` shows
//! both), started in order as room frees; a queued Send is typed when its
//! turn comes; Close takes queued work out; nothing goes before the queue;
//! and the queue survives a restart of the app.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{App, Launch, code, exit_code, stderr, stdout};

const SLEEPER: [&str; 3] = ["sh", "-c", "exec sleep 600"];

/// A Spawn of `sh -c SCRIPT` sent with `queue`.
fn queued_spawn(app: &App, script: &str, name: &str) -> Value {
    app.answered(
        json!({"Spawn": {"profile": "exec", "name": name,
            "command": ["sh", "-c", script], "queue": true}}),
        "Agent",
    )
}

fn id(record: &Value) -> u64 {
    record["terminal"].as_u64().unwrap()
}

/// Waits until terminal `id` has left the queue and its program runs.
fn until_started(app: &App, id: u64) -> Value {
    app.until(id, Duration::from_secs(30), |r| {
        r["state"] != "queued" && r["pid"].is_u64()
    })
}

/// Found by a loaded run of the suite: a queued terminal's program that
/// reported at once, while the queue was still starting it, had its report
/// taken into the queued record — which the start then replaced, losing it
/// (`krad report` said Ok; the agent never showed "c runs"). Its token now
/// waits for its record, as a new terminal's does. The app pauses between
/// the program's start and its record to make the race certain.
#[test]
fn a_report_sent_as_a_queued_terminal_starts_waits_for_its_record_and_is_kept() {
    let app = App::launch(Launch {
        config: Some("[limits]\nmax_terminals = 1\n"),
        env: vec![(
            "KRAD_PAUSE_AT".to_owned(),
            "spawn-program-running:1500".to_owned(),
        )],
        ..Launch::default()
    });
    let first =
        app.request(json!({"Spawn": {"profile": "exec", "command": SLEEPER, "queue": true}}));
    let running = id(&first["Agent"]);
    let queued = queued_spawn(&app, "krad report idle -m 'it runs'; exec sleep 600", "q");
    assert_eq!(queued["state"], "queued", "{queued}");
    assert_eq!(
        app.request(json!({"Close": {"target": running}})),
        json!("Ok")
    );
    // Started (its pid on record), then told by its report — or, its report
    // lost, working as the process it is.
    let record = app.until(id(&queued), Duration::from_secs(30), |r| {
        r["pid"].is_u64() && (r["message"] == "it runs" || r["state"] == "working")
    });
    assert_eq!(record["message"], "it runs", "{record}\n{}", app.log());
    assert_eq!(record["state"], "idle", "{record}");
    assert_eq!(record["state_source"], "hook", "{record}");
}

#[test]
fn queued_spawns_wait_in_order_start_as_room_frees_and_close_takes_one_out() {
    let app = App::start_config("[limits]\nmax_terminals = 1\n");
    // With room, `queue` starts it at once.
    let first =
        app.request(json!({"Spawn": {"profile": "exec", "command": SLEEPER, "queue": true}}));
    assert_eq!(first["Agent"]["state"], "starting", "{first}");
    let running = id(&first["Agent"]);
    // Without room: on record as queued, in order, each with its place.
    let a = queued_spawn(&app, "krad report idle -m 'a runs'; exec sleep 600", "a");
    let b = queued_spawn(&app, "exec sleep 600", "b");
    let c = queued_spawn(&app, "krad report idle -m 'c runs'; exec sleep 600", "c");
    for (record, place) in [(&a, 1), (&b, 2), (&c, 3)] {
        assert_eq!(record["state"], "queued", "{record}");
        assert_eq!(record["queue_place"], place, "{record}");
        assert!(record["pid"].is_null(), "no program yet: {record}");
    }
    // The CLI says so too, with the place.
    let out = app.krad(&[
        "spawn",
        "--profile",
        "exec",
        "--queue",
        "--name",
        "d",
        "--",
        "true",
    ]);
    assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("place 4 in the queue"),
        "{}",
        stdout(&out)
    );
    let d = stdout(&out)
        .split_whitespace()
        .nth(2)
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap();
    // Nothing goes before the queue: a Spawn without `queue` is busy, even
    // once a place is free, while work waits.
    let refused = app.request(json!({"Spawn": {"profile": "exec", "command": SLEEPER}}));
    assert_eq!(code(&refused), "busy", "{refused}");
    assert_eq!(refused["Error"]["detail"]["limit"], "queue", "{refused}");
    assert_eq!(refused["Error"]["detail"]["queued"], 4, "{refused}");
    let said = refused["Error"]["message"].as_str().unwrap();
    assert!(said.starts_with("4 requests wait in the queue"), "{said}");
    // `krad ls` shows each queued agent with its place.
    let ls = app.krad_ok(&["ls"]);
    for (name, place) in [("a", 1), ("b", 2), ("c", 3)] {
        let line = ls
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(name))
            .unwrap_or_else(|| panic!("{name} not in:\n{ls}"));
        assert!(line.contains("queued"), "{ls}");
        assert!(line.contains(&format!("[queue #{place}]")), "{ls}");
    }
    // Close of a queued agent takes it out; those after it move up.
    assert_eq!(
        app.request(json!({"Close": {"target": id(&b)}})),
        json!("Ok")
    );
    assert_eq!(
        code(&app.request(json!({"Check": {"target": id(&b)}}))),
        "not_found"
    );
    app.until(id(&c), Duration::from_secs(10), |r| r["queue_place"] == 2);
    assert_eq!(app.record(d)["queue_place"], 3);
    // A Wait on a queued agent waits: it has not even started.
    let waited = app.request(json!({"Wait": {"target": id(&a), "timeout_secs": 1}}));
    assert_eq!(waited, json!("TimedOut"));
    // Room frees: the first in line starts, and only it.
    assert_eq!(
        app.request(json!({"Close": {"target": running}})),
        json!("Ok")
    );
    let started = until_started(&app, id(&a));
    assert_eq!(started["name"], "a");
    assert!(started["queue_place"].is_null(), "{started}");
    app.until(id(&a), Duration::from_secs(20), |r| {
        r["message"] == "a runs"
    });
    let c_now = app.record(id(&c));
    assert_eq!(c_now["state"], "queued", "{c_now}");
    assert_eq!(c_now["queue_place"], 1, "{c_now}");
    // And the next when that one goes.
    assert_eq!(
        app.request(json!({"Close": {"target": id(&a)}})),
        json!("Ok")
    );
    until_started(&app, id(&c));
    app.until(id(&c), Duration::from_secs(20), |r| {
        r["message"] == "c runs"
    });
    assert_eq!(app.record(d)["queue_place"], 1);
}

#[test]
fn a_queued_send_is_typed_when_an_agent_stops_working() {
    let app = App::start_config("[limits]\nmax_working = 1\n");
    let idle = app.spawn_sh("krad report idle -m ready; exec cat");
    app.until_state(idle, "idle");
    let worker = app.spawn_sh("krad report working; read line; krad report idle -m done; exec cat");
    app.until_state(worker, "working");
    // No room for the idle agent to work: the Send waits in line, untyped.
    let sent = app.request(json!({"Send": {"target": idle, "text": "more work",
        "enter": true, "queue": true}}));
    assert_eq!(sent["Sent"]["delivered"], false, "{sent}");
    assert_eq!(sent["Sent"]["queue_place"], 1, "{sent}");
    assert_eq!(app.record(idle)["queue_place"], 1);
    // The CLI's --queue says where it waits.
    let out = app.krad(&["send", &idle.to_string(), "and docs", "--enter", "--queue"]);
    assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("place 2 in the queue"),
        "{}",
        stdout(&out)
    );
    // Without --queue it is busy, saying what to do.
    let out = app.krad(&["send", &idle.to_string(), "now", "--enter"]);
    assert_eq!(exit_code(&out), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("--queue"), "{}", stderr(&out));
    let screen = app.request(json!({"Output": {"target": idle}}))["Output"]["screen"].clone();
    assert!(!screen.as_str().unwrap().contains("more work"), "{screen}");
    // The worker stops working: the queued texts are typed, in order.
    let told = app.request(json!({"Send": {"target": worker, "text": "x", "enter": true}}));
    assert!(told["Sent"].is_object(), "{told}");
    app.until_state(worker, "idle");
    let screen = app.until_screen(idle, "and docs");
    let more = screen.find("more work").unwrap();
    assert!(more < screen.find("and docs").unwrap(), "{screen}");
    app.until(idle, Duration::from_secs(10), |r| {
        r["queue_place"].is_null()
    });
}

#[test]
fn queued_variants_get_their_worktrees_now_and_their_agents_in_line() {
    let app = crate::support::app_with_first_commit(
        &[("README", b"queue\n")],
        Some("[limits]\nmax_terminals = 2\n"),
    );
    let running = app.spawn_sh("exec sleep 600");
    let answer = app.request(json!({"RunVariants": {"count": 2, "prompt": "x",
        "profile": "exec", "command": ["sh", "-c", "krad report idle -m variant; exec sleep 600"],
        "name": "q", "queue": true}}));
    let variants = answer["Variants"]["variants"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"));
    assert_eq!(variants.len(), 2);
    let (one, two) = (
        variants[0]["terminal"].as_u64().unwrap(),
        variants[1]["terminal"].as_u64().unwrap(),
    );
    // Each says where it waits (the first may have started already).
    assert_eq!(
        variants[1]["queue_place"].as_u64().map(|p| p <= 2),
        Some(true),
        "{answer}"
    );
    // The worktrees are there; the agents wait (room for one only).
    let environments = app.request(json!("Environments"))["Environments"].clone();
    assert_eq!(
        environments.as_array().map_or(0, Vec::len),
        3,
        "{environments}"
    );
    // The first may start at once (one place is free); the second waits.
    until_started(&app, one);
    let second = app.record(two);
    assert_eq!(second["state"], "queued", "{second}");
    assert_eq!(second["group"], "q");
    assert_eq!(second["variant"], 2);
    assert_eq!(
        app.request(json!({"Close": {"target": running}})),
        json!("Ok")
    );
    until_started(&app, two);
    app.until(two, Duration::from_secs(20), |r| r["message"] == "variant");
    assert_eq!(app.record(two)["environment"], "q-2");
}

#[test]
fn the_queue_survives_a_restart_of_the_app() {
    let config = "[limits]\nmax_terminals = 1\n";
    let app = App::start_config(config);
    app.spawn_sh("exec sleep 600");
    let a = queued_spawn(&app, "krad report idle -m 'a runs'; exec sleep 600", "a");
    let b = queued_spawn(&app, "exec sleep 600", "b");
    // The app stops (its terminals end with it); the queue is kept.
    let app = app.again(Some(config));
    // Back in order: the first takes the free place, the second still waits.
    let started = until_started(&app, id(&a));
    assert_eq!(started["name"], "a");
    app.until(id(&a), Duration::from_secs(20), |r| {
        r["message"] == "a runs"
    });
    let waiting = app.record(id(&b));
    assert_eq!(waiting["state"], "queued", "{waiting}");
    assert_eq!(waiting["queue_place"], 1, "{waiting}");
    assert_eq!(waiting["name"], "b");
    assert_eq!(
        app.request(json!({"Close": {"target": id(&a)}})),
        json!("Ok")
    );
    until_started(&app, id(&b));
}
