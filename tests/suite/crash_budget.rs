//! Crash torture of budgets and costs (issue 49, item 2; budgets are issue
//! 38's): SIGKILLs while agents spend — a RunVariants group with a cost
//! limit and a terminal with its own — and while budget stops are made, on
//! the PTY host and on the tmux host. This file owns that test.
//!
//! A round: a RunVariants of 2 with `max_group_cost_usd` and a Spawn with
//! `max_cost_usd` (limits drawn per round), each with its `request_id`; each
//! agent appends a Claude Code transcript line worth $0.002 every 100 ms and
//! names it in a Report, 40 times. A sampler reads List and Environments all
//! the while. The app is killed after a seeded random 0–1.5 s or, every
//! other round, dies at `budget-stop` (an agent interrupted at its limit, not
//! yet held). Violations, by kind:
//!
//! * `start` — the app did not start again, or did not answer;
//! * `held` — an agent seen held by its budget before the kill (`asking`,
//!   `state_source` `budget`) that lives on is not held right after the
//!   restart, or a live agent at or past its own limit (`max_cost_usd`) is
//!   not held within 15 s of the restart: a stop in flight at the kill is
//!   made, and kept;
//! * `group-limit` — the same for a group's limit (RunVariants'
//!   `max_group_cost_usd`, kept with the group's record);
//! * `went-back` — a terminal's cost after the restart below what was seen
//!   before the kill;
//! * `total-back` — an environment's or a group's total right after the
//!   restart below what was seen before the kill (each kept terminal's
//!   tokens are written through when they change);
//! * `replay` — an id sent once more did not get its first answer, replayed;
//! * `failed` — an error answer to a valid request.
//!
//! 4 rounds per host by default (CI); by hand:
//! `KRAD_TORTURE_ROUNDS=100 cargo test -p krad-cli --test suite crash_budget:: -- --nocapture`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{App, Launch, git, git_repo};
use crate::tmux::{TMUX, TmuxServer};
use crate::torture::{
    self, Outcome, Tally, eventually, next_random, normal, replayed, send, with_id,
};

const KINDS: &[&str] = &[
    "start",
    "held",
    "group-limit",
    "went-back",
    "total-back",
    "replay",
    "failed",
];

/// $0.002 per line at these prices.
const PRICES: &str = "[prices.test-model]\ninput = 2.0\noutput = 10.0\n";

/// Spends $0.002 every 100 ms, 40 times, naming its transcript in a Report;
/// an interrupt shows on its screen and does not stop it.
const AGENT: &str = r#"trap 'echo got-interrupted' INT
t="$PWD/t-$KRAD_ADE_TERMINAL.jsonl"; n=0
while [ $n -lt 40 ]; do n=$((n+1))
printf '%s\n' "{\"type\":\"assistant\",\"message\":{\"id\":\"msg_$n\",\"model\":\"test-model\",\"usage\":{\"input_tokens\":1000,\"output_tokens\":0}}}" >> "$t"
krad raw "{\"Report\":{\"state\":\"working\",\"message\":\"spent $n\",\"transcript\":\"$t\"}}" > /dev/null
sleep 0.1; done
while :; do sleep 1; done"#;

#[test]
fn budget_crash_torture_on_the_pty_host() {
    torture("budgets, pty host", "", 0);
}

#[test]
fn budget_crash_torture_on_the_tmux_host() {
    torture("budgets, tmux host", TMUX, 1);
}

/// The most each thing was seen to cost, and the agents seen held.
#[derive(Default, Clone)]
struct Seen {
    terminals: BTreeMap<u64, f64>,
    environments: BTreeMap<String, f64>,
    groups: BTreeMap<String, f64>,
    held: Vec<u64>,
}

impl Seen {
    fn take(&mut self, agents: &[Value], environments: &[Value]) {
        for a in agents {
            let id = a["terminal"].as_u64().unwrap_or_default();
            if let Some(cost) = a["tokens"]["cost_usd"].as_f64() {
                let most = self.terminals.entry(id).or_default();
                *most = most.max(cost);
            }
            if a["state_source"] == "budget" && a["state"] == "asking" && !self.held.contains(&id) {
                self.held.push(id);
            }
        }
        let mut groups: BTreeMap<String, f64> = BTreeMap::new();
        for e in environments {
            let Some(cost) = e["tokens"]["cost_usd"].as_f64() else {
                continue;
            };
            let name = e["name"].as_str().unwrap_or_default().to_owned();
            let most = self.environments.entry(name).or_default();
            *most = most.max(cost);
            if let Some(group) = e["group"].as_str() {
                *groups.entry(group.to_owned()).or_default() += cost;
            }
        }
        for (group, cost) in groups {
            let most = self.groups.entry(group).or_default();
            *most = most.max(cost);
        }
    }
}

