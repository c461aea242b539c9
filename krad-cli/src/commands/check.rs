//! `krad check`: one agent's record, now or as soon as it changes (Check).

use std::time::SystemTime;

use krad_bus::protocol::AgentRecord;
use krad_bus::request::check::Check;

use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::Exit;
use crate::print;
use crate::render::{self, Agent};

use super::wait::parse_wait_secs;

/// Arguments of `krad check`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "With --wait, the answer comes as soon as the agent's rev passes --since-rev \
(default: its rev when the request arrives), or after SECS with the unchanged record.\n\n\
Examples:\n  krad check 4\n  krad check 4 --wait 60 --since-rev 57\n  krad check 4 --json | jq -r .Agent.state"
)]
pub(crate) struct CheckArgs {
    /// The terminal id, or the agent's name.
    #[arg(value_name = "TARGET", value_parser = super::parse_target)]
    pub target: super::Target,
    /// Wait up to this long for the record to change (seconds, or 90s, 10m; at most 1800 s).
    #[arg(long = "wait", value_name = "SECS", value_parser = parse_wait_secs)]
    pub wait_secs: Option<u64>,
    /// With --wait: answer once the agent's rev is past N.
    #[arg(long, value_name = "N", requires = "wait_secs")]
    pub since_rev: Option<u64>,
}

/// Sends Check and prints the record.
pub(crate) fn run(args: CheckArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let app = AppConnection::find(connect)?;
    let request = Check {
        target: args.target.resolve(&app)?,
        wait_secs: args.wait_secs,
        since_rev: args.since_rev,
    };
    let reply = app.send(request, None)?;
    print::emit(json, &reply, |record| {
        print::lines(summary(record, SystemTime::now()));
    });
    Ok(Exit::Success)
}

/// A few `key  value` lines about one record; fields that are missing are left out.
fn summary(record: &AgentRecord, now: SystemTime) -> Vec<String> {
    let agent = Agent(record);
    let mut lines = Vec::new();
    let mut row = |key: &str, value: String| lines.push(format!("{key:<9} {value}"));

    let mut terminal = format!(
        "{} in {}",
        agent.id(),
        render::one_line(&record.environment)
    );
    if let Some(pid) = record.pid {
        terminal.push_str(&format!(", pid {pid}"));
    }
    row("terminal", terminal);
    if let Some(name) = agent.name() {
        row("name", render::one_line(name));
    }
    let profile = render::one_line(&record.profile);
    if record.command.is_empty() {
        row("profile", profile);
    } else {
        let argv = render::truncate(&render::one_line(&record.command.join(" ")), 60);
        row("profile", format!("{profile} ({argv})"));
    }
    let mut state = agent.state_label();
    if agent.state_since().is_some() {
        state.push_str(&format!(" for {}", agent.since(now)));
    }
    row("state", state);
    if let Some(since) = agent.state_since() {
        row("since", render::one_line(since));
    }
    if let Some(message) = agent.message() {
        row("message", render::one_line(message));
    }
    if let Some(title) = agent.title() {
        row("title", render::one_line(title));
    }
    if let Some(ending) = agent.ending() {
        row("exit", ending);
    }
    row("rev", record.rev.to_string());
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use krad_bus::protocol::{Response, TypedAnswer};
    use serde_json::json;

    #[test]
    fn summary_of_a_full_and_a_bare_record() {
        let now = humantime::parse_rfc3339("2025-01-01T00:00:12Z").unwrap();
        let record = render::test_record(json!({"terminal":4,"environment":"main",
            "name":"fix-login","profile":"claude","command":["claude","fix the login bug"],
            "state":"exited","state_source":"process","message":"bye","exit_code":3,
            "signal":null,"pid":12,"state_since":"2025-01-01T00:00:00Z","rev":58}));
        let lines = summary(&record, now);
        assert_eq!(lines[0], "terminal  4 in main, pid 12");
        assert!(
            lines.contains(&"state     exited (process) for 12s".to_owned()),
            "{lines:#?}"
        );
        assert!(lines.contains(&"exit      code 3".to_owned()), "{lines:#?}");
        assert!(lines.contains(&"rev       58".to_owned()), "{lines:#?}");
        let bare = render::test_record(json!({"terminal":5,"state_since":""}));
        assert_eq!(
            summary(&bare, now),
            vec![
                "terminal  5 in main",
                "profile   shell",
                "state     working (process)",
                "rev       1"
            ]
        );
    }

    #[test]
    fn a_newer_apps_record_prints_question_marks() {
        let answer = json!({"Agent":{"terminal":7,"environment":"main","name":"dreamer",
            "profile":"claude","command":["claude"],"lead":false,"parent":null,"group":null,
            "variant":null,"state":"sleeping","state_source":"telepathy","message":"zzz",
            "exit_code":null,"signal":null,"pid":42,"title":null,
            "started_at":"2025-01-01T00:00:00Z","state_since":"2025-01-01T00:00:00Z",
            "rev":3,"mood":{"calm":true}}});
        let decoded = Response::decode(answer).unwrap();
        let record = AgentRecord::from_response(decoded.response).unwrap();
        let now = humantime::parse_rfc3339("2025-01-01T00:00:12Z").unwrap();
        let lines = summary(&record, now);
        assert!(
            lines.contains(&"state     ? (?) for 12s".to_owned()),
            "{lines:#?}"
        );
        assert_eq!(lines[0], "terminal  7 in main, pid 42");
    }
}
