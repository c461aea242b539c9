//! Sections 5 and 6: Wait, Check and SubscribeAgents — answers that come as soon
//! as the condition holds, never miss a change, cost nothing while they wait, and
//! end when their client leaves.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{App, app_with_first_commit, code};

/// Opens a stream and returns a line reader over it.
fn subscribe(app: &App, fields: Value) -> BufReader<TcpStream> {
    let mut stream = app.connect();
    let mut line = serde_json::to_vec(&app.envelope(json!({"SubscribeAgents": fields}))).unwrap();
    line.push(b'\n');
    stream.write_all(&line).unwrap();
    BufReader::new(stream)
}

fn next(reader: &mut BufReader<TcpStream>) -> Value {
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"))
}

#[test]
fn a_wait_after_the_agent_finished_answers_at_once() {
    let app = App::start();
    let id = app.spawn_sh("exit 4");
    app.until_state(id, "exited");
    let started = Instant::now();
    let answer = app.request(json!({"Wait": {"target": id, "timeout_secs": 600}}));
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(answer["Agent"]["state"], "exited");
    assert_eq!(answer["Agent"]["exit_code"], 4);
}

#[test]
fn wait_times_out_with_timed_out() {
    let app = App::start();
    let id = app.spawn_sh("echo busy; sleep 60");
    app.until_state(id, "working");
    let started = Instant::now();
    assert_eq!(
        app.request(json!({"Wait": {"target": id, "timeout_secs": 1}})),
        json!("TimedOut")
    );
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(5),
        "{took:?}"
    );
    assert_eq!(
        code(&app.request(json!({"Wait": {"target": id, "timeout_secs": 1801}}))),
        "invalid"
    );
    assert_eq!(
        code(&app.request(json!({"Wait": {"timeout_secs": 1}}))),
        "bad_request"
    );
    assert_eq!(
        code(&app.request(json!({"Wait": {"targets": []}}))),
        "invalid"
    );
    assert_eq!(
        code(&app.request(json!({"Wait": {"target": 4040}}))),
        "not_found"
    );
}

#[test]
fn wait_for_exit_ignores_an_idle_agent() {
    let app = App::start();
    let id = app.spawn_sh("krad report idle; read -r x; exit 0");
    app.until_state(id, "idle");
    assert_eq!(
        app.request(json!({"Wait": {"target": id, "for": "stop", "timeout_secs": 5}}))["Agent"]["state"],
        "idle"
    );
    assert_eq!(
        app.request(json!({"Wait": {"target": id, "for": "exit", "timeout_secs": 1}})),
        json!("TimedOut")
    );
    app.request(json!({"Send": {"target": id, "text": "x", "enter": true}}));
    let answer = app.request(json!({"Wait": {"target": id, "for": "exit", "timeout_secs": 30}}));
    assert_eq!(answer["Agent"]["state"], "exited");
}

#[test]
fn targets_with_any_and_all() {
    let app = App::start();
    let fast = app.spawn_sh("sleep 0.3");
    // It says it works: a program at a prompt that says nothing is idle.
    let slow = app.spawn_sh("krad report working; read -r x");
    app.until_state(slow, "working");
    let any =
        app.request(json!({"Wait": {"targets": [slow, fast], "until": "any", "timeout_secs": 30}}));
    let agents = any["Agents"].as_array().unwrap();
    assert_eq!(agents.len(), 2);
    assert_eq!(agents[0]["terminal"], slow);
    assert_eq!(agents[1]["state"], "exited");
    assert_eq!(
        app.request(json!({"Wait": {"targets": [slow, fast], "timeout_secs": 1}})),
        json!("TimedOut")
    );
    app.request(json!({"Send": {"target": slow, "text": "x", "enter": true}}));
    let all =
        app.request(json!({"Wait": {"targets": [slow, fast], "until": "all", "timeout_secs": 30}}));
    assert!(
        all["Agents"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["state"] == "exited"),
        "{all}"
    );
}

