//! `krad durable`: the durable facet seen from outside the app;
//! `krad durable doctor` walks a socket path as Collie does before connecting.

use std::ffi::OsString;
use std::path::PathBuf;

use krad_durable::doctor::{self, Report};

use crate::exit::{Exit, Failure};
use crate::print;

/// The variable both Collie and the app read the socket path from.
const SOCKET_VAR: &str = "COLLIE_DURABLE_SOCKET";

/// Arguments of `krad durable`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "The durable facet serves Collie, the phone's bridge, over a private socket or TLS \
    (see docs/durable.md).\n\n\
    Examples:\n  krad durable doctor\n  krad durable doctor --socket /run/user/1000/krad/durable.sock --json"
)]
pub(crate) struct DurableArgs {
    #[command(subcommand)]
    pub command: DurableCommand,
}

/// What to do with the durable facet.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum DurableCommand {
    /// Walk the socket path as Collie does before connecting; exit 1 when Collie would refuse it.
    Doctor(DoctorArgs),
}

/// Arguments of `krad durable doctor`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Every segment is checked with lstat from / down, as Collie does: \
    no symbolic link; no parent folder writable by its group or others unless sticky (like /tmp); \
    the socket's folder yours with mode 0700; the socket yours with no group/other bits.\n\n\
    Outcomes (the `code` of --json):\n  \
    ok                   Collie connects (exit 0)\n  \
    socket-not-private   a segment breaks a rule; Collie will not connect (exit 1)\n  \
    socket-missing       the path is private but nothing is there: the app is not serving (exit 1)\n  \
    bad-path             not absolute, longer than 103 bytes, or with . or .. (exit 1)\n\n\
    Examples:\n  \
    krad durable doctor                       the path of $COLLIE_DURABLE_SOCKET\n  \
    krad durable doctor --socket /run/user/1000/krad/durable.sock\n  \
    krad durable doctor --json | jq -r .problem"
)]
pub(crate) struct DoctorArgs {
    /// The socket path to walk [default: $COLLIE_DURABLE_SOCKET].
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
}

/// Runs a `krad durable` subcommand.
pub(crate) fn run(args: DurableArgs, json: bool) -> anyhow::Result<Exit> {
    match args.command {
        DurableCommand::Doctor(args) => doctor(args, json),
    }
}

/// Walks the socket path and prints what Collie would find.
fn doctor(args: DoctorArgs, json: bool) -> anyhow::Result<Exit> {
    let path = socket_path(args.socket, std::env::var_os(SOCKET_VAR))?;
    let report = doctor::walk(&path);
    if json {
        let value = serde_json::to_value(&report).map_err(|e| {
            Failure::new(
                Exit::Failure,
                format!("cannot print the report as JSON ({e}): is the path valid UTF-8?"),
            )
        })?;
        print::json(&value);
    } else {
        print_text(&report);
    }
    Ok(if report.ok {
        Exit::Success
    } else {
        Exit::Failure
    })
}

/// The path to walk: `--socket`, else a non-empty `$COLLIE_DURABLE_SOCKET`.
fn socket_path(flag: Option<PathBuf>, var: Option<OsString>) -> Result<PathBuf, Failure> {
    flag.or_else(|| var.filter(|v| !v.is_empty()).map(PathBuf::from))
        .ok_or_else(|| {
            Failure::new(
                Exit::Usage,
                format!("which socket? give --socket PATH or set {SOCKET_VAR}"),
            )
        })
}

/// One line per segment with ✓ or ✗, then the verdict.
fn print_text(report: &Report) {
    let width = report
        .segments
        .iter()
        .map(|s| s.path.as_os_str().len())
        .max()
        .unwrap_or(0);
    for segment in &report.segments {
        let mark = match (&segment.problem, segment.kind) {
            (Some(_), _) => "✗",
            (None, "missing") => "·",
            (None, _) => "✓",
        };
        let mode = segment
            .mode
            .map(|m| format!("{m:04o}"))
            .unwrap_or_else(|| "-".to_owned());
        let owner = segment
            .owner
            .map(|uid| format!("uid {uid}"))
            .unwrap_or_default();
        let path = segment.path.display().to_string();
        let mut line = format!(
            "{mark} {path:<width$}  {kind:<7} {mode:<4}  {owner}",
            kind = segment.kind
        );
        if let Some(problem) = &segment.problem {
            line = format!("{}  {problem}", line.trim_end());
        }
        print::line(line.trim_end());
    }
    let verdict = match (report.code, &report.problem) {
        (None, _) => format!(
            "ok: {} is private; Collie will connect to it",
            report.path.display()
        ),
        (Some(code), Some(problem)) => format!("{code}: {problem}"),
        (Some(code), None) => code.to_string(),
    };
    print::line(&verdict);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_wins_then_the_variable() {
        let flag = Some(PathBuf::from("/a/s.sock"));
        let var = Some(OsString::from("/b/s.sock"));
        assert_eq!(
            socket_path(flag, var.clone()).ok(),
            Some(PathBuf::from("/a/s.sock"))
        );
        assert_eq!(
            socket_path(None, var).ok(),
            Some(PathBuf::from("/b/s.sock"))
        );
        let missing = socket_path(None, Some(OsString::new())).err();
        assert_eq!(missing.map(|f| f.exit), Some(Exit::Usage));
        assert!(socket_path(None, None).is_err());
    }
}
