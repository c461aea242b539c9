//! The `krad` binary: parses the command line, sets up tracing, runs one
//! subcommand and turns its outcome into a stable exit code.

mod apps;
mod cli;
mod commands;
mod connect;
mod exit;
mod print;
mod render;
mod status;

use std::process::ExitCode;

use clap::Parser;

use exit::{Exit, Failure};

fn main() -> ExitCode {
    // `krad api`, the handshake scripts run first and often, logs nothing and
    // needs none of the command tree: its plain forms skip clap and the logging
    // set-up (see docs/PERFORMANCE.md, "`krad api` as a whole process").
    if let Some(json) = plain_api(std::env::args_os().skip(1)) {
        let args = commands::api::ApiArgs {};
        return finish(
            commands::api::run(args, &connect::ConnectArgs::default(), json),
            json,
        );
    }
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                Exit::Usage.into()
            } else {
                Exit::Success.into()
            };
        }
    };
    init_tracing(matches!(cli.command, Some(cli::Command::Serve(_))));
    let json = cli.json;
    finish(cli.run(), json)
}

/// `Some(json)` when the arguments are exactly `api`, `api --json` or
/// `--json api`; anything else (other flags, `--help`) goes through clap.
fn plain_api(args: impl Iterator<Item = std::ffi::OsString>) -> Option<bool> {
    let args: Vec<_> = args.take(3).collect();
    let args: Vec<&str> = args.iter().map(|a| a.to_str()).collect::<Option<_>>()?;
    match args.as_slice() {
        ["api"] => Some(false),
        ["api", "--json"] | ["--json", "api"] => Some(true),
        _ => None,
    }
}

/// The command's outcome as the exit code, its error printed: on stderr, and
/// with `json` the app's answer it stands for, if any, on stdout (a script
/// reads the error's `code` and `detail` there).
fn finish(outcome: anyhow::Result<Exit>, json: bool) -> ExitCode {
    match outcome {
        Ok(exit) => exit.into(),
        Err(error) => {
            let (exit, message) = match error.downcast::<Failure>() {
                Ok(failure) => {
                    if let (true, Some(answer)) = (json, &failure.answer) {
                        print::json(answer);
                    }
                    (failure.exit, failure.message)
                }
                Err(other) => (Exit::Failure, format!("{other:#}")),
            };
            eprintln!("krad: {message}");
            exit.into()
        }
    }
}

/// Logs go to stderr; `RUST_LOG` sets the levels (default: info for the app,
/// warnings only for client commands).
fn init_tracing(serving: bool) {
    // rmcp logs every MCP server's whole description at info: keep it to warnings.
    let default = if serving { "info,rmcp=warn" } else { "warn" };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
    // A terminal's whole argv (a prompt, maybe a secret) only when RUST_LOG names
    // its target itself (`krad::argv=trace`), never with a bare `trace`.
    krad_term::log_full_argv(
        std::env::var("RUST_LOG").is_ok_and(|filter| filter.contains(krad_term::ARGV_TARGET)),
    );
}

#[cfg(test)]
mod tests {
    use super::plain_api;

    fn plain(args: &[&str]) -> Option<bool> {
        plain_api(args.iter().map(std::ffi::OsString::from))
    }

    #[test]
    fn only_the_plain_forms_of_api_skip_clap() {
        assert_eq!(plain(&["api"]), Some(false));
        assert_eq!(plain(&["api", "--json"]), Some(true));
        assert_eq!(plain(&["--json", "api"]), Some(true));
        for other in [
            &[][..],
            &["api", "--help"],
            &["api", "--json", "--json"],
            &["api", "--endpoint", "127.0.0.1:1"],
            &["--endpoint=127.0.0.1:1", "api"],
            &["ls"],
            &["api", "extra"],
            &["apis"],
        ] {
            assert_eq!(plain(other), None, "{other:?}");
        }
    }
}
