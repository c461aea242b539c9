//! How one agent's facts read in a cell: state, time in state, CPU, memory,
//! cost, a message on one line. Pure text; no colours (those are `draw`'s) and
//! nothing of the bus but the record's types.

use std::time::{Duration, SystemTime};

use krad_bus::protocol::AgentRecord;
pub use krad_bus::protocol::{counted, short_commit};

/// How long the agent has been in its state (`12s`, `3m`, `5h`, `2d`; `?`
/// when the app's timestamp cannot be read).
pub(crate) fn since(record: &AgentRecord, now: SystemTime) -> String {
    elapsed(&record.state_since, now).map_or_else(|| "?".to_owned(), relative)
}

/// The time from an RFC 3339 timestamp to `now`; zero for one in the future.
pub fn elapsed(timestamp: &str, now: SystemTime) -> Option<Duration> {
    let then = humantime::parse_rfc3339_weak(timestamp.trim()).ok()?;
    Some(now.duration_since(then).unwrap_or(Duration::ZERO))
}

/// A duration in its largest whole unit.
pub fn relative(duration: Duration) -> String {
    let secs = duration.as_secs();
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86_400 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86_400),
    }
}

/// When `relative` of this age next reads differently: a second for ages
/// under a minute, then at the next whole unit.
pub(crate) fn next_change(age: Duration) -> Duration {
    let secs = age.as_secs();
    let unit = match secs {
        0..60 => 1,
        60..3600 => 60,
        3600..86_400 => 3600,
        _ => 86_400,
    };
    let next = (secs / unit + 1) * unit;
    Duration::from_secs(next)
        .saturating_sub(age)
        .max(Duration::from_millis(10))
}

/// What its processes use now: none for an exited agent (its last sample
/// is of processes that are gone, as `krad top` says too) or before the first.
fn live_usage(record: &AgentRecord) -> Option<&krad_bus::protocol::Usage> {
    record
        .usage
        .as_ref()
        .filter(|_| record.state != krad_bus::protocol::AgentState::Exited)
}

/// CPU of the process tree (`12.5%`), `-` without a live sample.
pub(crate) fn cpu(record: &AgentRecord) -> String {
    live_usage(record).map_or_else(
        || "-".to_owned(),
        |u| format!("{:.1}%", u.cpu_percent.value()),
    )
}

/// Resident memory of the process tree (`180.2M`), `-` without a live sample.
pub(crate) fn memory(record: &AgentRecord) -> String {
    live_usage(record).map_or_else(|| "-".to_owned(), |u| bytes(u.rss_bytes))
}

/// A size, short: `512B`, `4.0K`, `1.2G`.
pub(crate) fn bytes(bytes: u64) -> String {
    bytes_in(bytes, ["B", "K", "M", "G", "T", "P"], "")
}

/// A size in `units` (bytes, then each 1024 times the one before), with one
/// decimal past bytes, `gap` between the number and its unit:
/// `bytes_in(1536, ["B", "KiB", …], " ")` is `1.5 KiB`.
pub fn bytes_in(bytes: u64, units: [&str; 6], gap: &str) -> String {
    if bytes < 1024 {
        return format!("{bytes}{gap}{}", units[0]);
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 1;
    while value >= 1024.0 && unit + 1 < units.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1}{gap}{}", units[unit])
}

/// Each of `names`, a variant's checks, with its outcome: `test passed`,
/// `lint failed(1)`, `-` for a check that never ran there.
pub fn check_outcomes(variant: &krad_bus::protocol::VariantScore, names: &[String]) -> Vec<String> {
    names
        .iter()
        .map(
            |name| match variant.checks.iter().find(|c| &c.name == name) {
                Some(c) => match c.exit_code {
                    Some(code) if code != 0 => format!("{name} {}({code})", c.outcome.as_str()),
                    _ => format!("{name} {}", c.outcome.as_str()),
                },
                None => format!("{name} -"),
            },
        )
        .collect()
}

