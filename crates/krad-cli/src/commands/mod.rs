//! One file per subcommand: its clap arguments and its `run`.

pub mod answer;
pub mod api;
pub mod asks;
pub mod attach;
pub mod changes;
pub mod check;
pub mod close;
pub mod code;
pub mod completions;
pub mod durable;
pub mod envs;
pub mod ext;
pub mod hook;
pub mod hosts;
pub mod ls;
pub mod output;
pub mod raw;
pub mod report;
pub mod send;
pub mod serve;
pub mod spawn;
pub mod stats;
pub mod stop;
pub mod subscribe;
pub mod variants;
pub mod wait;
pub mod watch;
pub mod worktree;

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
        Command::Ls(args) => ls::run(args, &connect, json),
        Command::Check(args) => check::run(args, &connect, json),
        Command::Wait(args) => wait::run(args, &connect, json),
        Command::Spawn(args) => spawn::run(args, &connect, json),
        Command::Send(args) => send::run(args, &connect, json),
        Command::Attach(args) => attach::run(args, &connect, json),
        Command::Output(args) => output::run(args, &connect, json),
        Command::Close(args) => close::run(args, &connect, json),
        Command::Subscribe(args) => subscribe::run(args, &connect, json),
        Command::Watch(args) => watch::run(args, &connect, json),
        Command::Envs(args) => envs::run(args, &connect, json),
        Command::Worktree(args) => worktree::run(args, &connect, json),
        Command::Changes(args) => changes::run(args, &connect, json),
        Command::Variants(args) => variants::run(args, &connect, json),
        Command::Hosts(args) => hosts::run(args, &connect, json),
        Command::Asks(args) => asks::run(args, &connect, json),
        Command::Answer(args) => answer::run(args, &connect, json),
        Command::Durable(args) => durable::run(args, json),
        Command::Report(args) => report::run(args, &connect, json),
        Command::Hook(args) => hook::run(args, &connect, json),
        Command::Code(args) => code::run(args, &connect, json),
        Command::Ext(args) => ext::run(args, &connect, json),
        Command::Raw(args) => raw::run(args, &connect, json),
        Command::Stats(args) => stats::run(args, &connect, json),
        Command::Stop(args) => stop::run(args, &connect, json),
        Command::Completions(args) => completions::run(args),
    }
}

/// Parses a TARGET argument: a terminal id, a positive integer.
pub(crate) fn parse_target(text: &str) -> Result<u64, String> {
    text.trim()
        .parse::<u64>()
        .ok()
        .filter(|&id| id > 0)
        .ok_or_else(|| {
            format!("{text:?} is not a terminal id (a positive integer, as `krad ls` shows)")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_positive_integers() {
        assert_eq!(parse_target("4"), Ok(4));
        assert!(parse_target("0").is_err());
        assert!(parse_target("-1").is_err());
        assert!(parse_target("fix-login").is_err());
    }
}
