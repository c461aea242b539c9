//! Crash torture of contained agents (issue 49, item 2; the sandbox is issue
//! 39's): SIGKILLs while contained terminals are set up and while traffic
//! goes through their network, with `network = "none"` (odd rounds) and
//! `"allow"` (even rounds: the proxy and a relayed loopback address), on the
//! PTY host and on the tmux host. This file owns that test.
//!
//! A round: a talker, contained, made in calm — it calls the bus in a loop
//! (`none`) or fetches from an allowed server through the proxy and the
//! relay in a loop (`allow`) — then a storm of three contained Spawns, each
//! with its `request_id`. The app is killed after a seeded random 0–300 ms
//! or, every other round, dies at an aimed point (`KRAD_CRASH_AT`:
//! `sandbox-set-up`, `spawn-before-program`, `spawn-started`, and with
//! `allow` `sandbox-proxy-traffic`, at a random visit). The next app starts;
//! unanswered Spawns are sent again, every one once more; then every
//! terminal is closed. Violations, by kind:
//!
//! * `start` — the app did not start again, or did not answer;
//! * `leftover` — 20 s after the restart (and after the Closes) a bubblewrap
//!   process, a private home, a network folder (`<id>.net`, its proxy
//!   socket) or an inbound folder (`<id>.in`) of a terminal that no live
//!   record owns;
//! * `bus` — a contained terminal kept in tmux does not hear a Send and
//!   report back through the bus within 30 s of the restart, or (`allow`)
//!   does not reach its allowed server through the proxy again;
//! * `lost` — an acknowledged Spawn's terminal on record nowhere;
//! * `twice` — two terminals carry one Spawn;
//! * `replay` — an id sent once more did not get its first answer, replayed;
//! * `failed` — an error answer to a valid request.
//!
//! 4 rounds per host by default (CI); by hand:
//! `KRAD_TORTURE_ROUNDS=100 cargo test -p krad-cli --test suite crash_sandbox:: -- --nocapture`.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{App, Launch, code, git, git_repo};
use crate::tmux::{TMUX, TmuxServer};
use crate::torture::{
    self, Outcome, Tally, eventually, next_random, normal, replayed, send, with_id,
};

const KINDS: &[&str] = &[
    "start", "leftover", "bus", "lost", "twice", "replay", "failed",
];

/// Contained Spawns per round's storm.
const SPAWNS: usize = 3;

/// What the allowed server answers.
const BODY: &str = "FROM-ALLOWED";

#[test]
fn sandbox_crash_torture_on_the_pty_host() {
    torture("sandbox, pty host", "", 0);
}

#[test]
fn sandbox_crash_torture_on_the_tmux_host() {
    torture("sandbox, tmux host", TMUX, 1);
}

fn config_of(round: usize, port: u16, host: &str) -> String {
    let network = if round.is_multiple_of(2) {
        format!("network = \"allow\"\nallow = [\"127.0.0.1:{port}\"]\n")
    } else {
        "network = \"none\"\n".to_owned()
    };
    format!("[sandbox]\nprofiles = [\"exec\"]\n{network}{host}")
}

/// The talker's program: it answers each line it reads through the bus
/// (with what the allowed server said, under `allow`), and meanwhile keeps
/// the bus (`none`) or the proxy and the relay (`allow`) busy.
fn talker(allow: bool, port: u16) -> String {
    let url = format!("http://127.0.0.1:{port}/");
    let (traffic, fetch) = if allow {
        (
            format!(
                "curl -s --max-time 5 --noproxy '' -x \"$HTTP_PROXY\" {url} >/dev/null; \
                 curl -s --max-time 5 {url} >/dev/null"
            ),
            format!("$(curl -s --max-time 10 --noproxy '' -x \"$HTTP_PROXY\" {url})"),
        )
    } else {
        ("krad api >/dev/null 2>&1".to_owned(), String::new())
    };
    format!(
        "(while :; do {traffic}; sleep 0.1; done) & \
         krad report idle -m ready; \
         while read line; do krad report idle -m \"heard $line {fetch}\"; done"
    )
}

