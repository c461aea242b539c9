//! Aimed crash points, for the crash tests: with `KRAD_CRASH_AT=<point>` in
//! its environment, the app kills itself with SIGKILL the first time it
//! reaches `<point>` (`<point>:<n>`: the n-th time) — exactly as an outside
//! SIGKILL would, at a place a random kill rarely hits. Without the variable
//! a point costs one load of a flag read once.
//!
//! The points: `spawn-queued`, `spawn-before-program`, `spawn-started`
//! (a Spawn), `queue-started` (a queued Spawn started, still in the store),
//! `queue-send-taken` (a queued Send taken out, not typed yet),
//! `sandbox-set-up` (a sandbox's home and sockets made, bubblewrap not
//! started), `sandbox-proxy-traffic` (a sandbox's connection let through,
//! before its first bytes), `budget-stop` (an agent at its cost limit
//! interrupted, not yet held), `close-removed` (a closed terminal's record
//! gone, the Close not answered yet).
//!
//! Pauses, for the race tests: with `KRAD_PAUSE_AT=<point>:<ms>`, the app
//! sleeps `<ms>` milliseconds (at most 10 s) each time it reaches `<point>`,
//! holding the thread, so that what races with the step after the point
//! comes first. The point: `spawn-program-running` (a program started, its
//! record not yet made: what it sends the bus in its first instant).
//!
//! Owns nothing else; imports nothing of the app.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// The variable naming the point.
pub(crate) const VARIABLE: &str = "KRAD_CRASH_AT";

struct Aim {
    point: String,
    /// Which visit kills (from 1).
    nth: u32,
    visits: AtomicU32,
}

fn aim() -> Option<&'static Aim> {
    static AIM: OnceLock<Option<Aim>> = OnceLock::new();
    AIM.get_or_init(|| {
        let value = std::env::var(VARIABLE).ok()?;
        let (point, nth) = match value.rsplit_once(':') {
            Some((point, n)) => (point.to_owned(), n.parse().ok()?),
            None => (value, 1),
        };
        Some(Aim {
            point,
            nth,
            visits: AtomicU32::new(0),
        })
    })
    .as_ref()
}

/// Dies here with SIGKILL if the variable names `point` and this is the
/// visit it names.
pub(crate) fn here(point: &str) {
    let Some(aim) = aim() else {
        return;
    };
    if aim.point != point || aim.visits.fetch_add(1, Ordering::SeqCst) + 1 != aim.nth {
        return;
    }
    tracing::warn!(point, "{VARIABLE}: the app kills itself here");
    let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
}

/// The variable naming a pause.
pub(crate) const PAUSE: &str = "KRAD_PAUSE_AT";

/// Sleeps here if [`PAUSE`] names `point`, for as long as it says.
pub(crate) fn pause(point: &str) {
    static PAUSED: OnceLock<Option<(String, std::time::Duration)>> = OnceLock::new();
    let paused = PAUSED.get_or_init(|| {
        let value = std::env::var(PAUSE).ok()?;
        let (point, ms) = value.rsplit_once(':')?;
        let ms: u64 = ms.parse().ok()?;
        Some((
            point.to_owned(),
            std::time::Duration::from_millis(ms.min(10_000)),
        ))
    });
    if let Some((aimed, how_long)) = paused
        && aimed == point
    {
        tracing::warn!(point, "{PAUSE}: the app pauses here for {how_long:?}");
        std::thread::sleep(*how_long);
    }
}
