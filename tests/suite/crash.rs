//! Crash-consistency torture (contract section 8, at-most-once). This file owns
//! the test that SIGKILLs the app inside a storm of mutations, each with its own
//! `request_id`, restarts it on the same repository, sends every request whose
//! answer was lost again with its id, and checks what must then hold — on the
//! PTY host and on the tmux host.
//!
//! A round's storm is four lanes, each sending in order until an answer is lost:
//! two Spawns; CreateWorktree, Close of it; RunVariants (2 variants: one commits
//! its file, one leaves it uncommitted); PickVariant merge, PickVariant squash,
//! Close of the picked variant, on a group a storm left ready (or one made in
//! calm); and on the tmux host, where terminals outlive the kill, an Ask from
//! a terminal kept for the whole run (a permission for the round's own tool call,
//! decided by its 1 s timeout: a retry gets the decision kept, or asks again),
//! and a train of Reports from another (working, asking, idle in turn, each
//! with its own message).
//! After a seeded random 0–300 ms the app is frozen (SIGSTOP), its child
//! processes noted, and it is SIGKILLed; once those (git) ended by themselves the
//! app starts again. Then every unanswered request is retried, every request is
//! sent once more, and the world is checked. Violations, by kind:
//!
//! * `start` — the app did not start after the kill, List failed, or a request
//!   got no answer from the restarted app;
//! * `git-mid-op` — once List answers after the restart, or at the end of the
//!   round: `.git/MERGE_HEAD`, `.git/SQUASH_MSG`, a worktree's `MERGE_HEAD`, or
//!   anything in main's `git status` (only picks touch main; the harness then
//!   cleans it, so that rounds stay apart);
//! * `retry-refused` — a request in flight at the kill answered its retry with
//!   `conflict` or `not_found`: each name belongs to one request and picks touch
//!   main one at a time, so only its own first attempt can have done that;
//! * `twice` — a program of a Spawn or a variant ran twice (each appends a line
//!   to a trace file outside the repository), or two terminals carry its marker;
//! * `replay` — an id sent once more did not get the same answer, `replayed`
//!   (an Ask is not at-most-once by its id but by its tool call: sent again, it
//!   gets the same decision, not marked `replayed`);
//! * `report-lost` — the reporting terminal's state and message after the
//!   restart are not those of the last Report answered `"Ok"` before the kill
//!   (or of the one then in flight, which may have landed): an acknowledged
//!   Report is never forgotten, and none is made up;
//! * `went-back` — a record after the restart with a rev not above every rev
//!   answered before the kill, or a terminal made after the restart with an id
//!   not above every id answered before it (ids are never reused);
//! * `failed` — any other error (every request of the storm is valid).
//!
//! 6 rounds per host by default (CI); a long run by hand:
//! `KRAD_TORTURE_ROUNDS=200 cargo test -p krad-cli --test suite crash:: -- --nocapture`.
//! The seed is printed; `KRAD_TORTURE_SEED=<n>` draws the same kill delays again.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{App, Launch, code, git, git_repo};
use crate::tmux::{TMUX, TmuxServer};
use crate::torture::{self, Outcome, env_or, next_random, normal, send};

/// Reports per round on the tmux host: enough that kills land among them.
const REPORTS: usize = 40;
/// Sends per round on the tmux host, after the Close of a terminal.
const SENDS: usize = 20;

const KINDS: &str =
    "start git-mid-op retry-refused twice replay report-lost send-lost went-back failed";

#[test]
fn crash_torture_on_the_pty_host() {
    torture("pty host", None, 0);
}

#[test]
fn crash_torture_on_the_tmux_host() {
    torture("tmux host", Some(TMUX), 1);
}

struct Req {
    id: String,
    body: Value,
    first: Outcome,
    /// The terminal sending it (with its token), or Client.
    from: Option<u64>,
}

impl Req {
    /// Whether a repeat is answered from the request log (`replayed`): an Ask
    /// is the same ask again by its tool call instead, and a Report (not
    /// at-most-once) is simply made again.
    fn replays(&self) -> bool {
        self.body.get("Ask").is_none() && self.body.get("Report").is_none()
    }
}