#[test]
fn a_thousand_waits_on_one_agent_are_all_released_when_it_stops() {
    let app = App::start();
    let id = app.spawn_sh("krad report working; read -r x; krad report idle -m released; sleep 60");
    app.until_state(id, "working");
    let line = {
        let mut l =
            serde_json::to_vec(&app.envelope(json!({"Wait": {"target": id, "timeout_secs": 120}})))
                .unwrap();
        l.push(b'\n');
        l
    };
    let mut waiters: Vec<TcpStream> = (0..1000)
        .map(|_| {
            let mut s = app.connect();
            s.write_all(&line).unwrap();
            s
        })
        .collect();
    let until = Instant::now() + Duration::from_secs(30);
    while app.request(json!("Stats"))["Stats"]["waits_pending"] != 1000 {
        assert!(Instant::now() < until, "{}", app.request(json!("Stats")));
        std::thread::sleep(Duration::from_millis(50));
    }
    app.request(json!({"Send": {"target": id, "text": "x", "enter": true}}));
    for waiter in &mut waiters {
        let answer: Value =
            serde_json::from_str(crate::support::read_all(waiter).trim_end()).unwrap();
        assert_eq!(answer["Agent"]["message"], "released");
    }
    assert_eq!(app.request(json!("Stats"))["Stats"]["waits_pending"], 0);
}

#[test]
fn a_client_leaving_cancels_its_wait() {
    let app = App::start();
    let id = app.spawn_sh("sleep 60");
    let mut waiter = app.connect();
    let mut line = serde_json::to_vec(&app.envelope(json!({"Wait": {"target": id}}))).unwrap();
    line.push(b'\n');
    waiter.write_all(&line).unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    while app.request(json!("Stats"))["Stats"]["waits_pending"] != 1 {
        assert!(Instant::now() < until);
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(waiter);
    while app.request(json!("Stats"))["Stats"]["waits_pending"] != 0 {
        assert!(Instant::now() < until, "the wait outlived its client");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn check_answers_now_or_on_the_next_change() {
    let app = App::start();
    let id = app.spawn_sh("krad report working; read -r x; krad report idle -m changed; sleep 60");
    let now = app.until_state(id, "working");
    let rev = now["rev"].as_u64().unwrap();
    // Unchanged: answered after wait_secs with the same record.
    let started = Instant::now();
    let same = app.request(json!({"Check": {"target": id, "wait_secs": 1}}))["Agent"].clone();
    assert!(started.elapsed() >= Duration::from_millis(900));
    assert_eq!(same["rev"], rev);
    // An older since_rev is answered at once.
    let at_once =
        app.request(json!({"Check": {"target": id, "wait_secs": 30, "since_rev": rev - 1}}));
    assert_eq!(at_once["Agent"]["rev"], rev);
    // A change ends the wait.
    let app_ref = &app;
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            app_ref.request(json!({"Check": {"target": id, "wait_secs": 30, "since_rev": rev}}))
        });
        std::thread::sleep(Duration::from_millis(200));
        app_ref.request(json!({"Send": {"target": id, "text": "x", "enter": true}}));
        let changed = waiter.join().unwrap()["Agent"].clone();
        assert!(changed["rev"].as_u64().unwrap() > rev);
    });
    assert_eq!(
        code(&app.request(json!({"Check": {"target": id, "wait_secs": 5000}}))),
        "invalid"
    );
}

