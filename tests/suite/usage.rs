//! Issue 38, what each agent costs the machine: CPU and resident memory of
//! each terminal's whole process tree, sampled every 2 s, in List, Check,
//! `krad ls` and `krad top`, without a new rev per sample.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{App, exit_code, stderr, stdout};

/// The records of List once every one of `ids` has a sample whose
/// `sampled_at` differs from `after` (none: any sample).
fn sampled(app: &App, ids: &[u64], after: Option<&Value>) -> Vec<Value> {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let agents = app.request(json!("List"))["Agents"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let ready = ids.iter().all(|id| {
            agents.iter().any(|a| {
                a["terminal"] == *id
                    && a["usage"]["sampled_at"].is_string()
                    && after.is_none_or(|was| a["usage"]["sampled_at"] != *was)
            })
        });
        if ready {
            return agents;
        }
        assert!(Instant::now() < until, "no fresh sample: {agents:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn of(agents: &[Value], id: u64) -> Value {
    agents
        .iter()
        .find(|a| a["terminal"] == id)
        .cloned()
        .unwrap_or(Value::Null)
}

#[test]
fn each_terminal_s_cpu_and_memory_are_its_whole_tree_s_and_change_without_a_rev() {
    let app = App::start();
    let busy = app.spawn_sh("while :; do :; done");
    let quiet = app.spawn_sh("exec sleep 600");
    // Three processes: the shell and two sleeps.
    let tree = app.spawn_sh("sleep 600 & sleep 600 & wait");
    let ids = [busy, quiet, tree];
    let first = sampled(&app, &ids, None);
    // The second sample has a period to measure the CPU over.
    let agents = sampled(&app, &ids, Some(&of(&first, busy)["usage"]["sampled_at"]));
    let usage = |id| of(&agents, id)["usage"].clone();
    // How much a busy loop gets depends on the machine's load: more than a
    // sleeping program, and not nothing.
    let cpu = |id| usage(id)["cpu_percent"].as_f64().unwrap();
    assert!(cpu(busy) > 1.0 && cpu(busy) > cpu(quiet), "{agents:?}");
    assert!(cpu(quiet) < 5.0, "{agents:?}");
    assert_eq!(usage(tree)["processes"], 3, "{agents:?}");
    assert_eq!(usage(quiet)["processes"], 1, "{agents:?}");
    for id in ids {
        assert!(usage(id)["rss_bytes"].as_u64().unwrap() > 0, "{agents:?}");
    }
    // A sample is not a change: the records keep their revs, so neither
    // Wait nor a SubscribeAgents stream hears of it.
    let later = sampled(&app, &ids, Some(&usage(quiet)["sampled_at"]));
    for id in ids {
        assert_eq!(of(&later, id)["rev"], of(&agents, id)["rev"], "{later:?}");
    }
    let checked = app.record(quiet);
    assert!(
        checked["usage"]["rss_bytes"].as_u64().unwrap() > 0,
        "{checked}"
    );

    // `krad ls` shows them; `krad top` puts the busy one first.
    let out = app.krad(&["ls"]);
    assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
    let table = stdout(&out);
    assert!(table.lines().next().unwrap().contains("CPU  "), "{table}");
    assert!(table.contains("MiB") || table.contains("KiB"), "{table}");
    let out = app.krad(&["top", "--once"]);
    assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
    let top = stdout(&out);
    let first_row = top.lines().nth(1).unwrap_or_default();
    assert!(first_row.starts_with(&format!("{busy} ")), "{top}");
    let out = app.krad(&["top", "--once", "--sort", "mem", "--limit", "1", "--json"]);
    assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(listed["Agents"][0]["usage"].is_object(), "{listed}");
    let out = app.krad(&["top", "--sort", "disk"]);
    assert_eq!(exit_code(&out), 2, "{}", stderr(&out));
}

/// A terminal on an SSH host, in tmux there: sampled through the link.
#[test]
fn a_host_terminal_s_usage_is_sampled_through_the_link() {
    let sshd = crate::ssh::Sshd::start();
    let (app, _remote) = crate::ssh::app_with_host_configured(&sshd, "", "");
    let created = app.request(json!({"CreateWorktree": {"name": "far-u", "host": "far"}}));
    assert!(created["Environment"].is_object(), "{created}");
    let busy = app.spawn(json!({"profile": "exec", "environment": "far-u",
        "command": ["sh", "-c", "while :; do :; done"]}))["terminal"]
        .as_u64()
        .unwrap();
    let first = sampled(&app, &[busy], None);
    let agents = sampled(
        &app,
        &[busy],
        Some(&of(&first, busy)["usage"]["sampled_at"]),
    );
    let usage = of(&agents, busy)["usage"].clone();
    assert!(usage["cpu_percent"].as_f64().unwrap() > 1.0, "{usage}");
    // The pane's runner, the launcher's shell and the loop's.
    assert!(usage["processes"].as_u64().unwrap() >= 2, "{usage}");
    assert!(usage["rss_bytes"].as_u64().unwrap() > 0, "{usage}");
}
