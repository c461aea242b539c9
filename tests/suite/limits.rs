//! Issue 38, `[limits]`: a Spawn, RunVariants or Send that would pass
//! max_terminals, max_working or min_free_memory_mib is answered `busy`
//! (retryable, saying which limit and when to try again) and starts nothing;
//! `memory_max_mib` puts each terminal in a cgroup v2 where that is
//! delegated, and is refused saying why where it is not.

use serde_json::{Value, json};

use crate::support::{App, code, exit_code, stderr};

/// A `busy` answer for `limit`, retryable, with when to try again.
fn assert_busy(answer: &Value, limit: &str) {
    assert_eq!(code(answer), "busy", "{answer}");
    assert_eq!(answer["Error"]["retryable"], true, "{answer}");
    assert_eq!(answer["Error"]["detail"]["limit"], limit, "{answer}");
    assert!(
        answer["Error"]["detail"]["retry_after_secs"]
            .as_u64()
            .unwrap()
            > 0,
        "{answer}"
    );
}

fn agents(app: &App) -> usize {
    app.request(json!("List"))["Agents"]
        .as_array()
        .map_or(0, Vec::len)
}

#[test]
fn max_terminals_refuses_a_spawn_or_variants_beyond_it_and_takes_one_once_there_is_room() {
    let app = App::start_config("[limits]\nmax_terminals = 2\n");
    let one = app.spawn_sh("exec sleep 600");
    app.spawn_sh("exec sleep 600");
    let refused = app
        .request(json!({"Spawn": {"profile": "exec", "command": ["sh", "-c", "exec sleep 600"]}}));
    assert_busy(&refused, "max_terminals");
    assert_eq!(refused["Error"]["detail"]["live"], 2);
    assert_eq!(agents(&app), 2, "nothing was started");
    // RunVariants makes room for all of its variants, or starts none.
    let variants = app.request(json!({"RunVariants": {"count": 2, "prompt": "x",
        "profile": "exec", "command": ["sh", "-c", "exec sleep 600"]}}));
    assert_busy(&variants, "max_terminals");
    let environments = app.request(json!("Environments"))["Environments"].clone();
    assert_eq!(
        environments.as_array().map_or(0, Vec::len),
        1,
        "{environments}"
    );
    // The CLI says which limit, exit 1.
    let out = app.krad(&["spawn", "--profile", "exec", "--", "sleep", "1"]);
    assert_eq!(exit_code(&out), 1, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("max_terminals = 2"),
        "{}",
        stderr(&out)
    );
    // Room again once one is closed.
    assert_eq!(app.request(json!({"Close": {"target": one}})), json!("Ok"));
    let again = app
        .request(json!({"Spawn": {"profile": "exec", "command": ["sh", "-c", "exec sleep 600"]}}));
    assert!(again["Agent"].is_object(), "{again}");
}

#[test]
fn max_working_refuses_a_spawn_or_a_send_that_would_start_one_more() {
    let app = App::start_config("[limits]\nmax_working = 2\n");
    let busy = app.spawn_sh("krad report working; exec sleep 600");
    app.until_state(busy, "working");
    let done = app.spawn_sh("krad report idle -m done; exec cat");
    app.until_state(done, "idle");
    let other = app.spawn_sh("krad report working; exec sleep 600");
    app.until_state(other, "working");
    let refused = app
        .request(json!({"Spawn": {"profile": "exec", "command": ["sh", "-c", "exec sleep 600"]}}));
    assert_busy(&refused, "max_working");
    // A Send to the idle agent would set it working: refused, nothing typed.
    let sent = app.request(json!({"Send": {"target": done, "text": "more work", "enter": true}}));
    assert_busy(&sent, "max_working");
    let screen = app.request(json!({"Output": {"target": done}}))["Output"]["screen"].clone();
    assert!(
        !screen.as_str().unwrap_or_default().contains("more work"),
        "{screen}"
    );
    // A Send to an agent already working is not one more.
    let sent = app.request(json!({"Send": {"target": busy, "text": "x"}}));
    assert!(sent["Sent"].is_object(), "{sent}");
}

