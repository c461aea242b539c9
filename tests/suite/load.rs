//! Load (issue 49, item 3): many terminals, page clients and SubscribeAgents
//! streams at once while an agent asks every second and a client answers.
//! This file owns that test. What must hold: the app's memory stays flat (its
//! RSS, from `/proc/<pid>/status`, sampled every second: the last quarter's
//! highest at most 25% + 16 MiB above the highest after the first quarter), no
//! request waits past its deadline (10 s for Asks, Answer, List and Check; an
//! Ask, which waits for its decision, must be decided by the client's Answer,
//! never by its expiry), and nothing is lost or dropped: every ask made is
//! listed, answered, and its answer reaches the agent; every stream's revs only
//! go up, and every stream sees every ask (the agent `asking` with its title)
//! and every answer (the agent leaving `asking`) in the order they were made —
//! ask 1, its answer, ask 2, … — and ends knowing the agent works again after
//! the last answer.
//!
//! A short run by default (CI: 200 terminals, 5 page clients, 5 streams,
//! 20 s); the full figure by hand:
//! `KRAD_LOAD_TERMINALS=1000 KRAD_LOAD_PAGES=20 KRAD_LOAD_STREAMS=20 KRAD_LOAD_SECS=600
//! cargo test -p krad-cli --test suite load:: -- --nocapture`.

use std::io::{BufRead, BufReader, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{App, Launch};
use crate::torture::{env_or, send};

/// What a stream saw: the highest rev per terminal, whether revs ever went
/// back, the asks it saw the agent make (`asking` with the ask's title,
/// `ask <n>`), the answers (the agent leaving `asking`), what came out of
/// order (an ask other than the next, or one before the last was answered),
/// the agent's last state, and how many messages.
#[derive(Default)]
struct Seen {
    agent: u64,
    revs: std::collections::BTreeMap<u64, u64>,
    asks: std::collections::BTreeSet<u64>,
    /// The agent's last state and, asking, its ask's number.
    last: Option<(String, Option<u64>)>,
    answers: u64,
    disorder: Vec<String>,
    snapshot: bool,
    state: String,
    back: Vec<String>,
    count: usize,
}

impl Seen {
    fn new(agent: u64) -> Seen {
        Seen {
            agent,
            ..Seen::default()
        }
    }

    fn take(&mut self, line: &Value) {
        self.count += 1;
        let records: Vec<&Value> = match line.get("Snapshot") {
            Some(snapshot) => {
                self.snapshot = true;
                snapshot["agents"]
                    .as_array()
                    .map(|a| a.iter().collect())
                    .unwrap_or_default()
            }
            None => line.get("Agent").into_iter().collect(),
        };
        for record in records {
            let (Some(id), Some(rev)) = (record["terminal"].as_u64(), record["rev"].as_u64())
            else {
                continue;
            };
            let last = self.revs.entry(id).or_default();
            if rev <= *last {
                self.back
                    .push(format!("terminal {id}: rev {rev} after {last}"));
            }
            *last = rev;
            if id != self.agent {
                continue;
            }
            self.state = record["state"].as_str().unwrap_or_default().to_owned();
            let asked: Option<u64> = record["message"]
                .as_str()
                .and_then(|m| m.strip_prefix("ask "))
                .and_then(|n| n.parse().ok())
                .filter(|_| self.state == "asking");
            self.change(asked);
        }
    }

    /// The agent's record as this stream saw it next: a change of state or of
    /// ask must come in the order the agent and the client made them (ask 1,
    /// its answer, ask 2, …).
    fn change(&mut self, asked: Option<u64>) {
        let now = (self.state.clone(), asked);
        let before = self.last.replace(now.clone());
        if before.as_ref() == Some(&now) {
            return;
        }
        let (was_asking, last_ask) = match &before {
            Some((state, n)) => (state == "asking", *n),
            None => (false, None),
        };
        let last_seen = self.asks.last().copied().unwrap_or_default();
        match asked {
            Some(n) => {
                if was_asking || n != last_seen + 1 {
                    self.disorder.push(format!(
                        "ask {n} after {:?} (the last ask seen {last_seen})",
                        before
                    ));
                }
                self.asks.insert(n);
            }
            None if was_asking && last_ask.is_some() => self.answers += 1,
            None if self.state == "asking" => {
                self.disorder
                    .push(format!("asking without an ask's title after {before:?}"));
            }
            None => {}
        }
    }

    /// The asks of 1 to `made` this stream never saw.
    fn missed(&self, made: u64) -> Vec<u64> {
        (1..=made).filter(|n| !self.asks.contains(n)).collect()
    }
}

/// A stream's reader thread: takes each message `next` reads into what it
/// saw (`Some(None)`: one it could not read), until `stop` or the stream's
/// end (`None`).
fn reader(
    agent: u64,
    stop: &Arc<AtomicBool>,
    mut next: impl FnMut() -> Option<Option<Value>> + Send + 'static,
) -> (Arc<Mutex<Seen>>, std::thread::JoinHandle<()>) {
    let seen = Arc::new(Mutex::new(Seen::new(agent)));
    let (mine, stop) = (seen.clone(), stop.clone());
    let thread = std::thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            match next() {
                None => break,
                Some(Some(value)) => mine.lock().unwrap().take(&value),
                Some(None) => {}
            }
        }
    });
    (seen, thread)
}

