//! The command line as clap sees it: global flags and one subcommand per file
//! under `commands/`.

use clap::{Parser, Subcommand};

use crate::commands;
use crate::connect::ConnectArgs;
use crate::exit::exit_codes_help;

/// krad — run many coding agents side by side.
///
/// `krad serve` starts the app in a git repository; the other commands talk to
/// it over its loopback bus (found through KRAD_ADE_* inside the app's terminals,
/// api.json outside them).
#[derive(Debug, Parser)]
#[command(
    name = "krad",
    version,
    after_help = exit_codes_help!(),
    after_long_help = concat!(
        "Examples:\n",
        "  krad serve                  start the app in this repository\n",
        "  krad api                    the API version, build and pid the app serves\n",
        "  krad raw '\"Stats\"'          any request as JSON; prints the answer line\n",
        "  krad stats --json           the bus's counters as JSON\n",
        "  krad stop                   stop the app and close its terminals\n\n",
        exit_codes_help!()
    ),
    propagate_version = true
)]
pub struct Cli {
    /// Print one JSON value (a line per message when streaming) instead of text.
    #[arg(long, global = true)]
    pub json: bool,

    #[command(flatten)]
    pub connect: ConnectArgs,

    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start the app in a git repository and serve the bus (stays in the foreground).
    Serve(commands::serve::ServeArgs),
    /// Show the API version, build and pid of the running app (Hello).
    Api(commands::api::ApiArgs),
    /// Send any request as JSON and print the answer line(s) as they come.
    Raw(commands::raw::RawArgs),
    /// Show the bus's counters.
    Stats(commands::stats::StatsArgs),
    /// Stop the running app.
    Stop(commands::stop::StopArgs),
    /// Print shell completions.
    Completions(commands::completions::CompletionsArgs),
}
