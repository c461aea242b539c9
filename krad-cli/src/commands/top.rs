//! `krad top`: the agents by what they cost the machine — CPU and resident
//! memory of each one's whole process tree, as the app samples them every
//! 2 s — busiest first, redrawn in place every 2 s (List).

use std::io::IsTerminal;
use std::time::Duration;

use krad_bus::protocol::AgentRecord;
use krad_bus::request::list::List;

use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::{Exit, Failure};
use crate::print;
use crate::render::{self, Agent, Column};

/// Arguments of `krad top`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
CPU is in percent of one core (above 100% when an agent keeps several cores busy), MEM \
the resident memory of its processes (the program and every process below it), PROCS \
how many there are; the app samples them every 2 s, off its request path. Agents on SSH \
hosts without tmux show `-`. TOKENS and COST are those of the agent's model calls, read \
from its CLI's own files (Claude Code, Codex) every 2 s and priced from the config \
(`?`: a model without a price). On a terminal the table is redrawn in place every 2 s; piped, a table is \
printed every 2 s, tables separated by a blank line. With --json, each refresh is List's \
answer, one line. Ends when the app stops.

Examples:
  krad top
  krad top --sort mem --limit 10
  krad top --sort cost --once
  krad top --once --json | jq '.Agents[] | {terminal, usage}'")]
pub(crate) struct TopArgs {
    /// Only the agents of this environment.
    #[arg(long = "env", value_name = "NAME")]
    pub environment: Option<String>,
    /// What the busiest are: cpu or mem.
    #[arg(long, value_enum, default_value_t = SortBy::Cpu)]
    pub sort: SortBy,
    /// Show this many agents at most (the busiest).
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Print once and exit.
    #[arg(long)]
    pub once: bool,
}

/// What `krad top` sorts by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum SortBy {
    /// CPU, busiest first.
    Cpu,
    /// Resident memory, largest first.
    Mem,
    /// What the model calls cost, dearest first.
    Cost,
}

/// How often the table is refreshed: the app's sampling period.
const REFRESH: Duration = Duration::from_secs(2);

/// The table's columns; MESSAGE takes the width that is left.
const COLUMNS: [Column; 10] = [
    Column::new("ID", 2, 8),
    Column::new("NAME", 4, 24),
    Column::new("ENV", 3, 16),
    Column::new("STATE", 5, 8),
    Column::new("CPU", 3, 7),
    Column::new("MEM", 3, 10),
    Column::new("PROCS", 5, 5),
    Column::new("TOKENS", 6, 7),
    Column::new("COST", 4, 9),
    Column::new("MESSAGE", 0, usize::MAX),
];

/// Lists the agents every 2 s (once with `--once`) and prints them busiest first.
pub(crate) fn run(args: TopArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let bus = AppConnection::find(connect)?;
    let live = !args.once && std::io::stdout().is_terminal();
    let mut drawn = false;
    loop {
        let request = List {
            environment: args.environment.clone(),
        };
        let reply = match bus.send(request, None) {
            Ok(reply) => reply,
            // Once shown, an app that stops ends the view, as `krad watch`.
            Err(failure) if drawn && failure.exit == Exit::Unreachable => {
                print::line("the app stopped");
                return Ok(Exit::Success);
            }
            Err(failure) => return Err(anyhow::Error::new::<Failure>(failure)),
        };
        if json {
            print::json(&reply.raw);
        } else {
            let width = render::terminal_width();
            let table = top_table(&reply.answer, args.sort, args.limit, width).join("\n");
            let frame = if live {
                let header = render::truncate(&header(&reply.answer, args.sort), width);
                format!("\x1b[H\x1b[2J{header}\n{table}")
            } else if drawn {
                format!("\n{table}")
            } else {
                table
            };
            print::line(&frame);
        }
        drawn = true;
        if args.once {
            return Ok(Exit::Success);
        }
        std::thread::sleep(REFRESH);
    }
}

/// `krad top: 3 agents — 112.5% CPU, 1.2 GiB — by cpu — Ctrl-C to quit`.
/// CPU and memory are the live agents' (an exited one's last sample is of
/// processes that are gone); the cost is everyone's (spent stays spent).
fn header(agents: &[AgentRecord], sort: SortBy) -> String {
    let cpu: f64 = agents
        .iter()
        .filter_map(|a| Agent(a).live_usage())
        .map(|u| u.cpu_percent.value())
        .sum();
    let memory: u64 = agents
        .iter()
        .filter_map(|a| Agent(a).live_usage())
        .map(|u| u.rss_bytes)
        .sum();
    let cost: u64 = agents
        .iter()
        .filter_map(|a| a.tokens.as_ref()?.cost_usd)
        .map(|c| c.0)
        .sum();
    let count = match agents.len() {
        1 => "1 agent".to_owned(),
        n => format!("{n} agents"),
    };
    let by = match sort {
        SortBy::Cpu => "cpu",
        SortBy::Mem => "mem",
        SortBy::Cost => "cost",
    };
    format!(
        "krad top: {count} — {cpu:.1}% CPU, {}, {} — by {by} — Ctrl-C to quit",
        render::bytes(memory),
        krad_bus::protocol::Dollars(cost)
    )
}

