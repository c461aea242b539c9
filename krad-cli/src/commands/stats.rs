//! `krad stats`: the bus's counters.

use krad_bus::request::stats::{Stats, StatsInfo};

use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::Exit;
use crate::print;

/// Arguments of `krad stats`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  krad stats\n  krad stats --json | jq .Stats.requests_total")]
pub(crate) struct StatsArgs {}

/// Prints the counters.
pub(crate) fn run(_args: StatsArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let reply = AppConnection::find(connect)?.send(Stats {}, None)?;
    print::emit(json, &reply, |stats| print::lines(stats_lines(stats)));
    Ok(Exit::Success)
}

/// `key  value` lines, then the errors by code.
fn stats_lines(stats: &StatsInfo) -> Vec<String> {
    let mut lines: Vec<String> = [
        ("connections_open", stats.connections_open),
        ("requests_total", stats.requests_total),
        ("waits_pending", stats.waits_pending),
        ("subscribers", stats.subscribers),
        ("agents", stats.agents),
        ("uptime_secs", stats.uptime_secs),
    ]
    .iter()
    .map(|(key, value)| format!("{key:<17} {value}"))
    .collect();
    if stats.errors_by_code.is_empty() {
        lines.push("errors            none".to_owned());
    }
    for (code, n) in &stats.errors_by_code {
        lines.push(format!("errors.{code:<10} {n}"));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_then_errors() {
        let mut stats = StatsInfo {
            requests_total: 12,
            ..StatsInfo::default()
        };
        let lines = stats_lines(&stats);
        assert_eq!(lines[1], "requests_total    12");
        assert_eq!(lines.last().unwrap(), "errors            none");
        stats.errors_by_code.insert("not_found".into(), 2);
        assert_eq!(stats_lines(&stats).last().unwrap(), "errors.not_found  2");
    }
}
