//! Driving a real CLI through turns and checking the state timeline of each
//! against the model double's clock: `working` within [`bound`] of the model
//! getting the turn, `idle` within [`bound`] of the model's answer being written
//! whole, with the turn's last message.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::timeline::{Timeline, bound};
use super::{LONG, RealApp, Turn};

/// What one turn showed.
pub(super) struct TurnSeen {
    /// The `n`th main request (from 1).
    pub request: usize,
    /// When the model got it, and when its answer was written whole.
    pub started: Instant,
    pub answered: Instant,
    /// The first `working` record of the turn, and the first `idle` after the answer.
    pub working: (Instant, Value),
    pub idle: (Instant, Value),
}

impl TurnSeen {
    /// How late `working` and `idle` showed (a state shown before its moment is 0).
    pub(super) fn latencies(&self) -> (Duration, Duration) {
        (
            self.working.0.saturating_duration_since(self.started),
            self.idle.0.saturating_duration_since(self.answered),
        )
    }
}

/// Sends `prompt` (paste, then Enter) and plays `reply` as the model: checks that
/// the model got exactly the prompt, and the turn's states and their latencies.
pub(super) fn send_turn(
    bed: &RealApp,
    timeline: &Timeline,
    id: u64,
    prompt: &str,
    reply: Turn,
) -> TurnSeen {
    bed.double.script(vec![reply]);
    let before = bed.double.requests().len();
    let sent_at = Instant::now();
    let sent = bed
        .app
        .request(json!({"Send": {"target": id, "text": prompt, "enter": true}}));
    assert_eq!(sent["Sent"]["delivered"], true, "{sent}");
    expect_turn(bed, timeline, id, before + 1, sent_at, prompt)
}

/// A CLI spawned with `spawn` and no prompt: idle as its hook tells, at its
/// prompt (`glyph` on its screen), then a turn that has it remember
/// (`remember this`, answered `remembered`); its id, timeline and turn.
pub(super) fn idle_then_remembering(
    bed: &RealApp,
    spawn: Value,
    glyph: &str,
) -> (u64, Timeline, TurnSeen) {
    let spawned_at = Instant::now();
    let id = bed.spawn(spawn);
    let timeline = Timeline::follow(&bed.app, id);
    let (_, idle) = timeline.first_after(spawned_at, super::LONG, |r| r["state"] == "idle");
    assert_eq!(idle["state_source"], "hook");
    bed.until_screen(id, glyph);
    let seen = send_turn(
        bed,
        &timeline,
        id,
        "remember this",
        Turn::reply("remembered"),
    );
    (id, timeline, seen)
}

/// Closes terminal `id` and spawns `resume`, the CLI resuming its session:
/// idle (its first state past starting and working, returned), the earlier
/// turn on its screen, and it answers a turn that asks for it (`what was
/// it`, answered `this`).
pub(super) fn resumed_remembers(bed: &RealApp, id: u64, resume: Value) -> Value {
    bed.app.request(json!({"Close": {"target": id}}));
    let resumed_at = Instant::now();
    let id = bed.spawn(resume);
    let timeline = Timeline::follow(&bed.app, id);
    let (_, idle) = timeline.first_after(resumed_at, super::LONG, |r| {
        r["state"] != "starting" && r["state"] != "working"
    });
    let screen = bed.app.request(json!({"Output": {"target": id}}));
    assert_eq!(idle["state"], "idle", "{}\n{screen}", timeline.describe());
    bed.until_screen(id, "remember this");
    send_turn(bed, &timeline, id, "what was it", Turn::reply("this"));
    bed.app.until(id, super::LONG, |r| {
        r["message"] == "this" && r["state"] == "idle"
    });
    idle
}

/// After the first turn (`first`), the sends of [`super::sends`], each its own
/// turn (`prompt number N`, answered `reply number N`), then a slow turn
/// (`take your time`, answered `slowly done` after 4 s) that is working all
/// along; prints `cli`'s worst latencies to working and to idle.
/// `ended_saying(seen, text)` checks that the turn `seen` ended saying `text`.
pub(super) fn sends_then_a_slow_turn(
    bed: &RealApp,
    timeline: &Timeline,
    id: u64,
    (cli, first): (&str, &TurnSeen),
    ended_saying: impl Fn(&TurnSeen, &str),
) {
    let mut worst = first.latencies();
    for n in 2..=super::sends() + 1 {
        let prompt = format!("prompt number {n}");
        let reply = format!("reply number {n}");
        let seen = send_turn(bed, timeline, id, &prompt, Turn::reply(reply.clone()));
        assert_eq!(seen.request, n, "each send is a turn of its own");
        ended_saying(&seen, &reply);
        let (w, i) = seen.latencies();
        worst = (worst.0.max(w), worst.1.max(i));
    }
    eprintln!(
        "{cli}: worst latency to working {:?}, to idle {:?}",
        worst.0, worst.1
    );
    let slow = Turn::Slow {
        text: "slowly done".into(),
        secs: 4,
    };
    let slow = send_turn(bed, timeline, id, "take your time", slow);
    assert!(slow.answered.duration_since(slow.started) >= Duration::from_secs(3));
    ended_saying(&slow, "slowly done");
}

