//! One file per subcommand: its clap arguments and its `run`.

pub mod answer;
pub mod api;
pub mod apps;
pub mod archive;
pub mod asks;
pub mod attach;
pub mod budget;
pub mod changes;
pub mod check;
pub mod close;
pub mod code;
pub mod completions;
pub mod conflicts;
pub mod doctor;
pub mod durable;
pub mod env;
pub mod envs;
pub mod ext;
pub mod gc;
pub mod hook;
pub mod hosts;
pub mod internal;
pub mod ls;
pub mod net;
pub mod output;
pub mod raw;
pub mod rename;
pub mod report;
pub mod sandboxed;
pub mod send;
pub mod serve;
pub mod spawn;
pub mod stats;
pub mod stop;
pub mod subscribe;
pub mod top;
pub mod tui;
pub mod ui;
pub mod variants;
pub mod wait;
pub mod watch;
pub mod worktree;

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
