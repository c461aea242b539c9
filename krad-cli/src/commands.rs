//! One file per subcommand: its clap arguments and its `run`.

pub(crate) mod answer;
pub(crate) mod api;
pub(crate) mod apps;
pub(crate) mod archive;
pub(crate) mod ask;
pub(crate) mod asks;
pub(crate) mod attach;
pub(crate) mod budget;
pub(crate) mod changes;
pub(crate) mod check;
pub(crate) mod close;
pub(crate) mod code;
pub(crate) mod completions;
pub(crate) mod conflicts;
pub(crate) mod doctor;
pub(crate) mod durable;
pub(crate) mod env;
pub(crate) mod envs;
pub(crate) mod ext;
pub(crate) mod gc;
pub(crate) mod hook;
pub(crate) mod hosts;
pub(crate) mod internal;
pub(crate) mod ls;
pub(crate) mod net;
pub(crate) mod output;
pub(crate) mod raw;
pub(crate) mod rename;
pub(crate) mod report;
pub(crate) mod sandboxed;
pub(crate) mod send;
pub(crate) mod serve;
pub(crate) mod spawn;
pub(crate) mod stats;
pub(crate) mod stop;
pub(crate) mod subscribe;
pub(crate) mod top;
pub(crate) mod tui;
pub(crate) mod ui;
pub(crate) mod variants;
pub(crate) mod wait;
pub(crate) mod watch;
pub(crate) mod worktree;

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
