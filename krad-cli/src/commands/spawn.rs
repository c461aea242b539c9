//! `krad spawn`: starts an agent on a new terminal (Spawn).

use std::collections::BTreeMap;

use krad_bus::protocol::AgentRecord;
use krad_bus::request::spawn::{MAX_SIDE, Spawn};

use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::{Exit, Failure};
use crate::print;
use crate::render::{self, Agent};

use super::send::read_stdin_text;

/// Arguments of `krad spawn`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
The prompt reaches the agent as its profile says (as the last argument, typed into the \
terminal, or not at all). Words after `--` are the command to run instead of the profile's.

Examples:
  krad spawn --profile claude --name fix-login --prompt 'fix the login bug'
  git diff | krad spawn --profile codex --prompt -
  krad spawn --profile exec --env feat-x --var RUST_LOG=debug -- make test
  krad spawn --profile claude --env feat-x --sandbox --prompt 'refactor the parser'
  krad spawn --profile claude --max-cost 2.50 --prompt 'port the tests'
  krad spawn --profile codex --queue --prompt 'update the changelog'   # waits for room")]
pub(crate) struct SpawnArgs {
    /// How to start the agent (shell, exec, claude, codex, or one from the config; default: the config's).
    #[arg(long, value_name = "P")]
    pub profile: Option<String>,
    /// The environment to run in (default: the caller's, or main).
    #[arg(long = "env", value_name = "NAME")]
    pub environment: Option<String>,
    /// A name to show for the terminal.
    #[arg(long, value_name = "N")]
    pub name: Option<String>,
    /// Give the terminal a lead token: it may spawn, send and close anywhere.
    #[arg(long)]
    pub lead: bool,
    /// The terminal's width in columns (default 120).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=i64::from(MAX_SIDE)))]
    pub cols: Option<u16>,
    /// The terminal's height in rows (default 40).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=i64::from(MAX_SIDE)))]
    pub rows: Option<u16>,
    /// An environment variable for the program (repeatable).
    #[arg(long = "var", value_name = "KEY=VALUE", value_parser = parse_var)]
    pub vars: Vec<(String, String)>,
    /// Run it in a sandbox (bubblewrap): writes only in its environment, a
    /// private HOME; see docs/sandbox.md.
    #[arg(long)]
    pub sandbox: bool,
    /// What its model calls may cost, in US dollars: reached, it is
    /// interrupted and shown asking (`krad budget` raises it).
    #[arg(long, value_name = "USD", value_parser = super::budget::dollars)]
    pub max_cost: Option<krad_bus::protocol::Dollars>,
    /// When the app's [limits] leave no room now, wait in its queue (shown
    /// `queued` in `krad ls`, started in order) instead of answering busy (exit 1).
    #[arg(long)]
    pub queue: bool,
    /// The task for the agent; - reads it from stdin (which must not be empty).
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    pub prompt: Option<String>,
    /// The command to run instead of the profile's (after --).
    #[arg(last = true, value_name = "ARGV")]
    pub command: Vec<String>,
}

/// Sends Spawn and prints the new terminal.
pub(crate) fn run(args: SpawnArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let prompt = match args.prompt.as_deref() {
        Some("-") => {
            let text = read_stdin_text("the prompt")?;
            if text.trim().is_empty() {
                return Err(Failure::new(
                    Exit::Usage,
                    "--prompt -: standard input was empty; pipe the task in, or leave \
                     --prompt out to start the agent without one",
                )
                .into());
            }
            Some(text)
        }
        other => other.map(str::to_owned),
    };
    let request = Spawn {
        environment: args.environment,
        profile: args.profile,
        command: (!args.command.is_empty()).then_some(args.command),
        prompt,
        name: args.name,
        lead: args.lead.then_some(true),
        env: (!args.vars.is_empty()).then(|| args.vars.into_iter().collect::<BTreeMap<_, _>>()),
        cols: args.cols,
        rows: args.rows,
        sandbox: args.sandbox.then_some(true),
        max_cost_usd: args.max_cost,
        queue: args.queue.then_some(true),
    };
    let reply = AppConnection::find(connect)?.send(request, None)?;
    print::emit(json, &reply, |record| print::line(&spawned_line(record)));
    Ok(Exit::Success)
}

/// `spawned terminal 5 (profile claude) in main, pid 1234`, or `queued
/// terminal 5 (profile claude) in main, place 2`.
fn spawned_line(record: &AgentRecord) -> String {
    if record.state == krad_bus::protocol::AgentState::Queued {
        return format!(
            "queued terminal {} (profile {}) in {}, place {} in the queue: it starts when \
             [limits] leave room",
            record.terminal,
            render::one_line(&record.profile),
            render::one_line(&record.environment),
            record.queue_place.unwrap_or_default()
        );
    }
    let mut line = format!(
        "spawned terminal {} (profile {}) in {}",
        record.terminal,
        render::one_line(&record.profile),
        render::one_line(&record.environment)
    );
    if let Some(pid) = record.pid {
        line.push_str(&format!(", pid {pid}"));
    }
    if let Some(name) = Agent(record).name() {
        line.push_str(&format!(", named {:?}", render::one_line(name)));
    }
    line
}

/// Parses `KEY=VALUE`; the key must be a variable name the app accepts.
fn parse_var(text: &str) -> Result<(String, String), String> {
    let Some((key, value)) = text.split_once('=') else {
        return Err(format!("{text:?} is not KEY=VALUE"));
    };
    if key.is_empty() {
        return Err(format!("{text:?} has no variable name before the ="));
    }
    if key.contains('\0') || value.contains('\0') {
        return Err("a variable may not contain a NUL byte".to_owned());
    }
    if key.starts_with("KRAD_ADE_") {
        return Err(format!("{key} is set by the app"));
    }
    Ok((key.to_owned(), value.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn vars_are_checked_locally() {
        assert_eq!(parse_var("A=b=c"), Ok(("A".into(), "b=c".into())));
        assert_eq!(parse_var("EMPTY="), Ok(("EMPTY".into(), String::new())));
        assert!(parse_var("NOVALUE").is_err());
        assert!(parse_var("=x").is_err());
        assert!(parse_var("KRAD_ADE_TOKEN=x").is_err());
    }

    #[test]
    fn the_spawned_line() {
        let record = render::test_record(
            json!({"terminal":5,"profile":"claude","environment":"main","pid":1234}),
        );
        assert_eq!(
            spawned_line(&record),
            "spawned terminal 5 (profile claude) in main, pid 1234"
        );
        let named = render::test_record(json!({"terminal":6,"name":"fix-login"}));
        assert_eq!(
            spawned_line(&named),
            "spawned terminal 6 (profile shell) in main, named \"fix-login\""
        );
    }
}
