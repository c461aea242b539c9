//! A terminal's state timeline as the bus streams it: every record SubscribeAgents
//! sends for it, with the moment it arrived, so tests can say "working within 1 s of
//! the model getting the turn" against the model double's own clock.

use std::io::{BufRead, BufReader, Write};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::App;

/// How late a state may show after the moment that decides it: 1 s, stretched
/// on an overloaded machine ([`crate::support::stretched`]).
pub(super) fn bound() -> Duration {
    crate::support::stretched(Duration::from_secs(1))
}

#[derive(Default)]
struct Seen {
    records: Vec<(Instant, Value)>,
}

/// The records of one terminal, as they stream.
pub(super) struct Timeline {
    seen: Arc<(Mutex<Seen>, Condvar)>,
    terminal: u64,
}

impl Timeline {
    /// Follows terminal `terminal` from now on (its record now is the first entry).
    pub(super) fn follow(app: &App, terminal: u64) -> Timeline {
        let mut stream = app.connect();
        let mut line = app
            .envelope(json!({"SubscribeAgents": {}}))
            .to_string()
            .into_bytes();
        line.push(b'\n');
        stream.write_all(&line).unwrap();
        let seen: Arc<(Mutex<Seen>, Condvar)> = Arc::default();
        let writer = seen.clone();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stream);
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                let at = Instant::now();
                let message: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
                line.clear();
                let records: Vec<Value> = match &message {
                    Value::Object(o) if o.contains_key("Snapshot") => message["Snapshot"]["agents"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default(),
                    Value::Object(o) if o.contains_key("Agent") => vec![message["Agent"].clone()],
                    _ => continue,
                };
                let (lock, changed) = &*writer;
                let mut seen = lock.lock().unwrap();
                for record in records {
                    if record["terminal"] == terminal {
                        seen.records.push((at, record));
                    }
                }
                changed.notify_all();
            }
        });
        Timeline { seen, terminal }
    }

    /// Waits (at most `limit`) for a record after `after` that satisfies `check`;
    /// returns when it arrived and the record.
    pub(super) fn first_after(
        &self,
        after: Instant,
        limit: Duration,
        check: impl Fn(&Value) -> bool,
    ) -> (Instant, Value) {
        let until = Instant::now() + limit;
        let (lock, changed) = &*self.seen;
        let mut seen = lock.lock().unwrap();
        loop {
            if let Some((at, record)) = seen
                .records
                .iter()
                .find(|(at, record)| *at >= after && check(record))
            {
                return (*at, record.clone());
            }
            let left = until
                .checked_duration_since(Instant::now())
                .unwrap_or_else(|| {
                    panic!(
                        "terminal {}: no such record within {limit:?}; timeline: {}",
                        self.terminal,
                        describe(&seen.records)
                    )
                });
            seen = changed.wait_timeout(seen, left).unwrap().0;
        }
    }

    /// The first record after `moment` that satisfies `check`, which must
    /// have shown within [`bound`] of `moment` (the model's clock).
    pub(super) fn shown_within_bound(
        &self,
        moment: Instant,
        check: impl Fn(&Value) -> bool,
    ) -> Value {
        let (at, record) = self.first_after(moment, super::LONG, check);
        self.assert_within_bound(at, moment);
        record
    }

    /// `at`, when a record showed, is within [`bound`] of `moment`.
    pub(super) fn assert_within_bound(&self, at: Instant, moment: Instant) {
        assert!(
            at.saturating_duration_since(moment) <= bound(),
            "{}",
            self.describe()
        );
    }

    /// When the last record before `at` that satisfies `check` arrived.
    pub(super) fn last_before(
        &self,
        at: Instant,
        check: impl Fn(&Value) -> bool,
    ) -> Option<Instant> {
        let seen = self.seen.0.lock().unwrap();
        seen.records
            .iter()
            .rev()
            .find(|(t, r)| *t < at && check(r))
            .map(|(t, _)| *t)
    }

    /// The states seen between two moments, in order (`state (source)`).
    pub(super) fn between(&self, from: Instant, to: Instant) -> Vec<String> {
        let seen = self.seen.0.lock().unwrap();
        seen.records
            .iter()
            .filter(|(t, _)| *t >= from && *t <= to)
            .map(|(_, r)| short(r))
            .collect()
    }

    /// The whole timeline, for failure messages.
    pub(super) fn describe(&self) -> String {
        describe(&self.seen.0.lock().unwrap().records)
    }
}

fn short(record: &Value) -> String {
    format!(
        "{} ({}) {}",
        record["state"].as_str().unwrap_or("?"),
        record["state_source"].as_str().unwrap_or("?"),
        record["message"].as_str().unwrap_or("")
    )
}

fn describe(records: &[(Instant, Value)]) -> String {
    let Some((first, _)) = records.first() else {
        return "nothing".to_owned();
    };
    records
        .iter()
        .map(|(at, r)| {
            format!(
                "\n  +{:>6} ms {}",
                at.duration_since(*first).as_millis(),
                short(r)
            )
        })
        .collect()
}
