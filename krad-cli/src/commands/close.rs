//! `krad close`: ends a terminal, or removes an environment (Close).

use clap::ArgGroup;
use krad_bus::request::close::Close;
use krad_bus::request::list::List;

use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::Exit;
use crate::print;
use crate::render;

/// Arguments of `krad close`.
#[derive(Debug, clap::Args)]
#[command(
    group(ArgGroup::new("what").required(true).args(["target", "environment"])),
    after_help = "\
A terminal gets SIGHUP, then SIGKILL after 5 s. An environment (never main) loses its \
terminals (those still running are named in what it prints), then its worktree and branch (their tip is kept under refs/krad/archive/); \
uncommitted or unmerged work refuses the close (exit 8) unless --force.

Examples:
  krad close 4
  krad close --env feat-x
  krad close --env feat-x --force"
)]
pub(crate) struct CloseArgs {
    /// The terminal to close: its id, or the agent's name.
    #[arg(value_name = "TARGET", value_parser = super::parse_target)]
    pub target: Option<super::Target>,
    /// Close this environment instead of one terminal.
    #[arg(long = "env", value_name = "NAME")]
    pub environment: Option<String>,
    /// With --env: close it even with uncommitted or unmerged work.
    #[arg(long, conflicts_with = "target")]
    pub force: bool,
}

/// Sends Close and says what was closed.
pub(crate) fn run(args: CloseArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let app = AppConnection::find(connect)?;
    let target = args.target.map(|t| t.resolve(&app)).transpose()?;
    let what = match (&target, &args.environment) {
        (Some(target), _) => format!("terminal {target}"),
        (None, Some(environment)) => {
            format!(
                "environment {environment}{}",
                with_its_terminals(&app, environment)
            )
        }
        (None, None) => "nothing".to_owned(),
    };
    let request = Close {
        target,
        environment: args.environment,
        force: args.force.then_some(true),
    };
    let reply = app.send(request, None)?;
    print::emit(json, &reply, |()| print::line(&format!("closed {what}")));
    Ok(Exit::Success)
}

/// The terminals still running in `environment`, which its Close ends too, as
/// the words after its name (` and its terminal 8 (fix-login)`); nothing
/// when none runs or they cannot be listed (Close then says what is wrong).
fn with_its_terminals(app: &AppConnection, environment: &str) -> String {
    let listed = app.send(
        List {
            environment: Some(environment.to_owned()),
        },
        None,
    );
    let running: Vec<String> = listed
        .map(|reply| reply.answer)
        .unwrap_or_default()
        .iter()
        .filter(|agent| agent.state.is_running())
        .map(|agent| match &agent.name {
            Some(name) => format!("{} ({})", agent.terminal, render::one_line(name)),
            None => agent.terminal.to_string(),
        })
        .collect();
    match running.len() {
        0 => String::new(),
        1 => format!(" and its terminal {}", running[0]),
        _ => format!(" and its terminals {}", running.join(", ")),
    }
}
