//! `krad ls`: the agents the app hosts, as a table (List).

use std::time::SystemTime;

use krad_bus::request::{Request, deadline, list::List};
use serde_json::Value;

use crate::connect::{Bus, ConnectArgs};
use crate::exit::{Exit, Failure};
use crate::output;
use crate::render::{self, Agent, Column};

/// Arguments of `krad ls`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "SINCE is how long the agent has been in its STATE; SOURCE says where the \
state came from (hook, process, screen, quiet, input).\n\n\
Examples:\n  krad ls\n  krad ls --env feat-x\n  krad ls --json | jq '.Agents[] | select(.state == \"idle\") | .terminal'"
)]
pub struct LsArgs {
    /// Only the agents of this environment.
    #[arg(long = "env", value_name = "NAME")]
    pub environment: Option<String>,
}

/// The table's columns; MESSAGE takes the width that is left.
const COLUMNS: [Column; 8] = [
    Column::new("ID", 2, 8),
    Column::new("NAME", 4, 24),
    Column::new("ENV", 3, 16),
    Column::new("PROFILE", 4, 12),
    Column::new("STATE", 5, 8),
    Column::new("SOURCE", 6, 7),
    Column::new("SINCE", 5, 5),
    Column::new("MESSAGE", 0, usize::MAX),
];

/// Sends List and prints the agents.
pub fn run(args: LsArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let bus = Bus::find(connect)?;
    let request = Request::List(List {
        environment: args.environment,
    });
    let deadline = request.deadline().unwrap_or(deadline::STANDARD);
    let answer = bus.call(&request.to_value(), None, deadline)?;
    if json {
        output::json(&answer);
        return Ok(Exit::Success);
    }
    let Some(agents) = render::records(&answer) else {
        return Err(Failure::new(
            Exit::Failure,
            format!("unexpected answer to List: {answer}"),
        )
        .into());
    };
    if agents.is_empty() {
        output::line("no agents");
        return Ok(Exit::Success);
    }
    for line in agents_table(&agents, render::terminal_width()) {
        output::line(&line);
    }
    Ok(Exit::Success)
}

/// The table of `krad ls`, fitted to `width`.
fn agents_table(agents: &[&Value], width: usize) -> Vec<String> {
    let now = SystemTime::now();
    let cell = |text: Option<&str>| text.map_or_else(|| "-".to_owned(), render::one_line);
    let rows: Vec<Vec<String>> = agents
        .iter()
        .map(|record| {
            let agent = Agent(record);
            vec![
                agent.id(),
                cell(agent.name()),
                cell(agent.place().as_deref()),
                cell(agent.profile()),
                cell(agent.state()),
                cell(agent.source()),
                agent.since(now),
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

    #[test]
    fn a_row_per_agent_with_what_is_there() {
        let full = json!({"terminal":4,"environment":"main","name":"fix-login","profile":"claude",
            "state":"idle","state_source":"hook","message":"All 48 tests pass.\nDone.",
            "state_since":"2020-01-01T00:00:00Z","rev":57});
        let odd = json!({"terminal":5});
        let lines = agents_table(&[&full, &odd], 100);
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("ID  NAME"), "{lines:#?}");
        assert!(lines[1].contains("fix-login") && lines[1].contains("All 48 tests pass. Done."));
        assert!(lines[2].starts_with("5   -"), "{lines:#?}");
        assert!(lines.iter().all(|l| l.chars().count() <= 100));
    }
}