#[test]
fn subscribe_sends_a_snapshot_then_every_change_in_rev_order() {
    let app = App::start();
    let first = app.spawn_sh("sleep 60");
    let mut stream = subscribe(&app, json!({}));
    let snapshot = next(&mut stream);
    let snapshot = &snapshot["Snapshot"];
    assert_eq!(snapshot["fresh"], true);
    assert_eq!(snapshot["agents"][0]["terminal"], first);
    let mut last_rev = snapshot["rev"].as_u64().unwrap();
    let second = app.spawn_sh("sleep 0.2; exit 2");
    let mut seen_exit = false;
    while !seen_exit {
        let message = next(&mut stream);
        let agent = &message["Agent"];
        let rev = agent["rev"].as_u64().unwrap();
        assert!(rev > last_rev, "rev went from {last_rev} to {rev}");
        last_rev = rev;
        assert_eq!(agent["terminal"], second);
        seen_exit = agent["state"] == "exited";
    }
    app.request(json!({"Close": {"target": second}}));
    let removed = next(&mut stream);
    assert_eq!(removed["Removed"]["terminal"], second);
    assert!(removed["Removed"]["rev"].as_u64().unwrap() > last_rev);
}

#[test]
fn a_subscriber_that_stops_reading_costs_no_memory_and_misses_no_final_state() {
    let app = App::start();
    let mut stalled = subscribe(&app, json!({}));
    next(&mut stalled); // the snapshot; then it stops reading
    // Ten agents, each reporting a thousand times: 10,000 changes.
    let script = "i=0; while [ $i -lt 1000 ]; do krad report working -m \"step $i\" >/dev/null; i=$((i+1)); done; krad report idle -m final";
    let before = app.rss_kib();
    let ids: Vec<u64> = (0..10)
        .map(|_| app.spawn_sh(&format!("{script}; sleep 60")))
        .collect();
    for &id in &ids {
        app.until(id, Duration::from_secs(180), |r| r["message"] == "final");
    }
    let after = app.rss_kib();
    assert!(
        after < before + 20 * 1024,
        "the app grew from {before} KiB to {after} KiB"
    );
    // Now it reads: every agent's final state is there.
    let mut finals = std::collections::BTreeMap::new();
    while finals.len() < ids.len() || finals.values().any(|m: &Value| m != "final") {
        let message = next(&mut stalled);
        if let Some(agent) = message.get("Agent") {
            finals.insert(
                agent["terminal"].as_u64().unwrap(),
                agent["message"].clone(),
            );
        }
    }
    assert_eq!(finals.keys().copied().collect::<Vec<_>>(), ids);
}

#[test]
fn resume_with_since_rev_gets_only_what_changed() {
    let app = App::start();
    let a = app.spawn_sh("sleep 60");
    let b = app.spawn_sh("read -r x; krad report idle -m moved; sleep 60");
    let mut stream = subscribe(&app, json!({}));
    let rev = next(&mut stream)["Snapshot"]["rev"].as_u64().unwrap();
    drop(stream);
    app.request(json!({"Send": {"target": b, "text": "x", "enter": true}}));
    app.until(b, Duration::from_secs(10), |r| r["message"] == "moved");
    app.request(json!({"Close": {"target": a}}));
    let mut stream = subscribe(&app, json!({"since_rev": rev}));
    let snapshot = next(&mut stream)["Snapshot"].clone();
    assert_eq!(snapshot["fresh"], false, "{snapshot}");
    let agents: Vec<u64> = snapshot["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["terminal"].as_u64().unwrap())
        .collect();
    assert_eq!(agents, vec![b]);
    assert_eq!(snapshot["removed"][0]["terminal"], a);
    // A rev the app cannot account for gets the whole state, fresh.
    let mut stream = subscribe(&app, json!({"since_rev": 999_999_999}));
    assert_eq!(next(&mut stream)["Snapshot"]["fresh"], true);
}

#[test]
fn subscribers_hear_shutting_down_and_heartbeats_are_counted() {
    let mut app = App::start();
    let mut stream = subscribe(&app, json!({"environment": "main"}));
    next(&mut stream);
    assert_eq!(app.request(json!("Stats"))["Stats"]["subscribers"], 1);
    assert_eq!(
        code(&app.request(json!({"SubscribeAgents": {"environment": "nope"}}))),
        "not_found"
    );
    assert_eq!(app.request(json!("Shutdown")), json!("Ok"));
    assert_eq!(next(&mut stream), json!("ShuttingDown"));
    app.wait_exit(Duration::from_secs(15));
}

#[test]
fn a_quiet_stream_sends_a_heartbeat_every_15_s() {
    let app = App::start();
    let mut stream = subscribe(&app, json!({}));
    let rev = next(&mut stream)["Snapshot"]["rev"].clone();
    let started = Instant::now();
    let heartbeat = next(&mut stream);
    assert_eq!(heartbeat, json!({"Heartbeat": {"rev": rev}}));
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(14) && took < Duration::from_secs(20),
        "{took:?}"
    );
}

