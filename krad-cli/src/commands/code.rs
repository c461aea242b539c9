//! `krad code`: runs a program to completion in an environment, without a
//! terminal (Code), and passes its output through.

use std::io::{Read, Write};
use std::path::PathBuf;

use anyhow::Context;
use krad_bus::protocol::CodeResultInfo;
use krad_bus::request::code::{Code, MAX_TIMEOUT_SECS};

use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::{Exit, Failure};
use crate::print;

/// The most stdin a Code request can carry: the request line is at most 64 KiB,
/// and the envelope and the JSON escaping need room.
const MAX_STDIN: usize = 48 * 1024;

/// Arguments of `krad code`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
The program runs in the environment's directory, in its own process group, with no terminal; \
krad prints what it wrote on stdout to stdout and what it wrote on stderr to stderr (each kept \
up to 1 MiB; a note on stderr says when it was cut). On timeout, or when krad is interrupted, \
the whole process group is killed.

Exit codes: 0 when the program exited 0; 9 when it exited non-zero or was killed by a signal \
(the code or signal is printed on stderr; signal 9 after its timeout); 1 when it could not be \
started; 2 for a bad argument; 3 when the environment does not exist; 4 when a terminal asks \
for another environment than its own; 5 when the app gave up at its deadline; 7 when the app \
is not running.

Examples:
  krad code -- cargo test -q
  krad code --env feat-x --timeout 60 -- make lint
  git diff | krad code --stdin-file - -- wc -l
  krad code --json -- ls | jq -r .CodeResult.stdout")]
pub(crate) struct CodeArgs {
    /// The environment to run in (default: this terminal's, else main).
    #[arg(long = "env", value_name = "NAME")]
    pub environment: Option<String>,
    /// Kill it after this long (seconds, or 90s, 1m; at most 110 s; default 110).
    #[arg(long, value_name = "SECS", value_parser = parse_timeout)]
    pub timeout: Option<u64>,
    /// Give the program this file as stdin (- reads krad's own stdin); without it
    /// the program's stdin is empty.
    #[arg(long, value_name = "PATH")]
    pub stdin_file: Option<PathBuf>,
    /// The program and its arguments (after --).
    #[arg(value_name = "ARGV", required = true, num_args = 1.., trailing_var_arg = true,
          allow_hyphen_values = true)]
    pub argv: Vec<String>,
}

/// Sends Code and passes the program's output and outcome through.
pub(crate) fn run(args: CodeArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let stdin = match &args.stdin_file {
        Some(path) => Some(read_stdin_file(path)?),
        None => None,
    };
    let environment = args
        .environment
        .or_else(|| {
            std::env::var("KRAD_ADE_ENVIRONMENT")
                .ok()
                .filter(|e| !e.is_empty())
        })
        .unwrap_or_else(|| "main".to_owned());
    let request = Code {
        environment,
        command: args.argv,
        stdin,
        timeout_secs: args.timeout,
    };
    let shown = request.command.join(" ");
    let place = request.environment.clone();
    let status = crate::status::StatusLine::show(json, move |elapsed| {
        format!(
            "krad code: running `{shown}` in {place} — {}",
            crate::status::elapsed(elapsed)
        )
    });
    let sent = AppConnection::find(connect)?.send(request, None);
    drop(status);
    let reply = sent?;
    print::emit(json, &reply, pass_through);
    Ok(outcome(&reply.answer))
}

/// Writes the program's stdout and stderr where it would have.
fn pass_through(result: &CodeResultInfo) {
    // A reader that went away (a pipe to head) is not a failure of the program.
    let mut out = std::io::stdout().lock();
    let _ = out
        .write_all(result.stdout.as_bytes())
        .and_then(|()| out.flush());
    let mut err = std::io::stderr().lock();
    let _ = err
        .write_all(result.stderr.as_bytes())
        .and_then(|()| err.flush());
    if result.truncated {
        eprintln!("krad: the output was cut (1 MiB each for stdout and stderr)");
    }
}

/// 0 when the program exited 0, 9 (with a line on stderr) otherwise.
fn outcome(result: &CodeResultInfo) -> Exit {
    match (result.exit_code, result.signal) {
        (Some(0), _) => Exit::Success,
        (Some(code), _) => {
            eprintln!("krad: the program exited with code {code}");
            Exit::ProgramFailed
        }
        (None, Some(signal)) => {
            let hint = if signal == 9 {
                " (SIGKILL: its timeout passed, or something killed it)"
            } else {
                ""
            };
            eprintln!("krad: the program was killed by signal {signal}{hint}");
            Exit::ProgramFailed
        }
        (None, None) => {
            eprintln!("krad: the app did not say how the program ended");
            Exit::ProgramFailed
        }
    }
}

/// The program's stdin: a file, or krad's own stdin for `-`.
fn read_stdin_file(path: &PathBuf) -> anyhow::Result<String> {
    let mut bytes = Vec::new();
    if path.as_os_str() == "-" {
        std::io::stdin()
            .read_to_end(&mut bytes)
            .context("cannot read stdin")?;
    } else {
        std::fs::File::open(path)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .map_err(|e| {
                Failure::new(
                    Exit::Failure,
                    format!("cannot read {}: {e}", path.display()),
                )
            })?;
    }
    if bytes.len() > MAX_STDIN {
        return Err(Failure::new(
            Exit::Usage,
            format!(
                "the stdin is {} bytes; Code carries at most {MAX_STDIN} (the request is one \
                 line of at most 64 KiB): write it to a file in the environment instead",
                bytes.len()
            ),
        )
        .into());
    }
    String::from_utf8(bytes).map_err(|_| {
        Failure::new(
            Exit::Usage,
            "the stdin is not UTF-8 text; Code carries text only",
        )
        .into()
    })
}

/// Parses a timeout of at most 110 s: whole seconds (`90`) or a duration (`90s`, `1m`).
fn parse_timeout(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let secs = match text.parse::<u64>() {
        Ok(secs) => secs,
        Err(_) => humantime::parse_duration(text)
            .map_err(|e| format!("{e} (write seconds, like 90, or a duration, like 1m)"))?
            .as_secs(),
    };
    match secs {
        0 => Err("at least 1 second".to_owned()),
        secs if secs > MAX_TIMEOUT_SECS => {
            Err(format!("at most {MAX_TIMEOUT_SECS} seconds, not {secs}"))
        }
        secs => Ok(secs),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_take_seconds_or_durations_up_to_110() {
        assert_eq!(parse_timeout("90"), Ok(90));
        assert_eq!(parse_timeout("1m"), Ok(60));
        assert_eq!(parse_timeout("110s"), Ok(110));
        assert!(parse_timeout("111").is_err());
        assert!(parse_timeout("0").is_err());
        assert!(parse_timeout("soon").is_err());
    }

    #[test]
    fn only_a_clean_exit_is_success() {
        let result = |exit_code, signal| CodeResultInfo {
            exit_code,
            signal,
            stdout: String::new(),
            stderr: String::new(),
            duration_ms: 1,
            truncated: false,
        };
        assert_eq!(outcome(&result(Some(0), None)), Exit::Success);
        assert_eq!(outcome(&result(Some(3), None)), Exit::ProgramFailed);
        assert_eq!(outcome(&result(None, Some(9))), Exit::ProgramFailed);
    }
}
