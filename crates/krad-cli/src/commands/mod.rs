//! One file per subcommand: its clap arguments and its `run`.

pub mod api;
pub mod completions;
pub mod raw;
pub mod serve;
pub mod stats;
pub mod stop;

use crate::cli::{Cli, Command};
use crate::exit::Exit;

/// Runs the subcommand the command line named.
pub fn run(cli: Cli) -> anyhow::Result<Exit> {
    let Cli {
        json,
        connect,
        command,
    } = cli;
    match command {
        Command::Serve(args) => serve::run(args, json),
        Command::Api(args) => api::run(args, &connect, json),
        Command::Raw(args) => raw::run(args, &connect, json),
        Command::Stats(args) => stats::run(args, &connect, json),
        Command::Stop(args) => stop::run(args, &connect, json),
        Command::Completions(args) => completions::run(args),
    }
}