/// Issue 16: List, Check and the stream's agents are spliced from each record's
/// JSON kept since its last change. The bytes on the wire must be exactly what
/// serializing the typed answer gives (same fields, same order, same escapes),
/// and must follow every change of the record.
#[test]
fn list_check_and_stream_agents_are_the_typed_records_byte_for_byte() {
    use krad_bus::protocol::{Response, StreamMessage};
    use std::io::Read;

    let app = App::start();
    let raw = |request: Value| -> Vec<u8> {
        let mut stream = app.connect();
        let mut line = serde_json::to_vec(&app.envelope(request)).unwrap();
        line.push(b'\n');
        stream.write_all(&line).unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).unwrap();
        answer
    };
    let retyped = |line: &[u8]| serde_json::from_slice::<Response>(line).unwrap().to_line();
    let message = "say \"hi\" \\ ✳ tab\there";
    let first = app.spawn_sh("sleep 60");
    let second = app.spawn_sh(&format!(
        "krad report idle -m '{message}' >/dev/null; sleep 60"
    ));
    let mut stream = subscribe(&app, json!({}));
    let mut snapshot = String::new();
    stream.read_line(&mut snapshot).unwrap();
    let typed: StreamMessage = serde_json::from_str(&snapshot).unwrap();
    assert_eq!(typed.to_line(), snapshot.as_bytes());

    app.until(second, Duration::from_secs(30), |r| r["message"] == message);
    let list = raw(json!("List"));
    assert_eq!(retyped(&list), list);
    let agents: Value = serde_json::from_slice(&list).unwrap();
    assert_eq!(agents["Agents"][0]["terminal"], first);
    assert_eq!(
        agents["Agents"][1]["message"], message,
        "List follows changes"
    );
    let check = raw(json!({"Check": {"target": second}}));
    assert_eq!(retyped(&check), check);
    let checked: Value = serde_json::from_slice(&check).unwrap();
    assert_eq!(checked["Agent"], agents["Agents"][1]);
    let filtered = raw(json!({"List": {"environment": "main"}}));
    assert_eq!(filtered, list);

    // Check with wait_secs answers the change after `since_rev`.
    let rev = checked["Agent"]["rev"].as_u64().unwrap();
    let waited = std::thread::scope(|s| {
        let waiter = s
            .spawn(|| raw(json!({"Check": {"target": second, "wait_secs": 60, "since_rev": rev}})));
        app.request(json!({"Rename": {"target": second, "name": "renamed-b"}}));
        waiter.join().unwrap()
    });
    assert_eq!(retyped(&waited), waited);
    let waited: Value = serde_json::from_slice(&waited).unwrap();
    assert!(waited["Agent"]["rev"].as_u64().unwrap() > rev);
    assert_eq!(waited["Agent"]["name"], "renamed-b");

    // The stream's agent lines, up to the rename.
    loop {
        let mut line = String::new();
        stream.read_line(&mut line).unwrap();
        let typed: StreamMessage = serde_json::from_str(&line).unwrap();
        assert_eq!(typed.to_line(), line.as_bytes());
        if let StreamMessage::Agent(agent) = typed
            && agent.name.as_deref() == Some("renamed-b")
        {
            break;
        }
    }
}