#[test]
fn load_many_terminals_pages_and_streams_while_an_agent_asks() {
    let _alone = crate::support::loading_the_machine();
    let terminals: usize = env_or("KRAD_LOAD_TERMINALS", 200);
    let pages: usize = env_or("KRAD_LOAD_PAGES", 5);
    let streams: usize = env_or("KRAD_LOAD_STREAMS", 5);
    let secs: u64 = env_or("KRAD_LOAD_SECS", 20);
    println!("load: {terminals} terminals, {pages} page clients, {streams} streams, {secs} s");
    crate::hardening::allow_open_files(8_192);
    let app = App::launch(Launch {
        config: Some("[ui]\nenabled = true\n"),
        ..Launch::default()
    });
    let started = Instant::now();
    let agent = app.spawn_sh("exec sleep 86400");
    for _ in 1..terminals {
        app.spawn_sh("exec sleep 86400");
    }
    println!(
        "  {terminals} terminals spawned in {:.1?}",
        started.elapsed()
    );
    let token = app.terminal_token(agent);
    let stop = Arc::new(AtomicBool::new(false));
    // The bus's streams.
    let mut readers = Vec::new();
    for _ in 0..streams {
        let mut stream = app.connect();
        let envelope = app.envelope(json!({"SubscribeAgents": {}}));
        stream
            .write_all(format!("{envelope}\n").as_bytes())
            .unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut lines = BufReader::new(stream);
        readers.push(reader(agent, &stop, move || {
            let mut line = String::new();
            if lines.read_line(&mut line).unwrap_or(0) == 0 {
                return None;
            }
            Some(serde_json::from_str::<Value>(&line).ok())
        }));
    }
    // The page's clients, each with SubscribeAgents over its WebSocket.
    let address = crate::ui::page_address(&app);
    for _ in 0..pages {
        let cookie = crate::ui::log_in(&app);
        let mut ws = crate::crash_page::socket(&address, &cookie).expect("a page client");
        ws.send(tungstenite::Message::text(
            json!({"id": 1, "open": {"SubscribeAgents": {}}}).to_string(),
        ))
        .unwrap();
        readers.push(reader(agent, &stop, move || match ws.read() {
            Ok(tungstenite::Message::Text(text)) => Some(
                serde_json::from_str::<Value>(text.as_str())
                    .ok()
                    .map(|value| value["line"].clone()),
            ),
            _ => Some(None),
        }));
    }
    // Every stream has its snapshot before the first ask: a stream opened
    // later would rightly start after it.
    assert!(
        crate::torture::eventually(Duration::from_secs(30), || {
            readers
                .iter()
                .all(|(seen, _)| seen.lock().unwrap().snapshot)
        }),
        "a stream without its snapshot"
    );
    // The agent asks every second (its Ask waits for the decision on a
    // connection of its own); a client finds the ask in Asks and answers it,
    // and lists and checks.
    let deadline = Duration::from_secs(10);
    let expiry = 60;
    let mut latencies: Vec<(String, Duration)> = Vec::new();
    let mut waits: Vec<Duration> = Vec::new();
    let mut rss: Vec<u64> = Vec::new();
    let (mut listed, mut answered, mut heard) = (0u64, 0u64, 0u64);
    let mut lost: Vec<String> = Vec::new();
    let until = Instant::now() + Duration::from_secs(secs);
    let mut made = 0u64;
    while Instant::now() < until {
        let second = Instant::now();
        made += 1;
        let n = made;
        let title = format!("ask {n}");
        let ask = json!({"token": token, "from": {"Terminal": {"environment": "main",
            "terminal": agent}}, "request": {"Ask": {"kind": "choice", "title": title,
            "options": [{"id": "yes", "label": "Yes"}, {"id": "no", "label": "No"}],
            "expires_in_secs": expiry}}});
        let endpoint = app.endpoint;
        let asking = std::thread::spawn(move || {
            let t = Instant::now();
            (send(endpoint, &ask), t.elapsed())
        });
        let mut timed = |name: &str, envelope: &Value| {
            let t = Instant::now();
            let answer = send(app.endpoint, envelope);
            latencies.push((name.to_owned(), t.elapsed()));
            answer
                .answer()
                .cloned()
                .filter(|a| a.get("Error").is_none())
                .unwrap_or_else(|| panic!("{name}: {answer:?}"))
        };
        // The client finds the ask by its title, and answers it.
        let looked = Instant::now();
        let found = loop {
            let open = timed("Asks", &app.envelope(json!({"Asks": {"terminal": agent}})));
            let found = open["Asks"]
                .as_array()
                .and_then(|asks| asks.iter().find(|a| a["title"] == title.as_str()))
                .and_then(|a| a["ask"].as_str())
                .map(str::to_owned);
            if found.is_some() || looked.elapsed() > deadline {
                break found;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        match found {
            Some(id) => {
                listed += 1;
                let answer = timed(
                    "Answer",
                    &app.envelope(json!({"Answer": {"ask": id, "answer": {"option": "yes"}}})),
                );
                if answer == json!("Ok") {
                    answered += 1;
                } else {
                    lost.push(format!("{title}: Answer answered {answer}"));
                }
            }
            None => lost.push(format!("{title}: not in Asks within {deadline:?}")),
        }
        // The agent hears the client's answer.
        let (outcome, waited) = asking.join().expect("the asking thread");
        waits.push(waited);
        match outcome.answer().map(|a| &a["Answered"]) {
            Some(decided) if decided["by"] == "client" && decided["answer"]["option"] == "yes" => {
                heard += 1
            }
            _ => lost.push(format!("{title}: the agent's Ask answered {outcome:?}")),
        }
        for (name, request) in [
            ("List", json!("List")),
            ("Check", json!({"Check": {"target": agent}})),
        ] {
            timed(name, &app.envelope(request));
        }
        rss.push(app.rss_kib());
        if let Some(rest) = Duration::from_secs(1).checked_sub(second.elapsed()) {
            std::thread::sleep(rest);
        }
    }
    // Every stream sees every ask, and ends knowing the agent works again.
    let settled = crate::torture::eventually(Duration::from_secs(30), || {
        readers.iter().all(|(seen, _)| {
            let seen = seen.lock().unwrap();
            seen.missed(made).is_empty() && seen.answers == made && seen.state == "working"
        })
    });
    stop.store(true, Ordering::SeqCst);
    let worst = latencies.iter().map(|(_, d)| *d).max().unwrap_or_default();
    let mut sorted: Vec<Duration> = latencies.iter().map(|(_, d)| *d).collect();
    sorted.sort();
    let p99 = sorted[sorted.len() * 99 / 100];
    waits.sort();
    let worst_wait = waits.last().copied().unwrap_or_default();
    let p99_wait = waits[waits.len() * 99 / 100];
    let quarter = rss.len() / 4;
    let warm = rss[quarter..]
        .first()
        .copied()
        .unwrap_or_default()
        .max(rss[..=quarter].iter().copied().max().unwrap_or_default());
    let late = rss[rss.len() - quarter.max(1)..]
        .iter()
        .copied()
        .max()
        .unwrap_or_default();
    println!(
        "  asks: {made} made, {listed} listed, {answered} answered, {heard} answers heard by the agent; asked to decided: worst {worst_wait:.1?}, p99 {p99_wait:.1?} (expiry {expiry} s)"
    );
    for name in ["Asks", "Answer", "List", "Check"] {
        let mine: Vec<Duration> = latencies
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, d)| *d)
            .collect();
        println!(
            "  {name}: {} requests, worst {:.1?}",
            mine.len(),
            mine.iter().max().copied().unwrap_or_default()
        );
    }
    println!(
        "  {} requests, worst {worst:.1?}, p99 {p99:.1?} (deadline {deadline:?}); RSS {} MiB after the first quarter, {} MiB at most in the last, {} MiB at the end",
        latencies.len(),
        warm / 1024,
        late / 1024,
        rss.last().copied().unwrap_or_default() / 1024
    );
    // The samples over time: the highest of each tenth of the run, in MiB.
    let tenth = rss.len().div_ceil(10).max(1);
    let tenths: Vec<u64> = rss
        .chunks(tenth)
        .map(|c| c.iter().copied().max().unwrap_or_default() / 1024)
        .collect();
    println!(
        "  RSS, the highest of each tenth of the run ({} samples): {tenths:?} MiB",
        rss.len()
    );
    for (n, (seen, _)) in readers.iter().enumerate() {
        let seen = seen.lock().unwrap();
        let missed = seen.missed(made);
        println!(
            "  stream {n}: {} lines, {} asks and {} answers seen, missed {missed:?}, out of order {}, agent last {:?}, revs back {}",
            seen.count,
            seen.asks.len(),
            seen.answers,
            seen.disorder.len(),
            seen.state,
            seen.back.len()
        );
        assert!(seen.back.is_empty(), "stream {n}: {:?}", seen.back);
        assert!(missed.is_empty(), "stream {n} missed asks {missed:?}");
        assert!(
            seen.disorder.is_empty(),
            "stream {n} out of order: {:?}",
            seen.disorder
        );
        assert_eq!(seen.answers, made, "stream {n}: answers seen");
    }
    assert!(lost.is_empty(), "asks lost: {lost:?}");
    assert!(
        settled,
        "a stream missed an ask, an answer or the agent working after the last"
    );
    assert!(worst <= deadline, "a request waited {worst:?}");
    assert!(
        worst_wait < Duration::from_secs(expiry),
        "an ask waited {worst_wait:?}"
    );
    assert!(
        late <= warm + warm / 4 + 16 * 1024,
        "the app's memory grew: {warm} KiB after the first quarter, {late} KiB in the last ({rss:?})"
    );
}
