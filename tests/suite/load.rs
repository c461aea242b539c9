//! Load (issue 49, item 3): many terminals, page clients and SubscribeAgents
//! streams at once while an agent reports every second. This file owns that
//! test. What must hold: the app's memory stays flat (its RSS, from
//! `/proc/<pid>/status`, sampled every second: the last quarter's highest at
//! most 25% + 16 MiB above the highest after the first quarter), no request
//! waits past its deadline (10 s for Report, List and Check), and no stream
//! drops anything (each stream's revs only go up, and each ends knowing the
//! agent's last Report).
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
/// back, and how many messages.
#[derive(Default)]
struct Seen {
    revs: std::collections::BTreeMap<u64, u64>,
    messages: Vec<String>,
    back: Vec<String>,
    count: usize,
}

impl Seen {
    fn take(&mut self, line: &Value) {
        self.count += 1;
        let records: Vec<&Value> = match line.get("Snapshot") {
            Some(snapshot) => snapshot["agents"]
                .as_array()
                .map(|a| a.iter().collect())
                .unwrap_or_default(),
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
            if let Some(message) = record["message"].as_str()
                && message.starts_with("tick ")
            {
                self.messages.push(message.to_owned());
            }
        }
    }
}

#[test]
fn load_many_terminals_pages_and_streams_while_an_agent_reports() {
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
        let (seen, stop) = (Arc::new(Mutex::new(Seen::default())), stop.clone());
        let mine = seen.clone();
        readers.push((
            seen,
            std::thread::spawn(move || {
                let mut lines = BufReader::new(stream);
                let mut line = String::new();
                while !stop.load(Ordering::SeqCst) {
                    line.clear();
                    if lines.read_line(&mut line).unwrap_or(0) == 0 {
                        break;
                    }
                    if let Ok(value) = serde_json::from_str::<Value>(&line) {
                        mine.lock().unwrap().take(&value);
                    }
                }
            }),
        ));
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
        let (seen, stop) = (Arc::new(Mutex::new(Seen::default())), stop.clone());
        let mine = seen.clone();
        readers.push((
            seen,
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let Ok(tungstenite::Message::Text(text)) = ws.read() else {
                        continue;
                    };
                    if let Ok(value) = serde_json::from_str::<Value>(text.as_str()) {
                        mine.lock().unwrap().take(&value["line"]);
                    }
                }
            }),
        ));
    }
    // The agent reports every second; a client lists and checks.
    let deadline = Duration::from_secs(10);
    let mut latencies: Vec<(String, Duration)> = Vec::new();
    let mut rss: Vec<u64> = Vec::new();
    let mut last_tick = String::new();
    let until = Instant::now() + Duration::from_secs(secs);
    let mut n = 0;
    while Instant::now() < until {
        let second = Instant::now();
        n += 1;
        last_tick = format!("tick {n}");
        let state = if n % 2 == 0 { "idle" } else { "working" };
        let report = json!({"token": token, "from": {"Terminal": {"environment": "main",
            "terminal": agent}}, "request": {"Report": {"state": state, "message": last_tick}}});
        for (name, envelope) in [
            ("Report", report),
            ("List", app.envelope(json!("List"))),
            ("Check", app.envelope(json!({"Check": {"target": agent}}))),
        ] {
            let t = Instant::now();
            let answer = send(app.endpoint, &envelope);
            let took = t.elapsed();
            assert!(
                answer.answer().is_some_and(|a| a.get("Error").is_none()),
                "{name}: {answer:?}"
            );
            latencies.push((name.to_owned(), took));
        }
        rss.push(app.rss_kib());
        if let Some(rest) = Duration::from_secs(1).checked_sub(second.elapsed()) {
            std::thread::sleep(rest);
        }
    }
    // Every stream ends knowing the last Report.
    let settled = crate::torture::eventually(Duration::from_secs(30), || {
        readers
            .iter()
            .all(|(seen, _)| seen.lock().unwrap().messages.last() == Some(&last_tick))
    });
    stop.store(true, Ordering::SeqCst);
    let worst = latencies.iter().map(|(_, d)| *d).max().unwrap_or_default();
    let mut sorted: Vec<Duration> = latencies.iter().map(|(_, d)| *d).collect();
    sorted.sort();
    let p99 = sorted[sorted.len() * 99 / 100];
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
        "  {} requests, worst {worst:.1?}, p99 {p99:.1?} (deadline {deadline:?}); RSS {} MiB after the first quarter, {} MiB at most in the last, {} MiB at the end",
        latencies.len(),
        warm / 1024,
        late / 1024,
        rss.last().copied().unwrap_or_default() / 1024
    );
    for (n, (seen, _)) in readers.iter().enumerate() {
        let seen = seen.lock().unwrap();
        println!(
            "  stream {n}: {} lines, {} ticks, last {:?}, revs back {}",
            seen.count,
            seen.messages.len(),
            seen.messages.last(),
            seen.back.len()
        );
        assert!(seen.back.is_empty(), "stream {n}: {:?}", seen.back);
    }
    assert!(settled, "a stream missed the last Report ({last_tick})");
    assert!(worst <= deadline, "a request waited {worst:?}");
    assert!(
        late <= warm + warm / 4 + 16 * 1024,
        "the app's memory grew: {warm} KiB after the first quarter, {late} KiB in the last ({rss:?})"
    );
}