/// Checks the `n`th main request (from 1) carried `prompt` and the states of its
/// turn; `since`: when the turn was asked for.
pub(super) fn expect_turn(
    bed: &RealApp,
    timeline: &Timeline,
    id: u64,
    n: usize,
    since: Instant,
    prompt: &str,
) -> TurnSeen {
    let (started, answered) = bed.answered(id, n);
    let body = &bed.double.requests()[n - 1];
    let text = super::last_user_text(body);
    assert!(
        text.contains(prompt),
        "turn {n}: the model got {text:?}, not {prompt:?} (glued or lost?)"
    );
    // The turn's own working: after the last idle before the model got it (a CLI
    // still starting up may flip working and idle before it takes the prompt).
    let from = timeline
        .last_before(started, |r| r["state"] == "idle")
        .filter(|idle| *idle > since)
        .unwrap_or(since);
    let working = timeline.first_after(from, LONG, |r| r["state"] == "working");
    let idle = timeline.first_after(answered, LONG, |r| r["state"] == "idle");
    let seen = TurnSeen {
        request: n,
        started,
        answered,
        working,
        idle,
    };
    let (to_working, to_idle) = seen.latencies();
    assert!(
        to_working <= bound(),
        "turn {n}: working {to_working:?} after the model got it: {}",
        timeline.describe()
    );
    assert!(
        to_idle <= bound(),
        "turn {n}: idle {to_idle:?} after the model answered: {}",
        timeline.describe()
    );
    // Between the turn's start and its answer, nothing but working (or asking).
    let during = timeline.between(seen.working.0, answered);
    assert!(
        during
            .iter()
            .all(|s| s.starts_with("working") || s.starts_with("asking")),
        "turn {n}: {during:?}"
    );
    seen
}

/// The open asks of the app.
pub(super) fn asks(bed: &RealApp) -> Vec<Value> {
    bed.app.request(json!("Asks"))["Asks"]
        .as_array()
        .unwrap()
        .clone()
}

/// Waits for an open ask; returns it.
pub(super) fn until_ask(bed: &RealApp) -> Value {
    let until = Instant::now() + LONG;
    loop {
        if let Some(ask) = asks(bed).into_iter().next() {
            return ask;
        }
        assert!(Instant::now() < until, "no ask was raised");
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Waits until no ask is open.
pub(super) fn until_no_ask(bed: &RealApp) {
    let until = Instant::now() + LONG;
    while !asks(bed).is_empty() {
        assert!(
            Instant::now() < until,
            "the ask stayed open: {:?}",
            asks(bed)
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Presses `keys` in a CLI's dialog until `answered` holds for the record: a TUI
/// may drop keys that come the instant its dialog opens, as a person's would be
/// (at most 3 presses, each given up to 5 s to show).
pub(super) fn answer_dialog(
    bed: &RealApp,
    id: u64,
    keys: &[&str],
    answered: impl Fn(&Value) -> bool,
) -> Value {
    for _ in 0..3 {
        let sent = bed
            .app
            .request(json!({"Send": {"target": id, "keys": keys}}));
        assert_eq!(sent["Sent"]["delivered"], true, "{sent}");
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            let record = bed.app.record(id);
            if answered(&record) {
                return record;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    panic!("the dialog never took {keys:?}: {}", bed.app.record(id));
}

/// Prompts a CLI would take for its own subcommands or flags, were they arguments.
pub(super) const SUBCOMMAND_LOOKING: [&str; 6] =
    ["doctor", "update", "-v", "--help", "review", "resume"];

/// Spawns one `profile` agent per prompt and waits until the model got each
/// prompt as the user's words; returns the terminals.
pub(super) fn spawn_with_prompts(bed: &RealApp, profile: &str, prompts: &[&str]) -> Vec<u64> {
    let ids = prompts
        .iter()
        .map(|p| bed.spawn(json!({"profile": profile, "prompt": p})))
        .collect();
    for prompt in prompts {
        let got = bed.double.wait_for(LONG, |body| {
            super::last_user_text(body).trim_end().lines().last() == Some(*prompt)
        });
        assert!(
            got.is_some(),
            "the model never got {prompt:?}: {:#?}",
            bed.double
                .requests()
                .iter()
                .map(super::last_user_text)
                .collect::<Vec<_>>()
        );
    }
    ids
}