/// The table, busiest first (agents without a sample last, by id), at most
/// `limit` rows, fitted to `width`; `no agents` when there are none.
fn top_table(
    agents: &[AgentRecord],
    sort: SortBy,
    limit: Option<usize>,
    width: usize,
) -> Vec<String> {
    if agents.is_empty() {
        return vec!["no agents".to_owned()];
    }
    let mut sorted: Vec<&AgentRecord> = agents.iter().collect();
    let weight = |a: &AgentRecord| match sort {
        SortBy::Cost => a.tokens.as_ref().and_then(|t| t.cost_usd).map(|c| (c.0, 0)),
        _ => Agent(a).live_usage().map(|u| match sort {
            SortBy::Mem => (u.rss_bytes, u64::from(u.cpu_percent.0)),
            _ => (u64::from(u.cpu_percent.0), u.rss_bytes),
        }),
    };
    sorted.sort_by(|a, b| weight(b).cmp(&weight(a)).then(a.terminal.cmp(&b.terminal)));
    let rows: Vec<Vec<String>> = sorted
        .into_iter()
        .take(limit.unwrap_or(usize::MAX))
        .map(|record| {
            let agent = Agent(record);
            vec![
                agent.id(),
                agent
                    .name()
                    .map_or_else(|| "-".to_owned(), render::one_line),
                render::one_line(&agent.place()),
                agent.state().to_owned(),
                agent.cpu_cell(),
                agent.memory_cell(),
                agent
                    .live_usage()
                    .map_or_else(|| "-".to_owned(), |u| u.processes.to_string()),
                agent.tokens_cell(),
                agent.cost_cell(),
                agent.message_cell(),
            ]
        })
        .collect();
    render::table(&COLUMNS, &rows, width)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn agent(terminal: u64, cpu: f64, rss: u64) -> AgentRecord {
        render::test_record(json!({"terminal": terminal, "usage":
            {"cpu_percent": cpu, "rss_bytes": rss, "processes": 2, "sampled_at": "x"}}))
    }

    /// Issue 48: the header summed exited agents' last samples, and their
    /// rows showed processes.
    #[test]
    fn exited_agents_count_for_cost_only() {
        let mut gone = render::test_record(json!({"terminal": 9, "state": "exited",
            "usage": {"cpu_percent": 50.0, "rss_bytes": 1u64 << 30, "processes": 3, "sampled_at": "x"}}));
        gone.tokens = None;
        let agents = [agent(1, 5.0, 100 << 20), gone];
        let said = header(&agents, SortBy::Cpu);
        assert!(said.contains("5.0% CPU, 100.0 MiB"), "{said}");
        let table = top_table(&agents, SortBy::Cpu, None, 200);
        let row = table.iter().find(|l| l.starts_with('9')).unwrap();
        assert!(!row.contains("50.0%") && !row.contains("GiB"), "{row}");
    }

    #[test]
    fn the_busiest_come_first_and_unsampled_last() {
        let agents = [
            agent(1, 5.0, 900 << 20),
            agent(2, 80.5, 10 << 20),
            render::test_record(json!({"terminal": 3})),
        ];
        let ids = |lines: Vec<String>| -> Vec<String> {
            lines[1..]
                .iter()
                .map(|l| l.split_whitespace().next().unwrap_or_default().to_owned())
                .collect()
        };
        assert_eq!(
            ids(top_table(&agents, SortBy::Cpu, None, 100)),
            ["2", "1", "3"]
        );
        assert_eq!(
            ids(top_table(&agents, SortBy::Mem, None, 100)),
            ["1", "2", "3"]
        );
        assert_eq!(ids(top_table(&agents, SortBy::Cpu, Some(1), 100)), ["2"]);
        let lines = top_table(&agents, SortBy::Cpu, None, 100);
        assert!(
            lines[1].contains("80.5%") && lines[1].contains("10.0 MiB"),
            "{lines:#?}"
        );
        assert_eq!(top_table(&[], SortBy::Cpu, None, 100), ["no agents"]);
        let header = header(&agents, SortBy::Mem);
        assert!(
            header.contains("3 agents — 85.5% CPU, 910.0 MiB, $0.0000 — by mem"),
            "{header}"
        );
    }
}