fn torture(what: &str, host: &'static str, stream: u64) {
    let _alone = crate::support::loading_the_machine();
    let (rounds, seed) = torture::rounds_and_seed(what, 4);
    let mut random = seed.wrapping_add(stream);
    let mut tally = Tally::new(what, KINDS);
    let (port, _taken) = crate::sandbox_net::http_server(BODY);
    let dir = tempfile::tempdir().unwrap();
    let repo = git_repo(dir.path());
    std::fs::write(repo.join("README"), "box\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    let mut app = App::launch(Launch {
        config: Some(&config_of(1, port, host)),
        reuse: Some(dir),
        ..Launch::default()
    });
    let mut server: Option<TmuxServer> = None;
    for r in 1..=rounds {
        let allow = r.is_multiple_of(2);
        let config = config_of(r, port, host);
        // Every round starts an app of its own config; every other one aimed.
        let aim = (r % 4 >= 2).then(|| {
            let mut points = vec![
                ("sandbox-set-up", 2..5),
                ("spawn-before-program", 2..5),
                ("spawn-started", 2..5),
            ];
            if allow {
                points.push(("sandbox-proxy-traffic", 1..30));
            }
            let (point, visits) = points[next_random(&mut random) as usize % points.len()].clone();
            let visit = visits.start + next_random(&mut random) % (visits.end - visits.start);
            format!("{point}:{visit}")
        });
        if r > 1 || aim.is_some() {
            match torture::relaunch(app, &config, aim.clone()) {
                Ok(next) => app = next,
                Err(why) => {
                    tally.violation("start", r, format!("no start: {why}"));
                    break;
                }
            }
        }
        let delay = next_random(&mut random) % 301;
        let Some(next) = one_round(
            app,
            r,
            &config,
            port,
            &mut tally,
            aim.as_deref(),
            delay,
            &mut server,
        ) else {
            break;
        };
        app = next;
    }
    drop(server);
    tally.finish(seed);
}