#[derive(Default)]
struct Torture {
    host: &'static str,
    config: Option<&'static str>,
    app: Option<App>,
    trace: PathBuf,
    /// Groups whose two variants finished their work, not picked yet.
    ready: Vec<String>,
    /// The highest rev and terminal id answered so far.
    highest: (u64, u64),
    /// The terminal that asks (tmux host: it outlives the kills).
    asker: Option<u64>,
    /// The terminal that reports (tmux host), and the (state, message) of
    /// its last Report answered `"Ok"`.
    reporter: Option<u64>,
    reported: Option<(String, String)>,
    /// The terminal that takes Sends (tmux host: it outlives the kills), and
    /// the file it appends what it reads to.
    listener: Option<u64>,
    sends: PathBuf,
    counts: BTreeMap<&'static str, usize>,
}

fn torture(host: &'static str, config: Option<&'static str>, stream: u64) {
    // Its kills and restarts load the machine: not beside the latency bounds.
    let _alone = crate::support::loading_the_machine();
    let rounds: usize = env_or("KRAD_TORTURE_ROUNDS", 6);
    let clock = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    let seed = env_or("KRAD_TORTURE_SEED", clock.unwrap().subsec_nanos() as u64);
    println!("crash torture, {host}: {rounds} rounds, KRAD_TORTURE_SEED={seed}");
    let mut state = seed.wrapping_add(stream);
    let dir = tempfile::tempdir().unwrap();
    let repo = git_repo(dir.path());
    // The config is committed: main's `git status` shows only what picks did.
    std::fs::create_dir_all(repo.join(".krad")).unwrap();
    std::fs::write(repo.join(".krad/config.toml"), config.unwrap_or("")).unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    let trace = dir.path().join("trace");
    let sends = dir.path().join("sends");
    let app = launch(config, dir);
    // tmux: a terminal that lives through the rounds names the server to end,
    // and asks.
    let asker = config.map(|_| app.spawn_sh("sleep 86400"));
    let reporter = config.map(|_| app.spawn_sh("sleep 86400"));
    let listener = config.map(|_| app.spawn_sh(&format!("cat >> '{}'", sends.display())));
    let _server = asker.map(|id| TmuxServer::of(&app, id));
    let app = Some(app);
    let mut t = Torture {
        host,
        config,
        app,
        trace,
        asker,
        reporter,
        listener,
        sends,
        ..Torture::default()
    };
    let started = Instant::now();
    for round in 1..=rounds {
        if !t.round(round, next_random(&mut state) % 301) {
            break;
        }
    }
    let took = started.elapsed();
    println!("\n{host}, KRAD_TORTURE_SEED={seed}, {rounds} rounds in {took:.1?}");
    // Not a violation: a git killed with its lock (an agent's, or one of the
    // app's) left it, and the app removed it (see krad-app's git::stale_lock).
    let log = t.app.as_ref().map(App::log).unwrap_or_default();
    let removed = log.matches("a git that was killed left it").count();
    println!("  git locks left behind and removed by the app: {removed}");
    println!("  {:<14} count", "violation");
    for kind in KINDS.split(' ') {
        println!("  {kind:<14} {}", t.counts.get(kind).unwrap_or(&0));
    }
    assert!(t.counts.is_empty(), "violations on the {host}; see above");
}

impl Torture {
    fn app(&self) -> &App {
        self.app.as_ref().unwrap()
    }

