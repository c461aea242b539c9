//! `krad ls`: the agents the app hosts, as a table (List).

use std::time::SystemTime;

use krad_bus::protocol::AgentRecord;
use krad_bus::request::list::List;

use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::Exit;
use crate::print;
use crate::render::{self, Agent, Column};

/// Arguments of `krad ls`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "SINCE is how long the agent has been in its STATE; SOURCE says where the \
state came from (hook, process, screen, quiet, input). CPU (percent of one core) and MEM \
(resident memory) are those of the agent's whole process tree, sampled every 2 s (`-` \
before the first sample, and on SSH hosts without tmux); `krad top` follows them live. \
COST is what the agent's model calls cost at the config's prices, from its CLI's own files \
(Claude Code, Codex): `?` for a model without a price, `-` for an agent without such files. \
An agent sent with --queue that [limits] left no room for is `queued`, its place in the queue \
first in MESSAGE (`[queue #2]`; also for an agent a queued send waits for); it starts in \
that order as room frees.\n\n\
Examples:\n  krad ls\n  krad ls --env feat-x\n  krad ls --json | jq '.Agents[] | select(.state == \"idle\") | .terminal'"
)]
pub(crate) struct LsArgs {
    /// Only the agents of this environment.
    #[arg(long = "env", value_name = "NAME")]
    pub environment: Option<String>,
}

/// The table's columns; MESSAGE takes the width that is left.
const COLUMNS: [Column; 11] = [
    Column::new("ID", 2, 8),
    Column::new("NAME", 4, 24),
    Column::new("ENV", 3, 16),
    Column::new("PROFILE", 4, 12),
    Column::new("STATE", 5, 8),
    Column::new("SOURCE", 6, 7),
    Column::new("SINCE", 5, 5),
    Column::new("CPU", 3, 7),
    Column::new("MEM", 3, 10),
    Column::new("COST", 4, 9),
    Column::new("MESSAGE", 0, usize::MAX),
];

/// Sends List and prints the agents.
pub(crate) fn run(args: LsArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let request = List {
        environment: args.environment,
    };
    let reply = AppConnection::find(connect)?.send(request, None)?;
    print::emit(json, &reply, |agents| {
        print::lines(agents_table(
            agents,
            SystemTime::now(),
            render::terminal_width(),
        ));
    });
    Ok(Exit::Success)
}

/// The table of `krad ls`, fitted to `width`; `no agents` when there are none.
fn agents_table(agents: &[AgentRecord], now: SystemTime, width: usize) -> Vec<String> {
    if agents.is_empty() {
        return vec!["no agents".to_owned()];
    }
    let rows: Vec<Vec<String>> = agents
        .iter()
        .map(|record| {
            let agent = Agent(record);
            let mut row = agent.row(now, true);
            let mut message = row.pop().unwrap_or_default();
            if let Some(place) = record.queue_place {
                // Its Spawn, or a Send for it, waits in the app's queue.
                message = format!("[queue #{place}] {message}");
            }
            row.extend([
                agent.cpu_cell(),
                agent.memory_cell(),
                agent.cost_cell(),
                message,
            ]);
            row
        })
        .collect();
    render::table(&COLUMNS, &rows, width)
}

#[cfg(test)]
mod tests {
    use super::*;
    use krad_bus::protocol::{Response, TypedAnswer};
    use serde_json::json;

    #[test]
    fn a_row_per_agent_with_what_is_there() {
        let full = render::test_record(json!({"terminal":4,"environment":"main",
            "name":"fix-login","profile":"claude","state":"idle","state_source":"hook",
            "message":"All 48 tests pass.\nDone.","state_since":"2020-01-01T00:00:00Z","rev":57}));
        let bare = render::test_record(json!({"terminal":5,
            "usage":{"cpu_percent":12.5,"rss_bytes":3_145_728,"processes":2,"sampled_at":"x"},
            "tokens":{"input":1,"output":2,"cache_write":0,"cache_read":0,"model":"m",
                "cost_usd":0.0123,"cost_unknown":null}}));
        let lines = agents_table(&[full, bare], SystemTime::now(), 120);
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("ID  NAME"), "{lines:#?}");
        assert!(lines[1].contains("fix-login") && lines[1].contains("All 48 tests pass. Done."));
        assert!(lines[2].starts_with("5   -"), "{lines:#?}");
        assert!(
            lines[2].contains("12.5%")
                && lines[2].contains("3.0 MiB")
                && lines[2].contains("$0.0123"),
            "{lines:#?}"
        );
        assert!(lines.iter().all(|l| l.chars().count() <= 120));
        assert_eq!(agents_table(&[], SystemTime::now(), 100), vec!["no agents"]);
    }

    #[test]
    fn a_queued_agent_shows_its_place() {
        let queued = render::test_record(json!({"terminal":9,"state":"queued",
            "queue_place":2,"message":"waiting in the queue for room under [limits]"}));
        let lines = agents_table(&[queued], SystemTime::now(), 160);
        assert!(lines[1].contains("queued"), "{lines:#?}");
        assert!(
            lines[1].contains("[queue #2] waiting in the queue"),
            "{lines:#?}"
        );
    }

    #[test]
    fn a_newer_apps_record_prints_question_marks() {
        let answer = json!({"Agents":[{"terminal":7,"environment":"main","name":"dreamer",
            "profile":"claude","command":["claude"],"lead":false,"parent":null,"group":null,
            "variant":null,"state":"sleeping","state_source":"telepathy","message":"zzz",
            "exit_code":null,"signal":null,"pid":42,"title":null,
            "started_at":"2025-01-01T00:00:00Z","state_since":"2025-01-01T00:00:00Z",
            "rev":3,"mood":{"calm":true}}]});
        let decoded = Response::decode(answer).unwrap();
        let agents = Vec::<AgentRecord>::from_response(decoded.response).unwrap();
        let now = humantime::parse_rfc3339("2025-01-01T00:00:12Z").unwrap();
        let lines = agents_table(&agents, now, 100);
        let cells: Vec<&str> = lines[1].split_whitespace().collect();
        assert_eq!(
            cells,
            [
                "7", "dreamer", "main", "claude", "?", "?", "12s", "-", "-", "-", "zzz"
            ],
            "{lines:#?}"
        );
    }
}
