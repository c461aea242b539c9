//! The `krad` binary: parses the command line, sets up tracing, runs one
//! subcommand and turns its outcome into a stable exit code.

mod cli;
mod commands;
mod connect;
mod exit;
mod output;
mod render;

use std::process::ExitCode;

use clap::Parser;

use exit::{Exit, Failure};

fn main() -> ExitCode {
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
    init_tracing(matches!(cli.command, cli::Command::Serve(_)));
    match cli.run() {
        Ok(exit) => exit.into(),
        Err(error) => {
            let (exit, message) = match error.downcast::<Failure>() {
                Ok(failure) => (failure.exit, failure.message),
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
