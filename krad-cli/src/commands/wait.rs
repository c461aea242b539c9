//! `krad wait`: until one agent, or all or any of several, stops or exits (Wait).
//! Exits 9 when a waited agent exited non-zero or was killed, so scripts can
//! chain `krad wait 4 --exit && …`.

use krad_bus::protocol::{AgentRecord, Waited};
use krad_bus::request::check::Check;
use krad_bus::request::list::List;
use krad_bus::request::{
    deadline,
    wait::{Until, Wait, WaitFor},
};

use crate::connect::{AppConnection, ConnectArgs, Received};
use crate::exit::{Exit, Failure};
use crate::print;
use crate::render::Agent;
use crate::status::StatusLine;

/// Arguments of `krad wait`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
By default waits until every TARGET has stopped: idle, asking or exited. Exit codes: 0 when \
the condition holds, 5 when --timeout passes first, 9 when a waited agent exited with a \
non-zero code or by a signal (its code is printed on stderr).

Examples:
  krad wait 4
  krad wait 4 5 6 --any --timeout 10m
  krad wait 7 --exit && echo \"the build passed\"")]
pub(crate) struct WaitArgs {
    /// The terminals to wait for: ids, or the agents' names.
    #[arg(value_name = "TARGET", required = true, num_args = 1..,
          value_parser = super::parse_target)]
    pub targets: Vec<super::Target>,
    /// With several targets: return as soon as one of them is done (default: all).
    #[arg(long)]
    pub any: bool,
    /// Wait until the agents have exited, not just stopped working.
    #[arg(long)]
    pub exit: bool,
    /// Give up after this long (seconds, or 90s, 10m; at most 1800 s).
    #[arg(long, value_name = "SECS", default_value = "1800", value_parser = parse_wait_secs)]
    pub timeout: u64,
}

/// Sends Wait and prints the records it answers.
pub(crate) fn run(args: WaitArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let app = AppConnection::find(connect)?;
    let targets = super::target::resolve_all(&args.targets, &app)?;
    let status = status_line(connect, &targets, json);
    let sent = app.send(wait_request(&targets, &args), None);
    drop(status);
    let Received { raw, answer } = sent?;
    let records = match answer {
        Waited::Agent(record) => vec![*record],
        Waited::Agents(records) => records,
        Waited::TimedOut => {
            let failure = still_going(&app, &targets, args.exit, args.timeout);
            return Err(failure.answered(raw).into());
        }
    };
    if json {
        print::json(&raw);
    }
    let mut exit = Exit::Success;
    for record in &records {
        let agent = Agent(record);
        if !json {
            print::line(&agent.summary_line());
        }
        if let Some(failure) = agent.failure() {
            eprintln!("krad: terminal {} {failure}", agent.id());
            exit = Exit::ProgramFailed;
        }
    }
    Ok(exit)
}

/// On a terminal, the agents waited on and their states, with the time
/// waited so far (`krad wait: 4 working, 5 idle — 12 s`).
fn status_line(connect: &ConnectArgs, targets: &[u64], json: bool) -> Option<StatusLine> {
    let watcher = AppConnection::find(connect).ok()?;
    let targets = targets.to_vec();
    StatusLine::show(json, move |elapsed| {
        let agents = watcher
            .send(List::default(), None)
            .map(|reply| reply.answer)
            .unwrap_or_default();
        let states: Vec<String> = targets
            .iter()
            .map(|target| {
                let state = agents
                    .iter()
                    .find(|a| a.terminal == *target)
                    .map_or("?", |a| Agent(a).state());
                format!("{target} {state}")
            })
            .collect();
        format!(
            "krad wait: {} — {}",
            states.join(", "),
            crate::status::elapsed(elapsed)
        )
    })
}

/// Exit 5 when the `timeout` passed first, saying where each of `targets`
/// is (its state and message, as it is now), waited on until it `exited`
/// or until it stopped.
pub(crate) fn still_going(
    app: &AppConnection,
    targets: &[u64],
    exited: bool,
    timeout: u64,
) -> Failure {
    let records: Vec<AgentRecord> = targets
        .iter()
        .filter_map(|&target| {
            let check = Check {
                target,
                wait_secs: None,
                since_rev: None,
            };
            app.send(check, None).ok().map(|r| r.answer)
        })
        .collect();
    let waited = if exited { "exited" } else { "stopped" };
    Failure::new(Exit::TimedOut, timed_out_message(&records, waited, timeout))
}

