//! `krad rename`: gives a terminal a new name, or takes its name away (Rename).

use clap::ArgGroup;
use krad_bus::request::rename::Rename;

use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::Exit;
use crate::print;
use crate::render;

/// Arguments of `krad rename`.
#[derive(Debug, clap::Args)]
#[command(
    group(ArgGroup::new("new").required(true).args(["name", "clear"])),
    override_usage = "krad rename [OPTIONS] <TARGET> <NAME|--clear>",
    after_help = "\
The name shows in `krad ls`, `krad watch` and as the pane's title on the phone. A plain \
terminal may rename itself and the terminals it spawned.

Examples:
  krad rename 4 fix-login
  krad rename 4 --clear
  krad rename 4 \"review: auth\" --json | jq .Agent.rev"
)]
pub(crate) struct RenameArgs {
    /// The terminal id, or the agent's name.
    #[arg(value_name = "TARGET", value_parser = super::parse_target)]
    pub target: super::Target,
    /// The new name (at most 100 characters).
    #[arg(value_name = "NAME")]
    pub name: Option<String>,
    /// Take the name away instead.
    #[arg(long)]
    pub clear: bool,
}

/// Sends Rename and says what the terminal is called now.
pub(crate) fn run(args: RenameArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let app = AppConnection::find(connect)?;
    let request = Rename {
        target: args.target.resolve(&app)?,
        name: args.name,
    };
    let reply = app.send(request, None)?;
    print::emit(json, &reply, |record| match &record.name {
        Some(name) => print::line(&format!(
            "terminal {} is now {}",
            record.terminal,
            render::one_line(name)
        )),
        None => print::line(&format!("terminal {} has no name", record.terminal)),
    });
    Ok(Exit::Success)
}
