//! `krad stats`: the bus's counters.

use krad_bus::request::{Request, deadline, stats::Stats};

use crate::connect::{Bus, ConnectArgs};
use crate::exit::Exit;
use crate::output;

/// Arguments of `krad stats`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  krad stats\n  krad stats --json | jq .Stats.requests_total")]
pub struct StatsArgs {}

/// Prints the counters.
pub fn run(_args: StatsArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let bus = Bus::find(connect)?;
    let answer = bus.call(
        &Request::Stats(Stats {}).to_value(),
        None,
        deadline::STANDARD,
    )?;
    if json {
        output::json(&answer);
        return Ok(Exit::Success);
    }
    let stats = &answer["Stats"];
    for key in [
        "connections_open",
        "requests_total",
        "waits_pending",
        "subscribers",
        "agents",
        "uptime_secs",
    ] {
        output::line(&format!("{key:<17} {}", stats[key]));
    }
    let errors = stats["errors_by_code"]
        .as_object()
        .filter(|e| !e.is_empty());
    match errors {
        None => output::line("errors            none"),
        Some(errors) => {
            for (code, n) in errors {
                output::line(&format!("errors.{code:<10} {n}"));
            }
        }
    }
    Ok(Exit::Success)
}
