//! `krad send`: types text into an agent's terminal (Send).

use std::io::{IsTerminal, Read};

use anyhow::Context;
use krad_bus::request::{
    Request, deadline,
    send::{MAX_TEXT, Send, When},
};

use crate::connect::{Bus, ConnectArgs};
use crate::exit::{Exit, Failure};
use crate::output;

/// Arguments of `krad send`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Several lines arrive whole (as a bracketed paste when the program asked for it). An exited \
target is a conflict (exit 8).

Examples:
  krad send 4 'run the tests again' --enter
  krad send 4 'and now the docs' --enter --when-idle
  krad send 4 - --enter < followup.md")]
pub struct SendArgs {
    /// The terminal id.
    #[arg(value_name = "TARGET", value_parser = super::parse_target)]
    pub target: u64,
    /// What to type (at most 32 KiB); - reads it from stdin (one trailing newline dropped).
    #[arg(value_name = "TEXT")]
    pub text: String,
    /// Press Enter after the text.
    #[arg(long)]
    pub enter: bool,
    /// Hold the text until the agent is idle or asking (within 10 s).
    #[arg(long)]
    pub when_idle: bool,
}

/// Sends the text and says what became of it.
pub fn run(args: SendArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let text = if args.text == "-" {
        read_stdin_text("the text")?
    } else {
        args.text
    };
    if text.len() > MAX_TEXT {
        return Err(Failure::new(
            Exit::Usage,
            format!(
                "the text is {} bytes; one send takes at most {MAX_TEXT}",
                text.len()
            ),
        )
        .into());
    }
    let bus = Bus::find(connect)?;
    let request = Request::Send(Send {
        target: args.target,
        text,
        enter: args.enter.then_some(true),
        when: args.when_idle.then_some(When::Idle),
    });
    let deadline = request.deadline().unwrap_or(deadline::STANDARD);
    let answer = bus.call(&request.to_value(), None, deadline)?;
    if json {
        output::json(&answer);
        return Ok(Exit::Success);
    }
    let Some(sent) = answer.get("Sent") else {
        return Err(Failure::new(
            Exit::Failure,
            format!("unexpected answer to Send: {answer}"),
        )
        .into());
    };
    let terminal = sent
        .get("terminal")
        .and_then(|t| t.as_u64())
        .unwrap_or(args.target);
    let delivered = match sent.get("delivered").and_then(|d| d.as_bool()) {
        Some(true) => "delivered",
        Some(false) => "not delivered",
        None => "delivery unknown",
    };
    let state = sent
        .get("state")
        .and_then(|s| s.as_str())
        .map(|s| format!("; now {s}"))
        .unwrap_or_default();
    output::line(&format!("sent to terminal {terminal} ({delivered}{state})"));
    Ok(Exit::Success)
}

/// Reads stdin to its end for `what`, dropping one trailing newline (the one
/// `echo` and editors add; `--enter` is how to press Enter).
pub(crate) fn read_stdin_text(what: &str) -> anyhow::Result<String> {
    let mut stdin = std::io::stdin();
    if stdin.is_terminal() {
        eprintln!("krad: reading {what} from stdin; end it with Ctrl-D");
    }
    let mut text = String::new();
    stdin
        .read_to_string(&mut text)
        .with_context(|| format!("cannot read {what} from stdin"))?;
    Ok(drop_trailing_newline(text))
}

fn drop_trailing_newline(mut text: String) -> String {
    if text.ends_with('\n') {
        text.pop();
        if text.ends_with('\r') {
            text.pop();
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_trailing_newline_goes() {
        assert_eq!(drop_trailing_newline("a\n".into()), "a");
        assert_eq!(drop_trailing_newline("a\r\n".into()), "a");
        assert_eq!(drop_trailing_newline("a\n\n".into()), "a\n");
        assert_eq!(drop_trailing_newline("a".into()), "a");
    }
}