/// Issue 48: `krad wait 4 --timeout 2s` and `krad send 19 hello --when-idle`
/// both said "the app did not finish within the request's deadline
/// (TimedOut)". The first says where the agent is; the second that nothing
/// was typed.
#[test]
fn a_cli_timeout_says_where_the_agent_is_and_that_nothing_was_typed() {
    let app = App::start();
    let id =
        app.spawn_sh("krad report working -m 'running tests'; read x; echo \"got $x\"; sleep 60");
    app.until(id, Duration::from_secs(20), |r| {
        r["message"] == "running tests"
    });
    let target = id.to_string();
    let waited = app.krad(&["wait", &target, "--timeout", "1s"]);
    assert_eq!(crate::support::exit_code(&waited), 5);
    let said = crate::support::stderr(&waited);
    assert!(
        said.contains(&format!(
            "terminal {id} is working (\"running tests\") after 1 s"
        )),
        "{said}"
    );
    assert!(!said.contains("TimedOut"), "{said}");
    let sent = app.krad(&[
        "send",
        &target,
        "hello",
        "--enter",
        "--when-idle",
        "--timeout",
        "1s",
    ]);
    assert_eq!(crate::support::exit_code(&sent), 5);
    let said = crate::support::stderr(&sent);
    assert!(said.contains("nothing was typed"), "{said}");
    assert!(
        said.contains(&format!("terminal {id} is working")),
        "{said}"
    );
    let output = app.request(json!({"Output": {"target": id}}));
    assert!(
        !output["Output"]["screen"]
            .as_str()
            .unwrap_or("")
            .contains("got hello"),
        "{output}"
    );
}

/// Issue 48: `--when-idle` was capped at 10 s, useless for turns of minutes:
/// it now waits for the turn to end (up to --timeout) and says so.
#[test]
fn send_when_idle_waits_for_a_turn_longer_than_10_s() {
    let app = App::start();
    let id = app.spawn_sh(
        "krad report working -m turn; sleep 12; krad report idle -m done; read x; echo \"got $x\"; sleep 60",
    );
    app.until(id, Duration::from_secs(20), |r| r["message"] == "turn");
    let sent = app.krad(&["send", &id.to_string(), "hello", "--enter", "--when-idle"]);
    assert_eq!(
        crate::support::exit_code(&sent),
        0,
        "{}",
        crate::support::stderr(&sent)
    );
    let said = crate::support::stdout(&sent);
    assert!(said.contains("once its turn ended, after"), "{said}");
    app.until_screen(id, "got hello");
}

/// Issue 48: `krad code` and `krad wait` were silent for up to minutes. On a
/// terminal they show a one-line live status; nothing extra when piped.
#[test]
fn wait_and_code_show_a_live_status_on_a_terminal_only() {
    let app = App::start();
    let id = app.spawn_sh("krad report working -m busy; sleep 60");
    app.until(id, Duration::from_secs(20), |r| r["message"] == "busy");
    let pty = crate::attach::Pty::open_sized(Some((100, 30)));
    let mut child = pty.krad(&app, &["wait", &id.to_string(), "--timeout", "3s"]);
    pty.until(&format!("krad wait: {id} working"));
    assert_eq!(child.wait().unwrap().code(), Some(5));
    let mut child = pty.krad(&app, &["code", "--", "sh", "-c", "sleep 2; echo done"]);
    pty.until("krad code: running `sh -c sleep 2; echo done` in main");
    assert_eq!(child.wait().unwrap().code(), Some(0));
    pty.until("done");
    // Piped: the output is the program's alone.
    let out = app.krad(&["code", "--", "sh", "-c", "sleep 1; echo piped"]);
    assert_eq!(crate::support::stdout(&out), "piped\n");
    assert!(!crate::support::stderr(&out).contains("krad code:"));
    let out = app.krad(&["wait", &id.to_string(), "--timeout", "1s"]);
    assert!(!crate::support::stderr(&out).contains("krad wait:"));
}