    /// Notes the revs and terminal ids an answer shows.
    fn note(&mut self, answer: &Value) {
        let agent = &answer["Agent"];
        let variants = answer["Variants"]["variants"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let ids = variants
            .iter()
            .map(|v| &v["terminal"])
            .chain([&agent["terminal"]]);
        for id in ids.filter_map(Value::as_u64) {
            self.highest.1 = self.highest.1.max(id);
        }
        if let Some(rev) = agent["rev"].as_u64() {
            self.highest.0 = self.highest.0.max(rev);
        }
    }

    fn violation(&mut self, kind: &'static str, round: usize, what: String) {
        println!("VIOLATION {kind} [{}, round {round}] {what}", self.host);
        if what.contains(".lock': File exists") {
            // Who holds git's lock (or that nobody does: it was left behind).
            let ps = std::process::Command::new("sh")
                .args(["-c", "ps -eo pid,ppid,pgid,stat,etime,args | grep '[g]it '"])
                .output();
            let ps = ps.map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
            println!("  git processes now:\n{}", ps.unwrap_or_default());
        }
        *self.counts.entry(kind).or_default() += 1;
    }

    /// One round; false when the app cannot go on.
    fn round(&mut self, r: usize, delay_ms: u64) -> bool {
        let mut lanes = self.storm(r);
        let endpoint = self.app().endpoint;
        // Every other round with an Answer, the kill is aimed at it: it lands
        // 0–2 ms after the Answer was written.
        let (answering, answered) = std::sync::mpsc::channel();
        let aimed = self.asker.is_some() && r.is_multiple_of(2);
        let threads: Vec<_> = (lanes.iter())
            .map(|lane| lane.iter().map(|q| self.envelope(q)).collect::<Vec<_>>())
            .map(|lane| {
                let answering = answering.clone();
                std::thread::spawn(move || run_lane(endpoint, lane, answering))
            })
            .collect();
        let delay = Duration::from_millis(delay_ms);
        if aimed && answered.recv_timeout(delay).is_ok() {
            std::thread::sleep(Duration::from_micros(delay_ms % 3 * 1000));
        } else if !aimed {
            std::thread::sleep(delay);
        }
        self.kill();
        for (lane, thread) in lanes.iter_mut().zip(threads) {
            for (q, (outcome, request)) in lane.iter_mut().zip(thread.join().unwrap()) {
                q.first = outcome;
                q.body = request;
            }
        }
        let mut requests: Vec<Req> = lanes.into_iter().flatten().collect();
        // An Answer whose ask never showed before the kill has nothing to answer.
        requests.retain(|q| !q.body["Answer"]["ask"].as_str().is_some_and(asks_of));
        let lost: Vec<&str> = (requests.iter())
            .filter(|q| matches!(q.first, Outcome::Lost))
            .map(|q| q.id.as_str())
            .collect();
        println!("round {r}: killed after {delay_ms} ms; in flight: {lost:?}");
        for q in &requests {
            if let Outcome::Answered(answer) = &q.first {
                self.note(answer);
            }
        }
        let before = self.highest;
        if !self.restart(r) {
            return false;
        }
        for agent in self.list() {
            let (rev, id) = (agent["rev"].as_u64(), agent["terminal"].clone());
            if rev.is_none_or(|rev| rev <= before.0) {
                let what = format!(
                    "terminal {id} has rev {rev:?} after the restart; {} before",
                    before.0
                );
                self.violation("went-back", r, what);
            }
        }
        self.check_reports(r, &requests);
        let after_restart = self.git_leftovers();
        // Retry what was not answered (same id, in lane order), and judge.
        let mut answers = Vec::new();
        for q in &requests {
            let answer = match &q.first {
                Outcome::Answered(answer) => answer.clone(),
                _ => match self.ask(r, q, "retry") {
                    Some(answer) => answer,
                    None => return false,
                },
            };
            let fresh = !matches!(q.first, Outcome::Answered(_));
            let made = answer["Agent"]["terminal"].as_u64();
            if fresh && answer["Agent"]["replayed"] != true && made.is_some_and(|id| id <= before.1)
            {
                let what = format!(
                    "{} made terminal {made:?} after the restart; {} before",
                    q.id, before.1
                );
                self.violation("went-back", r, what);
            }
            self.note(&answer);
            let retried = matches!(q.first, Outcome::Lost);
            // An Answer retried after the ask's timeout decided it: its
            // conflict is the truth (the ask was not its to decide any more).
            let timed_out = |q: &Req, answers: &[Value]| {
                q.body.get("Answer").is_some()
                    && answers.iter().any(|a| a["Answered"]["by"] == "timeout")
            };
            if retried && code(&answer) == "conflict" && timed_out(q, &answers) {
            } else if retried && matches!(code(&answer), "conflict" | "not_found") {
                let what = format!("{} (in flight at the kill) retried: {answer}", q.id);
                self.violation("retry-refused", r, what);
            } else if retried && q.body.get("Send").is_some() && may_have_reached(&answer) {
                // Documented: a Send cut by a crash is not sent again.
            } else if answer.get("Error").is_some() || answer == "TimedOut" {
                let when = match q.first {
                    Outcome::Answered(_) => "answered before the kill",
                    Outcome::Lost => "in flight at the kill, retried",
                    Outcome::Unsent => "sent after the restart",
                };
                self.violation("failed", r, format!("{} ({when}): {answer}", q.id));
            }
            answers.push(answer);
        }
        // Every id once more: the same answer, replayed (retryable answers are
        // not kept, so they are left out).
        for (q, answer) in requests.iter().zip(&answers) {
            if answer == "TimedOut" || answer["Error"]["retryable"] == true {
                continue;
            }
            let Some(again) = self.ask(r, q, "repeat") else {
                return false;
            };
            let inner = again.as_object().and_then(|o| o.values().next());
            let marked = inner.is_some_and(|v| v["replayed"] == true);
            if marked != q.replays() || normal(&again) != normal(answer) {
                let what = format!("{} answered {answer}, then {again}", q.id);
                self.violation("replay", r, what);
            }
        }
        self.check_runs(r, &requests);
        self.check_sends(r, &requests, &answers);
        let at_end = self.git_leftovers();
        if !after_restart.is_empty() || !at_end.is_empty() {
            let what = format!("after the restart {after_restart:?}, at the end {at_end:?}");
            self.violation("git-mid-op", r, what);
            // Main back to its HEAD, so that the next round's checks are its own.
            let repo = self.app().dir.path().join("repo");
            git(&repo, &["reset", "-q", "--hard", "HEAD"]);
            git(&repo, &["clean", "-q", "-f", "-d"]);
            let _ = std::fs::remove_file(repo.join(".git/SQUASH_MSG"));
        }
        true
    }

    /// The requests of round `r`, in lanes.
    fn storm(&mut self, r: usize) -> Vec<Vec<Req>> {
        let trace = self.trace.display();
        let req = |label: &str, body: Value| {
            let (id, first) = (format!("r{r}-{label}"), Outcome::Unsent);
            let from = None;
            Req {
                id,
                body,
                first,
                from,
            }
        };
        let spawn = |label: &str| {
            let script = format!("echo 'spawn:r{r}-{label};' >> '{trace}'");
            let body = json!({"Spawn": {"profile": "exec", "command": ["sh", "-c", script]}});
            req(label, body)
        };
        let (wt, group) = (format!("r{r}-wt"), format!("r{r}-g"));
        let close_wt = json!({"Close": {"environment": wt, "force": true}});
        let mut lanes = vec![
            vec![spawn("spawn-1"), spawn("spawn-2")],
            vec![
                req("create", json!({"CreateWorktree": {"name": wt}})),
                req("close-wt", close_wt),
            ],
            vec![req("variants", self.run_variants(&group))],
        ];
        if let Some(asker) = self.asker {
            let ask = json!({"Ask": {"kind": "permission",
                "tool": {"name": "Bash", "input": {"command": format!("echo r{r}")}},
                "tool_call_id": format!("r{r}-call"), "expires_in_secs": 1}});
            let mut ask = req("ask", ask);
            ask.from = Some(asker);
            lanes.push(vec![ask]);
            // The Answer to it, once it shows in Asks (see `run_lane`).
            let answer = json!({"Answer": {"ask": format!("{ASK_OF}{asker}"),
                "answer": {"option": "allow"}}});
            lanes.push(vec![req("answer", answer)]);
        }
        if let Some(reporter) = self.reporter {
            let report = |n: usize, state: &str| {
                let body = json!({"Report": {"state": state, "message": format!("r{r}-{n}")}});
                let mut report = req(&format!("report-{n}"), body);
                report.from = Some(reporter);
                report
            };
            let states = ["working", "asking", "idle"];
            lanes.push((1..=REPORTS).map(|n| report(n, states[n % 3])).collect());
        }
        if let Some(listener) = self.listener {
            // The Close of a terminal made in calm, and Sends to one that lives on.
            let closee = self.app().spawn_sh("sleep 86400");
            let send = |n: usize| {
                let text = format!("<r{r}-send-{n}>");
                let send = json!({"Send": {"target": listener, "text": text, "enter": true}});
                req(&format!("send-{n}"), send)
            };
            let close = req("close-term", json!({"Close": {"target": closee}}));
            lanes.push(
                std::iter::once(close)
                    .chain((1..=SENDS).map(send))
                    .collect(),
            );
        }
        if self.ready.is_empty() {
            // A group to pick from, made in calm, when the storms left none.
            let calm = format!("r{r}-calm");
            let answer = self.app().request(self.run_variants(&calm));
            let variants = answer["Variants"]["variants"].as_array();
            let variants = variants
                .unwrap_or_else(|| panic!("{calm}: {answer}"))
                .iter();
            self.wait_exit(variants.map(|v| v["terminal"].clone()).collect());
            self.ready.push(calm);
        }
        if let Some(g) = self.ready.pop() {
            let pick = |how: &str, n: u32, others: bool| {
                json!({"PickVariant": {"group": g, "variant": n, "how": how,
                    "close_others": others}})
            };
            let close = json!({"Close": {"environment": format!("{g}-2"), "force": true}});
            lanes.push(vec![
                req("pick-merge", pick("merge", 1, false)),
                req("pick-squash", pick("squash", 2, true)),
                req("close-picked", close),
            ]);
        }
        lanes
    }

    /// RunVariants of two variants: the first commits its file, the second
    /// leaves it uncommitted; each notes in the trace that it ran to its end.
    fn run_variants(&self, group: &str) -> Value {
        let variant = format!(
            "e=$KRAD_ADE_ENVIRONMENT; echo $e > out-$e.txt; \
             case $e in *-1) git add -A && git commit -qm $e;; esac; \
             echo \"variant:$e;\" >> '{}'",
            self.trace.display()
        );
        json!({"RunVariants": {"count": 2, "name": group, "profile": "exec",
            "command": ["sh", "-c", variant, "sh"], "prompt": "torture"}})
    }

    /// Sends a request (with its id) to the running app.
    fn ask(&mut self, r: usize, q: &Req, what: &str) -> Option<Value> {
        if let Outcome::Answered(answer) = send(self.app().endpoint, &self.envelope(q)) {
            return Some(answer);
        }
        self.violation("start", r, format!("{}: no answer to its {what}", q.id));
        None
    }

    fn envelope(&self, q: &Req) -> Value {
        let mut envelope = self.app().envelope(q.body.clone());
        envelope["request_id"] = json!(q.id);
        if let Some(terminal) = q.from {
            envelope["from"] = json!({"Terminal": {"environment": "main", "terminal": terminal}});
            envelope["token"] = json!(self.token_of(terminal));
        }
        envelope
    }

    /// A terminal's token now, from the file its program was told of (a
    /// restarted app writes the new one there).
    fn token_of(&self, terminal: u64) -> String {
        let record = self.app().record(terminal);
        let pid = record["pid"].as_u64().unwrap_or_else(|| panic!("{record}"));
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
        let file = environ
            .split(|b| *b == 0)
            .find_map(|v| v.strip_prefix(b"KRAD_ADE_TOKEN_FILE="))
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_else(|| panic!("terminal {terminal} has no token file"));
        std::fs::read_to_string(file).unwrap().trim().to_owned()
    }

    /// Kills the app (see [`torture::kill`]).
    fn kill(&mut self) {
        torture::kill(self.app.as_mut().unwrap());
    }

    /// Starts the app again on the same repository; false if it does not start
    /// or List fails.
    fn restart(&mut self, r: usize) -> bool {
        let dir = self.app.take().unwrap().stop_keep_dir();
        let config = self.config;
        match std::panic::catch_unwind(move || launch(config, dir)) {
            Ok(app) => self.app = Some(app),
            Err(e) => {
                let why = e.downcast_ref::<String>().cloned().unwrap_or_default();
                self.violation("start", r, format!("no start after the kill: {why}"));
                return false;
            }
        }
        let list = send(self.app().endpoint, &self.app().envelope(json!("List")));
        if matches!(&list, Outcome::Answered(answer) if answer["Agents"].is_array()) {
            return true;
        }
        self.violation("start", r, "List failed after the restart".into());
        false
    }

    /// Right after the restart, before any retry: the reporter shows its last
    /// Report answered before the kill, or the one then in flight.
    fn check_reports(&mut self, r: usize, requests: &[Req]) {
        let Some(reporter) = self.reporter else {
            return;
        };
        let said = |q: &Req| {
            let report = &q.body["Report"];
            let field = |name: &str| report[name].as_str().unwrap_or_default().to_owned();
            (field("state"), field("message"))
        };
        let reports = requests.iter().filter(|q| q.body.get("Report").is_some());
        let mut allowed: Vec<(String, String)> = Vec::new();
        for q in reports {
            match &q.first {
                Outcome::Answered(answer) if answer == "Ok" => {
                    allowed.clear();
                    self.reported = Some(said(q));
                }
                Outcome::Lost => allowed.push(said(q)),
                _ => {}
            }
        }
        allowed.extend(self.reported.clone());
        let record = self.app().record(reporter);
        let field = |name: &str| record[name].as_str().unwrap_or_default().to_owned();
        let now = (field("state"), field("message"));
        // No Report was ever answered `"Ok"` and the ones in flight may all be
        // lost: then the terminal may still show what it showed before any
        // Report — whatever its state, with no message (every Report sent here
        // carries one).
        let none_landed = self.reported.is_none() && now.1.is_empty();
        if !allowed.is_empty() && !allowed.contains(&now) && !none_landed {
            let what = format!("terminal {reporter} shows {now:?}; allowed {allowed:?}");
            self.violation("report-lost", r, what);
        }
        // What the retries will make it, so that the next round starts known.
        if let Some(last) = requests
            .iter()
            .rev()
            .find(|q| q.body.get("Report").is_some())
        {
            self.reported = Some(said(last));
        }
    }

    /// Once the storm's programs ended: none ran twice, no request made two
    /// terminals; the round's group is ready to pick once both variants
    /// finished their work (else it is closed).
    fn check_runs(&mut self, r: usize, requests: &[Req]) {
        let trace = self.trace.display().to_string();
        // The terminals of the storm's programs (their command names the trace).
        let mine = |agents: &[Value], running_only: bool| -> Vec<Value> {
            let mine = agents
                .iter()
                .filter(|a| a["command"].to_string().contains(&trace));
            let mine = mine.filter(|a| !running_only || a["state"] != "exited");
            mine.map(|a| a["terminal"].clone()).collect()
        };
        self.wait_exit(mine(&self.list(), true));
        let agents = self.list();
        let runs = std::fs::read_to_string(&self.trace).unwrap_or_default();
        let ran = |marker: &str| runs.lines().filter(|l| *l == marker).count();
        let group = format!("r{r}-g");
        let spawns = requests.iter().filter(|q| q.body.get("Spawn").is_some());
        let mut markers: Vec<String> = spawns.map(|q| format!("spawn:{};", q.id)).collect();
        markers.extend((1..=2).map(|n| format!("variant:{group}-{n};")));
        for marker in &markers {
            let made: Vec<&Value> = (agents.iter())
                .filter(|a| a["command"].to_string().contains(marker.as_str()))
                .map(|a| &a["terminal"])
                .collect();
            if ran(marker) > 1 || made.len() > 1 {
                let what = format!("{marker} ran {} times; terminals {made:?}", ran(marker));
                self.violation("twice", r, what);
            }
        }
        // Tidy up, so that rounds stay alike: the storm's terminals go, and a
        // group that cannot be picked.
        for terminal in mine(&agents, false) {
            self.app().request(json!({"Close": {"target": terminal}}));
        }
        if markers[markers.len() - 2..].iter().all(|m| ran(m) > 0) {
            self.ready.push(group);
            return;
        }
        println!("round {r}: {group} is not ready to pick (a variant did not run to its end)");
        for n in 1..=2 {
            let close = json!({"Close": {"environment": format!("{group}-{n}"), "force": true}});
            self.app().request(close);
        }
    }

    /// No Send's text reached the listener twice, and every Send answered
    /// `Sent` (before the kill, or on its retry) reached it.
    fn check_sends(&mut self, r: usize, requests: &[Req], answers: &[Value]) {
        let text = |q: &Req| {
            q.body["Send"]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        };
        let sends: Vec<(&Req, &Value)> = (requests.iter().zip(answers))
            .filter(|(q, _)| q.body.get("Send").is_some())
            .collect();
        let acknowledged: Vec<String> = (sends.iter())
            .filter(|(_, answer)| answer.get("Sent").is_some())
            .map(|(q, _)| text(q))
            .collect();
        let read = || std::fs::read_to_string(&self.sends).unwrap_or_default();
        let until = Instant::now() + Duration::from_secs(30);
        while acknowledged.iter().any(|t| !read().contains(t.as_str())) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        let got = read();
        for (q, _) in sends {
            let seen = got.matches(text(q).as_str()).count();
            if seen > 1 {
                self.violation(
                    "twice",
                    r,
                    format!("{} reached the terminal {seen} times", q.id),
                );
            } else if seen == 0 && acknowledged.contains(&text(q)) {
                let what = format!("{} was answered Sent but never reached the terminal", q.id);
                self.violation("send-lost", r, what);
            }
        }
    }

    fn wait_exit(&self, targets: Vec<Value>) {
        if targets.is_empty() {
            return;
        }
        let wait = json!({"Wait": {"targets": targets, "for": "exit", "timeout_secs": 30}});
        let waited = self.app().request(wait);
        assert!(waited["Agents"].is_array(), "programs still run: {waited}");
    }

    fn list(&self) -> Vec<Value> {
        let app = self.app();
        match send(app.endpoint, &app.envelope(json!("List"))) {
            Outcome::Answered(answer) if answer["Agents"].is_array() => {
                answer["Agents"].as_array().cloned().unwrap_or_default()
            }
            _ => {
                let log = app.log();
                let tail: Vec<&str> = log.lines().rev().take(80).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                panic!("List failed; the app's log ends:\n{}", tail.join("\n"))
            }
        }
    }

    /// Invariant 1: what git was left in the middle of (`MERGE_HEAD` of main
    /// or of a worktree, main's `SQUASH_MSG`), and main's `git status`.
    fn git_leftovers(&self) -> Vec<String> {
        let repo = self.app().dir.path().join("repo");
        let dot = repo.join(".git");
        let mut left = vec![dot.join("MERGE_HEAD"), dot.join("SQUASH_MSG")];
        if let Ok(worktrees) = std::fs::read_dir(dot.join("worktrees")) {
            left.extend(worktrees.flatten().map(|w| w.path().join("MERGE_HEAD")));
        }
        left.retain(|p| p.exists());
        let mut found: Vec<String> = left.iter().map(|p| p.display().to_string()).collect();
        let status = git(&repo, &["status", "--porcelain"]);
        if !status.is_empty() {
            found.push(format!("main's git status {status:?}"));
        }
        found
    }
}

fn launch(config: Option<&'static str>, dir: tempfile::TempDir) -> App {
    App::launch(Launch {
        config,
        reuse: Some(dir),
        ..Launch::default()
    })
}

/// A Send's retry saying that the crash cut its write (docs/RELIABILITY.md).
fn may_have_reached(answer: &Value) -> bool {
    code(answer) == "failed"
        && (answer["Error"]["message"].as_str()).is_some_and(|m| m.contains("may have reached"))
}

/// An Answer's `ask` before its ask is known: this, then the asking terminal.
const ASK_OF: &str = "?asked-by:";

/// The terminal an Answer's placeholder `ask` waits for, if it is one.
fn asks_of(ask: &str) -> bool {
    ask.starts_with(ASK_OF)
}

/// Sends a lane's envelopes in order until one is not answered. An Answer to
/// a placeholder ask is sent once that terminal's ask shows in `Asks` (within
/// 3 s), told to `answering` just before. Returns each request's outcome and
/// its request as sent.
fn run_lane(
    endpoint: SocketAddr,
    lane: Vec<Value>,
    answering: std::sync::mpsc::Sender<()>,
) -> Vec<(Outcome, Value)> {
    let mut sent: Vec<(Outcome, Value)> = (lane.iter())
        .map(|e| (Outcome::Unsent, e["request"].clone()))
        .collect();
    for ((slot, request), mut envelope) in sent.iter_mut().zip(lane) {
        if let Some(ask) = envelope["request"]["Answer"]["ask"].as_str()
            && let Some(terminal) = ask.strip_prefix(ASK_OF)
        {
            let Some(id) = open_ask(endpoint, &envelope, terminal) else {
                break;
            };
            envelope["request"]["Answer"]["ask"] = json!(id);
            *request = envelope["request"].clone();
            let _ = answering.send(());
        }
        *slot = send(endpoint, &envelope);
        if !matches!(slot, Outcome::Answered(_)) {
            break;
        }
    }
    sent
}

/// The id of terminal `terminal`'s open ask, asked for with `envelope`'s
/// credentials until it shows (3 s at most) or the app is gone.
fn open_ask(endpoint: SocketAddr, envelope: &Value, terminal: &str) -> Option<String> {
    let mut asks = envelope.clone();
    asks.as_object_mut()?.remove("request_id");
    asks["request"] = json!({"Asks": {"terminal": terminal.parse::<u64>().ok()?}});
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        let Outcome::Answered(answer) = send(endpoint, &asks) else {
            return None;
        };
        if let Some(id) = answer["Asks"][0]["ask"].as_str() {
            return Some(id.to_owned());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    None
}
