//! What the crash tortures (crash.rs and the crash_*.rs files beside it) and
//! the load test share: a request sent on its own connection that never
//! panics when the app dies, the seeded random draws, the kill that waits for
//! what the dead app started, and the tally of violations by kind that each
//! torture prints and fails on. Owns no test.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::{Value, json};

use crate::support::{App, Launch};

/// What became of a request's first attempt.
#[derive(Clone, Debug)]
pub(crate) enum Outcome {
    /// Never reached the app (refused, or its lane stopped before it).
    Unsent,
    /// Sent, and the app died before answering.
    Lost,
    Answered(Value),
}

impl Outcome {
    /// The answer, if there was one.
    pub(crate) fn answer(&self) -> Option<&Value> {
        match self {
            Outcome::Answered(answer) => Some(answer),
            _ => None,
        }
    }
}

/// One request on its own connection; never panics (the app may die).
pub(crate) fn send(endpoint: SocketAddr, envelope: &Value) -> Outcome {
    let Ok(mut stream) = TcpStream::connect(endpoint) else {
        return Outcome::Unsent;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(90)));
    let line = format!("{envelope}\n");
    if stream.write_all(line.as_bytes()).is_err() {
        return Outcome::Lost;
    }
    let mut line = String::new();
    let _ = BufReader::new(stream).read_line(&mut line);
    match serde_json::from_str(line.trim_end()) {
        Ok(answer) if line.ends_with('\n') => Outcome::Answered(answer),
        _ => Outcome::Lost,
    }
}

/// A Client envelope of `app` with a request id.
pub(crate) fn with_id(app: &App, request: &Value, id: &str) -> Value {
    let mut envelope = app.envelope(request.clone());
    envelope["request_id"] = json!(id);
    envelope
}

/// An answer without its `replayed` mark, `"Ok"` as `{"Ok":{}}`.
pub(crate) fn normal(answer: &Value) -> Value {
    let mut answer = answer
        .as_str()
        .map_or(answer.clone(), |name| json!({ name: {} }));
    let inner = answer.as_object_mut().and_then(|o| o.values_mut().next());
    if let Some(Value::Object(inner)) = inner {
        inner.remove("replayed");
    }
    answer
}

/// Whether an answer is marked `replayed`.
pub(crate) fn replayed(answer: &Value) -> bool {
    let inner = answer.as_object().and_then(|o| o.values().next());
    inner.is_some_and(|v| v["replayed"] == true)
}

/// splitmix64: small, seeded, reproducible.
pub(crate) fn next_random(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let z = (*state ^ (*state >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// An environment variable parsed, or `default`.
pub(crate) fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    let value = std::env::var(name).ok().and_then(|v| v.parse().ok());
    value.unwrap_or(default)
}

/// The rounds (`KRAD_TORTURE_ROUNDS`, else `default`) and the seed
/// (`KRAD_TORTURE_SEED`, else drawn from the clock) of a torture, printed.
pub(crate) fn rounds_and_seed(what: &str, default: usize) -> (usize, u64) {
    let rounds: usize = env_or("KRAD_TORTURE_ROUNDS", default);
    let clock = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    let seed = env_or(
        "KRAD_TORTURE_SEED",
        u64::from(clock.unwrap().subsec_nanos()),
    );
    println!("{what}: {rounds} rounds, KRAD_TORTURE_SEED={seed}");
    (rounds, seed)
}

/// Freezes the app, notes its children (the git commands it runs, forks not
/// yet exec'd), kills it, and waits for those to end on their own, so that
/// no check and no restart races a command the dead app started. An app that
/// already died (at an aimed point) is only reaped.
pub(crate) fn kill(app: &mut App) {
    if app.child.try_wait().unwrap().is_none() {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(app.pid as i32), Signal::SIGSTOP);
    }
    let children = children(app.pid as i32);
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(app.pid as i32), Signal::SIGKILL);
    app.wait_exit(Duration::from_secs(10));
    let until = Instant::now() + Duration::from_secs(30);
    while children.iter().any(|&pid| alive(pid)) {
        assert!(Instant::now() < until, "{children:?} still run");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits for the app to die at its aimed point (within `limit`; none aimed:
/// not at all), else `delay` more; whether it died there.
pub(crate) fn await_aim(app: &mut App, aim: Option<&str>, limit: Duration, delay: u64) -> bool {
    let hit = aim.is_some() && eventually(crate::support::stretched(limit), || died(app));
    if !hit {
        std::thread::sleep(Duration::from_millis(delay));
    }
    hit
}

/// Sends `envelopes` in order on a thread of their own, each after its pause
/// (ms), until one's answer is lost: their outcomes, in order.
pub(crate) fn lane(
    endpoint: SocketAddr,
    envelopes: Vec<(Value, u64)>,
) -> std::thread::JoinHandle<Vec<Outcome>> {
    std::thread::spawn(move || {
        let mut outcomes = Vec::new();
        for (envelope, pause) in envelopes {
            std::thread::sleep(Duration::from_millis(pause));
            let outcome = send(endpoint, &envelope);
            let stop = !matches!(outcome, Outcome::Answered(_));
            outcomes.push(outcome);
            if stop {
                break;
            }
        }
        outcomes
    })
}

/// Whether the app died by itself (at an aimed point).
pub(crate) fn died(app: &mut App) -> bool {
    app.child.try_wait().unwrap().is_some()
}

/// Starts an app on the directory of a killed one, with `config` and, if
/// given, aimed at a crash point (`KRAD_CRASH_AT`); the panic's message when
/// it does not start.
pub(crate) fn relaunch(dead: App, config: &str, aim: Option<String>) -> Result<App, String> {
    let dir = dead.stop_keep_dir();
    let env: Vec<(String, String)> = aim
        .map(|point| ("KRAD_CRASH_AT".to_owned(), point))
        .into_iter()
        .collect();
    let config = config.to_owned();
    let started = std::panic::catch_unwind(move || {
        App::launch(Launch {
            config: Some(&config),
            reuse: Some(dir),
            env,
            ..Launch::default()
        })
    });
    started.map_err(|e| e.downcast_ref::<String>().cloned().unwrap_or_default())
}

/// The children of `pid`, but its tmux control client: tmux 3.3 can keep that
/// one forever once its app is gone.
pub(crate) fn children(pid: i32) -> Vec<i32> {
    let pids = std::fs::read_dir("/proc").unwrap().flatten();
    let pids = pids.filter_map(|e| e.file_name().to_str()?.parse().ok());
    let child = |p: &i32| {
        stat(*p).is_some_and(|(comm, _, parent)| parent == pid && !comm.starts_with("tmux"))
    };
    pids.filter(child).collect()
}

/// Running, not a zombie waiting to be reaped.
pub(crate) fn alive(pid: i32) -> bool {
    stat(pid).is_some_and(|(_, state, _)| state != 'Z')
}

/// A process's command name, state and parent, from `/proc/<pid>/stat`.
pub(crate) fn stat(pid: i32) -> Option<(String, char, i32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (open, close) = (text.find('(')?, text.rfind(')')?);
    let mut rest = text[close + 2..].split(' ');
    let state = rest.next()?.chars().next()?;
    Some((
        text[open + 1..close].to_owned(),
        state,
        rest.next()?.parse().ok()?,
    ))
}

/// The command lines (arguments joined by spaces) of the processes that name
/// `text`, with their pids.
pub(crate) fn processes_naming(text: &str) -> Vec<(i32, String)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let me = std::process::id() as i32;
    entries
        .flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            let line = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            (pid != me && line.contains(text) && alive(pid)).then_some((pid, line))
        })
        .collect()
}