/// Writes a Claude Code transcript worth $0.002 and reports it (idle), then,
/// once `$1/go` exists, adds $0.004 more to it without a word: the cost
/// changes, the agent's state does not.
pub(crate) const SPENDER: &str = r#"printf '%s\n' '{"type":"assistant","message":{"id":"msg_1","model":"test-model","usage":{"input_tokens":1000,"output_tokens":0}}}' > "$1/t.jsonl"
krad raw "{\"Report\":{\"state\":\"idle\",\"message\":\"spent\",\"transcript\":\"$1/t.jsonl\"}}" > /dev/null
while [ ! -e "$1/go" ]; do sleep 0.1; done
printf '%s\n' '{"type":"assistant","message":{"id":"msg_2","model":"test-model","usage":{"input_tokens":2000,"output_tokens":0}}}' >> "$1/t.jsonl"
while :; do sleep 1; done"#;

/// What the sampler writes in place (CPU, memory, tokens: no change, no new
/// rev) reaches a subscriber in a `Sampled` line: the agent's cost goes up
/// while its state and rev stay, the line carries it with the rev of the
/// stream's last change, the revs of the other lines still only go up, and
/// there is at most one such line per sample (every 2 s).
#[test]
fn a_sample_reaches_the_stream_in_a_line_of_its_own_without_a_new_rev() {
    let dir = tempfile::tempdir().unwrap();
    let app = app_with_first_commit(
        &[("README", b"hi")],
        Some("[prices.test-model]\ninput = 2.0\noutput = 10.0\n"),
    );
    let folder = dir.path().display().to_string();
    let id = app.spawn(json!({"profile": "exec", "name": "spender",
        "command": ["sh", "-c", SPENDER, "sh", folder]}))["terminal"]
        .as_u64()
        .unwrap();
    let before = app.until(id, Duration::from_secs(30), |r| {
        r["state"] == "idle" && r["tokens"]["cost_usd"] == 0.002
    });
    let mut stream = subscribe(&app, json!({}));
    stream
        .get_ref()
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let snapshot = next(&mut stream);
    let mut last_rev = snapshot["Snapshot"]["rev"].as_u64().unwrap();
    std::fs::write(dir.path().join("go"), "").unwrap();
    let started = Instant::now();
    let mut sampled_lines = 0u32;
    loop {
        let mut raw = String::new();
        stream.read_line(&mut raw).unwrap();
        let typed: krad_bus::protocol::StreamMessage = serde_json::from_str(&raw).unwrap();
        assert_eq!(
            typed.to_line(),
            raw.as_bytes(),
            "the typed message, byte for byte"
        );
        let line: Value = serde_json::from_str(&raw).unwrap();
        for rev in [&line["Agent"]["rev"], &line["Removed"]["rev"]] {
            if let Some(rev) = rev.as_u64() {
                assert!(rev > last_rev, "{raw}");
                last_rev = rev;
            }
        }
        if let Some(sampled) = line.get("Sampled") {
            sampled_lines += 1;
            assert_eq!(sampled["rev"], last_rev, "{raw}");
            let mine = sampled["agents"]
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["terminal"] == id)
                .cloned();
            if let Some(mine) = mine
                && mine["tokens"]["cost_usd"] == 0.006
            {
                assert_eq!(mine["tokens"]["input"], 3000, "{raw}");
                break;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no Sampled line with the new cost"
        );
    }
    let seconds = started.elapsed().as_secs_f64();
    assert!(
        f64::from(sampled_lines) <= seconds / 2.0 + 2.0,
        "{sampled_lines} Sampled lines in {seconds:.1} s"
    );
    let after = app.record(id);
    assert_eq!(after["tokens"]["cost_usd"], 0.006, "{after}");
    assert_eq!(after["state"], "idle", "{after}");
    assert_eq!(
        after["rev"], before["rev"],
        "a sample is no change: {after}"
    );
}