#[test]
fn min_free_memory_refuses_a_spawn_saying_how_much_is_free() {
    // More than any machine here has: always below the floor.
    let app = App::start_config("[limits]\nmin_free_memory_mib = 1000000000\n");
    let refused = app
        .request(json!({"Spawn": {"profile": "exec", "command": ["sh", "-c", "exec sleep 600"]}}));
    assert_busy(&refused, "min_free_memory_mib");
    let message = refused["Error"]["message"].as_str().unwrap();
    assert!(message.contains("MiB of memory available"), "{message}");
    assert!(
        refused["Error"]["detail"]["free_mib"].as_u64().unwrap() > 0,
        "{refused}"
    );
    assert_eq!(agents(&app), 0);
}

#[test]
fn memory_max_is_applied_where_cgroup_v2_is_delegated_and_refused_saying_why_where_not() {
    let app = App::start_config("[limits]\nmemory_max_mib = 256\n");
    // `krad api` says whether this machine delegates cgroup v2, and why not.
    let hello: Value = serde_json::from_str(&app.krad_ok(&["api", "--json"])).unwrap();
    let memory = hello["Hello"]["memory_limits"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let plain = app.krad_ok(&["api"]);
    assert!(
        plain.contains(&format!("memory limits per terminal: {memory}")),
        "{plain}"
    );
    let doctor: Value = serde_json::from_str(&app.krad_ok(&["doctor", "--json"])).unwrap();
    assert_eq!(doctor["memory_limits"], memory.as_str(), "{doctor}");
    let spawned = app
        .request(json!({"Spawn": {"profile": "exec", "command": ["sh", "-c", "exec sleep 600"]}}));
    if let Some(why) = memory.strip_prefix("unavailable: ") {
        // This machine (cgroup v1 or hybrid): refused, saying why and what to do.
        assert_eq!(code(&spawned), "invalid", "{spawned}");
        let message = spawned["Error"]["message"].as_str().unwrap();
        assert!(message.contains("memory_max_mib = 256"), "{message}");
        assert!(message.contains(why), "{message}");
        assert!(message.contains("Delegate=yes"), "{message}");
        assert_eq!(agents(&app), 0, "nothing was started");
        let out = app.krad(&["spawn", "--profile", "exec", "--", "sleep", "1"]);
        assert_eq!(exit_code(&out), 2, "{}", stderr(&out));
        assert!(stderr(&out).contains("cgroup"), "{}", stderr(&out));
    } else {
        // Delegated: the terminal's process is in its own cgroup, limited.
        assert!(memory.starts_with("cgroup v2, delegated"), "{memory}");
        let pid = spawned["Agent"]["pid"].as_u64().unwrap();
        let id = spawned["Agent"]["terminal"].as_u64().unwrap();
        let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        let path = cgroup.lines().find_map(|l| l.strip_prefix("0::")).unwrap();
        assert!(path.ends_with(&format!("krad-terminal-{id}")), "{cgroup}");
        let max = std::fs::read_to_string(format!("/sys/fs/cgroup{path}/memory.max")).unwrap();
        assert_eq!(max.trim(), (256u64 << 20).to_string());
    }
}

#[test]
fn a_profile_memory_limit_applies_to_that_profile_only() {
    let app = App::start_config(
        "[profiles.small]\ncommand = [\"sh\", \"-c\", \"exec sleep 600\"]\nmemory_max_mib = 64\n",
    );
    let hello: Value = serde_json::from_str(&app.krad_ok(&["api", "--json"])).unwrap();
    let memory = hello["Hello"]["memory_limits"].as_str().unwrap_or_default();
    let small = app.request(json!({"Spawn": {"profile": "small"}}));
    let other = app
        .request(json!({"Spawn": {"profile": "exec", "command": ["sh", "-c", "exec sleep 600"]}}));
    assert!(
        other["Agent"].is_object(),
        "no limit on another profile: {other}"
    );
    if memory.starts_with("unavailable") {
        assert_eq!(code(&small), "invalid", "{small}");
        let message = small["Error"]["message"].as_str().unwrap();
        assert!(message.contains("memory_max_mib = 64"), "{message}");
        assert_eq!(agents(&app), 1);
    } else {
        let pid = small["Agent"]["pid"].as_u64().unwrap();
        let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        assert!(cgroup.contains("krad-terminal-"), "{cgroup}");
    }
}