/// What List and Environments answer now, if the app answers.
fn look(
    endpoint: std::net::SocketAddr,
    list: &Value,
    envs: &Value,
) -> Option<(Vec<Value>, Vec<Value>)> {
    let agents = send(endpoint, list).answer()?["Agents"].as_array()?.clone();
    let environments = send(endpoint, envs).answer()?["Environments"]
        .as_array()?
        .clone();
    Some((agents, environments))
}

fn torture(what: &str, host: &'static str, stream: u64) {
    let _alone = crate::support::loading_the_machine();
    let (rounds, seed) = torture::rounds_and_seed(what, 4);
    let mut random = seed.wrapping_add(stream);
    let mut tally = Tally::new(what, KINDS);
    let config = format!("{PRICES}{host}");
    let dir = tempfile::tempdir().unwrap();
    let repo = git_repo(dir.path());
    std::fs::write(repo.join("README"), "spend\n").unwrap();
    std::fs::write(repo.join(".gitignore"), "t-*.jsonl\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    let mut app = App::launch(Launch {
        config: Some(&config),
        reuse: Some(dir),
        ..Launch::default()
    });
    // tmux: a terminal that lives through the rounds names the server to end.
    let server = host
        .contains("tmux")
        .then(|| TmuxServer::of(&app, app.spawn_sh("exec sleep 86400")));
    for r in 1..=rounds {
        let aim = r
            .is_multiple_of(2)
            .then(|| format!("budget-stop:{}", 1 + next_random(&mut random) % 3));
        if aim.is_some() {
            match torture::relaunch(app, &config, aim.clone()) {
                Ok(next) => app = next,
                Err(why) => {
                    tally.violation("start", r, format!("no start: {why}"));
                    break;
                }
            }
        }
        // Limits: a group of 2 reaches $0.004–$0.024 in 0.2–1.2 s; a
        // terminal its $0.002–$0.012 in as long.
        let group_limit = 0.004 + 0.002 * (next_random(&mut random) % 11) as f64;
        let own_limit = 0.002 + 0.002 * (next_random(&mut random) % 6) as f64;
        let delay = next_random(&mut random) % 1501;
        match one_round(
            app,
            r,
            &config,
            &mut tally,
            (aim.as_deref(), delay),
            (group_limit, own_limit),
        ) {
            Some(next) => app = next,
            None => break,
        }
    }
    drop(server);
    tally.finish(seed);
}