/// `terminal 4 is still working ("running tests") after 2 s: it has not
/// stopped; wait longer with --timeout`.
fn timed_out_message(records: &[AgentRecord], waited: &str, timeout: u64) -> String {
    let each: Vec<String> = records
        .iter()
        .map(|record| {
            let agent = Agent(record);
            match agent.message() {
                Some(message) => {
                    format!("terminal {} is {} ({message:?})", agent.id(), agent.state())
                }
                None => format!("terminal {} is {}", agent.id(), agent.state()),
            }
        })
        .collect();
    let now = if each.is_empty() {
        "the agents".to_owned()
    } else {
        each.join(", ")
    };
    format!(
        "{now} after {timeout} s: not {waited} yet (timed out, exit 5); wait longer with \
         --timeout (at most 1800 s)"
    )
}

/// The request: `target` for one terminal, `targets` for several.
fn wait_request(targets: &[u64], args: &WaitArgs) -> Wait {
    let (target, targets) = match targets {
        [one] => (Some(*one), None),
        many => (None, Some(many.to_vec())),
    };
    Wait {
        target,
        targets,
        until: args.any.then_some(Until::Any),
        for_: args.exit.then_some(WaitFor::Exit),
        timeout_secs: Some(args.timeout),
        ..Wait::default()
    }
}

/// Parses a wait of at most 1800 s: whole seconds (`90`) or a duration (`90s`, `10m`).
pub(crate) fn parse_wait_secs(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let secs = match text.parse::<u64>() {
        Ok(secs) => secs,
        Err(_) => humantime::parse_duration(text)
            .map_err(|e| format!("{e} (write seconds, like 90, or a duration, like 10m)"))?
            .as_secs(),
    };
    if secs > deadline::MAX_WAIT_SECS {
        return Err(format!(
            "at most {} seconds (30m), not {secs}",
            deadline::MAX_WAIT_SECS
        ));
    }
    Ok(secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_says_where_each_agent_is() {
        let record: AgentRecord = serde_json::from_value(serde_json::json!({
            "terminal": 4, "environment": "main", "profile": "exec", "command": ["x"],
            "lead": false, "state": "working", "state_source": "hook",
            "message": "running tests", "started_at": "2026-01-01T00:00:00Z",
            "state_since": "2026-01-01T00:00:00Z", "rev": 3
        }))
        .unwrap();
        let said = timed_out_message(&[record], "stopped", 2);
        assert!(
            said.starts_with("terminal 4 is working (\"running tests\") after 2 s"),
            "{said}"
        );
        assert!(!said.contains("TimedOut"), "{said}");
    }
    use krad_bus::request::Request;
    use serde_json::json;

    fn args(targets: &[u64], any: bool, exit: bool) -> WaitArgs {
        WaitArgs {
            targets: targets
                .iter()
                .map(|&id| super::super::Target::Id(id))
                .collect(),
            any,
            exit,
            timeout: 600,
        }
    }

    #[test]
    fn one_target_or_several() {
        let one = Request::Wait(wait_request(&[4], &args(&[4], false, false))).to_value();
        assert_eq!(one, json!({"Wait":{"target":4,"timeout_secs":600}}));
        let many = Request::Wait(wait_request(&[4, 5], &args(&[4, 5], true, true))).to_value();
        assert_eq!(
            many,
            json!({"Wait":{"targets":[4,5],"until":"any","for":"exit","timeout_secs":600}})
        );
    }

    #[test]
    fn wait_secs_take_seconds_or_durations() {
        assert_eq!(parse_wait_secs("90"), Ok(90));
        assert_eq!(parse_wait_secs("10m"), Ok(600));
        assert_eq!(parse_wait_secs("1800"), Ok(1800));
        assert!(parse_wait_secs("1801").is_err());
        assert!(parse_wait_secs("1h").is_err());
        assert!(parse_wait_secs("soon").is_err());
    }
}