/// What its model calls cost (`$0.0123`), `?` without a price, `-` without
/// token counts.
pub(crate) fn cost(record: &AgentRecord) -> String {
    match &record.tokens {
        None => "-".to_owned(),
        Some(tokens) => tokens
            .cost_usd
            .map_or_else(|| "?".to_owned(), |c| c.to_string()),
    }
}

/// The name, or `-`.
pub(crate) fn name(record: &AgentRecord) -> String {
    record
        .name
        .as_deref()
        .filter(|n| !n.trim().is_empty())
        .map_or_else(|| "-".to_owned(), one_line)
}

/// The message cell: how it ended (for exited agents) unless its message
/// says so already (`exited with code 3`), then its message.
pub(crate) fn message(record: &AgentRecord) -> String {
    let text = record.message.as_deref().map(one_line).unwrap_or_default();
    let ending = match (record.exit_code, record.signal) {
        (_, Some(signal)) => Some(format!("signal {signal}")),
        (Some(code), None) => Some(format!("code {code}")),
        (None, None) => None,
    }
    .filter(|ending| !text.contains(ending.as_str()));
    let text = match record.queue_place {
        Some(place) => format!("[queue #{place}] {text}"),
        None => text,
    };
    match ending {
        Some(ending) if text.is_empty() => ending,
        Some(ending) => format!("{ending} — {text}"),
        None => text,
    }
}

/// Where it runs: its variant group and number, else its environment.
pub(crate) fn place(record: &AgentRecord) -> String {
    match (&record.group, record.variant) {
        (Some(group), Some(variant)) => format!("{group}#{variant}"),
        (Some(group), None) => group.clone(),
        _ => record.environment.clone(),
    }
}

/// Text made safe for one line: control characters (escape sequences
/// included) become spaces, runs of white space one space.
pub fn one_line(text: &str) -> String {
    let mut line = String::with_capacity(text.len());
    let mut space = false;
    for c in text.trim().chars() {
        if c.is_whitespace() || c.is_control() {
            space = true;
        } else {
            if space && !line.is_empty() {
                line.push(' ');
            }
            space = false;
            line.push(c);
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_their_next_change() {
        assert_eq!(relative(Duration::from_secs(59)), "59s");
        assert_eq!(relative(Duration::from_secs(61)), "1m");
        assert_eq!(
            next_change(Duration::from_millis(1500)),
            Duration::from_millis(500)
        );
        assert_eq!(
            next_change(Duration::from_secs(90)),
            Duration::from_secs(30)
        );
        assert_eq!(bytes(3 * 1024 * 1024), "3.0M");
        assert_eq!(one_line(" a\n\x1b[31mb\t "), "a [31mb");
    }

    /// How it ended is said once: not `code 3 — exited with code 3`.
    #[test]
    fn how_it_ended_is_said_once() {
        use crate::test_support::record;
        let said = record(serde_json::json!({"state": "exited", "exit_code": 3,
            "message": "exited with code 3"}));
        assert_eq!(message(&said), "exited with code 3");
        let killed = record(serde_json::json!({"state": "exited", "signal": 9,
            "message": "bye"}));
        assert_eq!(message(&killed), "signal 9 — bye");
        let quiet = record(serde_json::json!({"state": "exited", "exit_code": 0}));
        assert_eq!(message(&quiet), "code 0");
    }

    /// An exited agent's last sample is of processes that are gone.
    #[test]
    fn an_exited_agent_uses_nothing() {
        use crate::test_support::record;
        let usage = serde_json::json!({"cpu_percent": 50.0, "rss_bytes": 1u64 << 30,
            "processes": 3, "sampled_at": "x"});
        let live = record(serde_json::json!({"usage": usage}));
        assert_eq!(
            (cpu(&live), memory(&live)),
            ("50.0%".to_owned(), "1.0G".to_owned())
        );
        let gone = record(serde_json::json!({"state": "exited", "usage": usage}));
        assert_eq!(
            (cpu(&gone), memory(&gone)),
            ("-".to_owned(), "-".to_owned())
        );
    }
}