fn one_round(
    mut app: App,
    r: usize,
    config: &str,
    tally: &mut Tally,
    (aim, delay): (Option<&str>, u64),
    (group_limit, own_limit): (f64, f64),
) -> Option<App> {
    let group = format!("r{r}-g");
    let requests = [
        (
            format!("r{r}-variants"),
            json!({"RunVariants": {"count": 2, "name": group, "profile": "exec",
                "command": ["sh", "-c", AGENT, "sh"], "prompt": "spend",
                "max_group_cost_usd": group_limit}}),
        ),
        (
            format!("r{r}-spawn"),
            json!({"Spawn": {"profile": "exec", "name": format!("r{r}-own"),
                "command": ["sh", "-c", AGENT], "max_cost_usd": own_limit}}),
        ),
    ];
    let endpoint = app.endpoint;
    let (list, envs) = (
        app.envelope(json!("List")),
        app.envelope(json!("Environments")),
    );
    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (seen, stop) = (seen.clone(), stop.clone());
        let (list, envs) = (list.clone(), envs.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                if let Some((agents, environments)) = look(endpoint, &list, &envs) {
                    seen.lock().unwrap().take(&agents, &environments);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let lanes: Vec<_> = requests
        .iter()
        .map(|(id, body)| {
            let envelope = with_id(&app, body, id);
            std::thread::spawn(move || send(endpoint, &envelope))
        })
        .collect();
    let aimed_hit = torture::await_aim(&mut app, aim, Duration::from_secs(5), delay);
    // The last look before the kill (the sampler's may be 20 ms old).
    if let Some((agents, environments)) = look(endpoint, &list, &envs) {
        seen.lock().unwrap().take(&agents, &environments);
    }
    torture::kill(&mut app);
    stop.store(true, Ordering::SeqCst);
    sampler.join().unwrap();
    tally.killed(if aimed_hit { aim } else { None });
    let firsts: Vec<Outcome> = lanes.into_iter().map(|t| t.join().unwrap()).collect();
    let before = seen.lock().unwrap().clone();
    let how = aim.filter(|_| aimed_hit).unwrap_or("at random");
    println!(
        "round {r}: killed {how} (delay {delay} ms); limits ${group_limit:.3} (group), \
         ${own_limit:.3} (own); held before: {:?}",
        before.held
    );
    let app = match torture::relaunch(app, config, None) {
        Ok(app) => app,
        Err(why) => {
            tally.violation("start", r, format!("no start after the kill: {why}"));
            return None;
        }
    };
    let Some((agents, environments)) = look(
        app.endpoint,
        &app.envelope(json!("List")),
        &app.envelope(json!("Environments")),
    ) else {
        tally.violation("start", r, "List failed after the restart".into());
        return None;
    };
    // Held before, held now (if it lives on).
    for id in &before.held {
        let Some(now) = agents.iter().find(|a| a["terminal"] == *id) else {
            continue;
        };
        if now["state"] == "exited" {
            continue;
        }
        let held = now["state"] == "asking" && now["state_source"] == "budget";
        tally.expect(
            "held",
            r,
            held,
            format!("terminal {id} was held; now {now}"),
        );
    }
    // Nothing went back.
    let mut after = Seen::default();
    after.take(&agents, &environments);
    for (id, cost) in &before.terminals {
        let now = after.terminals.get(id).copied();
        let ok = agents.iter().all(|a| a["terminal"] != *id) || now.is_some_and(|c| c >= *cost);
        tally.expect(
            "went-back",
            r,
            ok,
            format!("terminal {id}: ${cost} before, {now:?} after"),
        );
    }
    for (name, cost) in &before.environments {
        let now = after.environments.get(name).copied();
        let ok = now.is_some_and(|c| c >= *cost);
        tally.expect(
            "total-back",
            r,
            ok,
            format!("environment {name}: ${cost} before, {now:?} after"),
        );
    }
    for (name, cost) in &before.groups {
        let now = after.groups.get(name).copied();
        let ok = now.is_some_and(|c| c >= *cost - 1e-9);
        tally.expect(
            "total-back",
            r,
            ok,
            format!("group {name}: ${cost} before, {now:?} after"),
        );
    }
    // Retries and repeats.
    for ((id, body), first) in requests.iter().zip(&firsts) {
        let answer = match first {
            Outcome::Answered(answer) => answer.clone(),
            _ => match send(app.endpoint, &with_id(&app, body, id)) {
                Outcome::Answered(answer) => answer,
                _ => {
                    tally.violation("start", r, format!("{id}: no answer"));
                    return None;
                }
            },
        };
        let ok = answer.get("Error").is_none() && answer != "TimedOut";
        tally.expect("failed", r, ok, format!("{id}: {answer}"));
        let again = send(app.endpoint, &with_id(&app, body, id));
        let again = again.answer().cloned().unwrap_or_default();
        let same = replayed(&again) && normal(&again) == normal(&answer);
        tally.expect("replay", r, same, format!("{id}: {answer}, then {again}"));
    }
    // Every live agent at or past a limit is held (a stop in flight at the
    // kill is made by the next app), once its spending is over.
    let ours =
        |a: &Value| a["group"] == group.as_str() || a["name"] == format!("r{r}-own").as_str();
    let spent = |a: &Value| a["message"].as_str().is_some_and(|m| m != "spent 40");
    eventually(Duration::from_secs(30), || {
        torture::list(&app).is_some_and(|all| {
            all.iter()
                .filter(|a| ours(a) && a["state"] != "exited")
                .all(|a| !spent(a) || a["state_source"] == "budget")
        })
    });
    for (kind, grouped) in [("held", false), ("group-limit", true)] {
        let mut last = Vec::new();
        let all_held = eventually(Duration::from_secs(15), || {
            let Some(all) = torture::list(&app) else {
                return false;
            };
            let group_cost: f64 = (all.iter())
                .filter(|a| a["group"] == group.as_str())
                .filter_map(|a| a["tokens"]["cost_usd"].as_f64())
                .sum();
            last = (all.iter())
                .filter(|a| ours(a) && a["state"] != "exited")
                .filter(|a| a["group"].is_string() == grouped)
                .filter(|a| {
                    let cost = a["tokens"]["cost_usd"].as_f64().unwrap_or_default();
                    let (spent, limit) = if grouped {
                        (group_cost, group_limit)
                    } else {
                        (cost, own_limit)
                    };
                    spent >= limit - 1e-9
                })
                .filter(|a| !(a["state"] == "asking" && a["state_source"] == "budget"))
                .map(brief)
                .collect();
            last.is_empty()
        });
        let what = format!("past their limit and not held: {last:?}");
        tally.expect(kind, r, all_held, what);
    }
    // The round's agents and worktrees go.
    for a in torture::list(&app)?.iter().filter(|a| ours(a)) {
        app.request(json!({"Close": {"target": a["terminal"]}}));
    }
    for n in 1..=2 {
        app.request(json!({"Close": {"environment": format!("{group}-{n}"), "force": true}}));
    }
    Some(app)
}

/// A record in short: what the checks look at.
fn brief(a: &Value) -> Value {
    json!({"terminal": a["terminal"], "group": a["group"], "state": a["state"],
        "state_source": a["state_source"], "message": a["message"],
        "cost_usd": a["tokens"]["cost_usd"], "max_cost_usd": a["max_cost_usd"]})
}