#[allow(clippy::too_many_arguments)]
fn one_round(
    mut app: App,
    r: usize,
    config: &str,
    port: u16,
    tally: &mut Tally,
    aim: Option<&str>,
    delay: u64,
    server: &mut Option<TmuxServer>,
) -> Option<App> {
    let allow = r.is_multiple_of(2);
    // Calm: the talker.
    let talker_id = app.spawn(json!({"profile": "exec", "name": format!("r{r}-talker"),
        "command": ["sh", "-c", talker(allow, port)]}))["terminal"]
        .as_u64()
        .unwrap();
    if config.contains("tmux") && server.is_none() {
        *server = Some(TmuxServer::of(&app, talker_id));
    }
    if !torture::died(&mut app) {
        eventually(Duration::from_secs(30), || {
            torture::send(
                app.endpoint,
                &app.envelope(json!({"Check": {"target": talker_id}})),
            )
            .answer()
            .is_some_and(|a| a["Agent"]["message"] == "ready")
        });
    }
    // The storm.
    let ids: Vec<String> = (1..=SPAWNS).map(|k| format!("r{r}-s{k}")).collect();
    let bodies: Vec<Value> = ids
        .iter()
        .map(|id| {
            json!({"Spawn": {"profile": "exec", "name": id,
                "command": ["sh", "-c", talker(allow, port)]}})
        })
        .collect();
    let envelopes: Vec<Value> = (ids.iter().zip(&bodies))
        .map(|(id, body)| with_id(&app, body, id))
        .collect();
    let endpoint = app.endpoint;
    let storm = torture::lane(endpoint, envelopes.into_iter().map(|e| (e, 0)).collect());
    let aimed_hit = torture::await_aim(&mut app, aim, Duration::from_secs(3), delay);
    torture::kill(&mut app);
    tally.killed(if aimed_hit { aim } else { None });
    let mut firsts = storm.join().unwrap();
    firsts.resize(SPAWNS, Outcome::Unsent);
    let lost: Vec<&String> = (ids.iter().zip(&firsts))
        .filter(|(_, o)| matches!(o, Outcome::Lost))
        .map(|(id, _)| id)
        .collect();
    let how = aim.filter(|_| aimed_hit).unwrap_or("at random");
    println!("round {r}: killed {how} (delay {delay} ms); in flight: {lost:?}");
    let folder = app.dir.path().to_path_buf();
    let app = match torture::relaunch(app, config, None) {
        Ok(app) => app,
        Err(why) => {
            tally.violation("start", r, format!("no start after the kill: {why}"));
            return None;
        }
    };
    let Some(agents) = torture::list(&app) else {
        tally.violation("start", r, "List failed after the restart".into());
        return None;
    };
    for (id, first) in ids.iter().zip(&firsts) {
        if let Some(answer) = first.answer() {
            let terminal = &answer["Agent"]["terminal"];
            let there = agents.iter().any(|a| a["terminal"] == *terminal);
            tally.expect(
                "lost",
                r,
                there,
                format!("{id}: terminal {terminal} not on record"),
            );
        }
    }
    check_leftovers(&app, &folder, r, tally, "after the restart");
    // Every kept contained terminal reaches the bus (and its allowlist).
    for agent in torture::list(&app)?
        .iter()
        .filter(|a| a["state"] != "exited")
    {
        let id = agent["terminal"].as_u64().unwrap();
        let sent = app.request(json!({"Send": {"target": id, "text": "ping", "enter": true}}));
        let expected = if allow {
            format!("heard ping {BODY}")
        } else {
            "heard ping ".into()
        };
        let heard = sent["Sent"].is_object()
            && eventually(Duration::from_secs(30), || {
                app.request(json!({"Check": {"target": id}}))["Agent"]["message"] == expected
            });
        let record = app.request(json!({"Check": {"target": id}}));
        tally.expect(
            "bus",
            r,
            heard,
            format!("terminal {id}: {sent}; now {record}"),
        );
    }
    // Retries, then every id once more.
    let mut answers: Vec<Value> = Vec::new();
    for ((id, body), first) in ids.iter().zip(&bodies).zip(&firsts) {
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
        tally.expect(
            "failed",
            r,
            answer["Agent"].is_object(),
            format!("{id}: {answer}"),
        );
        let again = send(app.endpoint, &with_id(&app, body, id));
        let again = again.answer().cloned().unwrap_or_default();
        let same = replayed(&again) && normal(&again) == normal(&answer);
        tally.expect("replay", r, same, format!("{id}: {answer}, then {again}"));
        answers.push(answer);
    }
    let agents = torture::list(&app)?;
    for id in &ids {
        let carriers = agents.iter().filter(|a| a["name"] == *id.as_str()).count();
        tally.expect(
            "twice",
            r,
            carriers <= 1,
            format!("{id}: {carriers} terminals"),
        );
    }
    // Everything closed: nothing of any sandbox is left.
    for agent in &agents {
        let closed = app.request(json!({"Close": {"target": agent["terminal"]}}));
        let what = format!("Close {}: {closed}", agent["terminal"]);
        tally.expect(
            "failed",
            r,
            closed == "Ok" || code(&closed) == "not_found",
            what,
        );
    }
    check_leftovers(&app, &folder, r, tally, "after the Closes");
    Some(app)
}

/// Within 20 s: no bubblewrap naming the app's folder and no folder of
/// `<state dir>/sandbox/` but those of terminals on record and not exited.
fn check_leftovers(app: &App, folder: &Path, r: usize, tally: &mut Tally, when: &str) {
    let sandbox = folder.join("repo/.git/krad/sandbox");
    let prefix = format!("{}/", sandbox.display());
    let mut found = Vec::new();
    let clean = eventually(Duration::from_secs(20), || {
        let live: Vec<u64> = torture::list(app)
            .unwrap_or_default()
            .iter()
            .filter(|a| a["state"] != "exited")
            .filter_map(|a| a["terminal"].as_u64())
            .collect();
        found.clear();
        for (pid, line) in torture::processes_naming(&prefix) {
            let bwrap = line.split(' ').next().is_some_and(|p| p.ends_with("bwrap"));
            let owner = line
                .split(' ')
                .find_map(|arg| arg.strip_prefix(&prefix)?.parse::<u64>().ok());
            if bwrap && !owner.is_some_and(|id| live.contains(&id)) {
                found.push(format!("bubblewrap {pid} of terminal {owner:?}"));
            }
        }
        for entry in std::fs::read_dir(&sandbox).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let id = name.split('.').next().and_then(|n| n.parse::<u64>().ok());
            if let Some(id) = id
                && !live.contains(&id)
            {
                found.push(format!("{}", entry.path().display()));
            }
        }
        found.is_empty()
    });
    tally.expect("leftover", r, clean, format!("{when}: {found:?}"));
}