/// Every record of List from a running app, or None if it does not answer.
pub(crate) fn list(app: &App) -> Option<Vec<Value>> {
    match send(app.endpoint, &app.envelope(json!("List"))) {
        Outcome::Answered(answer) => answer["Agents"].as_array().cloned(),
        _ => None,
    }
}

/// A torture's counts: kills (at random and aimed), the invariants checked,
/// and the violations, by kind.
pub(crate) struct Tally {
    pub what: String,
    pub kinds: &'static [&'static str],
    pub random_kills: usize,
    pub aimed_kills: BTreeMap<String, usize>,
    pub checked: BTreeMap<&'static str, usize>,
    pub violations: BTreeMap<&'static str, usize>,
    /// Figures that are no violation (what the kills cut, as documented).
    pub notes: BTreeMap<&'static str, usize>,
    started: Instant,
}

impl Tally {
    pub(crate) fn new(what: &str, kinds: &'static [&'static str]) -> Tally {
        Tally {
            what: what.to_owned(),
            kinds,
            random_kills: 0,
            aimed_kills: BTreeMap::new(),
            checked: BTreeMap::new(),
            violations: BTreeMap::new(),
            notes: BTreeMap::new(),
            started: Instant::now(),
        }
    }

    /// An invariant of kind `kind` was checked once.
    pub(crate) fn check(&mut self, kind: &'static str) {
        assert!(self.kinds.contains(&kind), "unknown kind {kind}");
        *self.checked.entry(kind).or_default() += 1;
    }

    /// Checks `holds` as an invariant of `kind`; prints and counts it when it
    /// does not hold.
    pub(crate) fn expect(&mut self, kind: &'static str, round: usize, holds: bool, what: String) {
        self.check(kind);
        if !holds {
            self.violation(kind, round, what);
        }
    }

    pub(crate) fn violation(&mut self, kind: &'static str, round: usize, what: String) {
        assert!(self.kinds.contains(&kind), "unknown kind {kind}");
        println!("VIOLATION {kind} [{}, round {round}] {what}", self.what);
        *self.violations.entry(kind).or_default() += 1;
    }

    /// Counts a figure that is no violation.
    pub(crate) fn note(&mut self, what: &'static str) {
        *self.notes.entry(what).or_default() += 1;
    }

    /// A kill: at an aimed point the app reached, or at random.
    pub(crate) fn killed(&mut self, aimed: Option<&str>) {
        match aimed {
            Some(point) => *self.aimed_kills.entry(point.to_owned()).or_default() += 1,
            None => self.random_kills += 1,
        }
    }

    /// Prints the figures and fails on any violation.
    pub(crate) fn finish(&self, seed: u64) {
        let aimed: usize = self.aimed_kills.values().sum();
        println!(
            "\n{}, KRAD_TORTURE_SEED={seed}, in {:.1?}: {} kills ({} at random, {aimed} aimed: {:?})",
            self.what,
            self.started.elapsed(),
            self.random_kills + aimed,
            self.random_kills,
            self.aimed_kills
        );
        println!(
            "  {:<16} {:>8} {:>10}",
            "invariant", "checked", "violations"
        );
        for kind in self.kinds {
            println!(
                "  {kind:<16} {:>8} {:>10}",
                self.checked.get(kind).unwrap_or(&0),
                self.violations.get(kind).unwrap_or(&0)
            );
        }
        for (what, count) in &self.notes {
            println!("  {what}: {count}");
        }
        assert!(
            self.violations.is_empty(),
            "violations in {}; see above",
            self.what
        );
    }
}

/// Polls `check` until it holds or `limit` passes; whether it held.
pub(crate) fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}
