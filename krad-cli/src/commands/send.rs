//! `krad send`: types text into an agent's terminal (Send).

use std::io::{IsTerminal, Read};
use std::time::{Duration, Instant};

use anyhow::Context;
use krad_bus::protocol::Waited;
use krad_bus::protocol::keys::Key;
use krad_bus::request::send::{MAX_TEXT, Send, When};
use krad_bus::request::wait::Wait;

use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::{Exit, Failure};
use crate::print;

/// Arguments of `krad send`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Text arrives whole, as a paste (bracketed when the program asked for it), so a dialog \
does not take it as a keystroke; --enter presses Enter once the text is taken. Keys are \
pressed after the text, one at a time and unbracketed: use them to answer a dialog. \
Key names (tmux's): Enter, Escape, Tab, BTab, Space, BSpace, Up, Down, Left, Right, Home, \
End, PageUp, PageDown, Insert, Delete, F1-F12, C-<key> (Ctrl), M-<key> (Alt), or one \
character. An exited target is a conflict (exit 8).

Examples:
  krad send 4 'run the tests again' --enter
  krad send 4 'and now the docs' --enter --when-idle   # once its turn ends (up to 30 min)
  krad send 4 - --enter < followup.md
  krad send 4 --key 2                     # pick option 2 of a dialog
  krad send 4 --key Down --key Enter      # move to the next choice and take it
  krad send 4 --key Escape                # dismiss a dialog / interrupt
  krad send 4 'next task' --enter --queue # wait in line under [limits]")]
pub(crate) struct SendArgs {
    /// The terminal id, or the agent's name.
    #[arg(value_name = "TARGET", value_parser = super::parse_target)]
    pub target: super::Target,
    /// What to type (at most 32 KiB); - reads it from stdin (one trailing newline dropped).
    #[arg(value_name = "TEXT", required_unless_present_any = ["keys", "enter"])]
    pub text: Option<String>,
    /// Press Enter after the text (as its own keystroke, once the text is taken).
    #[arg(long)]
    pub enter: bool,
    /// A key to press after the text; repeat for several (`--key Down --key Enter`).
    #[arg(long = "key", short = 'k', value_name = "KEY", value_parser = parse_key)]
    pub keys: Vec<String>,
    /// Hold the text until the agent's turn ends (idle or asking), waiting up
    /// to --timeout; nothing is typed if it does not.
    #[arg(long)]
    pub when_idle: bool,
    /// With --when-idle: how long to wait for the turn to end (seconds, or
    /// 90s, 10m; at most 1800 s).
    #[arg(long, value_name = "SECS", default_value = "1800", requires = "when_idle",
          value_parser = super::wait::parse_wait_secs)]
    pub timeout: u64,
    /// When the app's [limits] leave no room for the agent to work now (or it
    /// is itself queued), wait in the queue and be typed when its turn comes,
    /// instead of answering busy (exit 1).
    #[arg(long)]
    pub queue: bool,
}

/// A key name, checked here so that a typo is a usage error before anything is sent.
fn parse_key(name: &str) -> Result<String, String> {
    Key::parse(name).map(|_| name.to_owned())
}

/// Sends the text and keys and says what became of them.
pub(crate) fn run(args: SendArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let text = match args.text {
        Some(text) if text == "-" => read_stdin_text("the text")?,
        Some(text) => text,
        None => String::new(),
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
    let app = AppConnection::find(connect)?;
    let target = args.target.resolve(&app)?;
    let waited = if args.when_idle {
        Some(turn_ended(&app, target, args.timeout)?)
    } else {
        None
    };
    let request = Send {
        target,
        text,
        keys: (!args.keys.is_empty()).then_some(args.keys),
        enter: args.enter.then_some(true),
        when: args.when_idle.then_some(When::Idle),
        queue: args.queue.then_some(true),
    };
    let reply = match app.send(request, None) {
        Err(failure) if failure.exit == Exit::TimedOut => {
            return Err(Failure::new(
                Exit::TimedOut,
                format!(
                    "terminal {} went back to work before the text could be typed (within \
                     Send's 10 s): nothing was typed; send it again",
                    target
                ),
            )
            .into());
        }
        reply => reply?,
    };
    print::emit(json, &reply, |sent| {
        if let Some(place) = sent.queue_place {
            print::line(&format!(
                "queued for terminal {} (place {place} in the queue; now {}): typed when \
                 [limits] leave room",
                sent.terminal, sent.state
            ));
            return;
        }
        let delivered = if sent.delivered {
            "delivered"
        } else {
            "not delivered"
        };
        let once = match waited {
            Some(waited) if waited.as_secs() > 0 => {
                format!(" once its turn ended, after {} s", waited.as_secs())
            }
            Some(_) => " at its prompt".to_owned(),
            None => String::new(),
        };
        print::line(&format!(
            "sent to terminal {}{once} ({delivered}; now {})",
            sent.terminal, sent.state
        ));
    });
    Ok(Exit::Success)
}

/// Waits (Wait) up to `timeout` seconds for terminal `target`'s turn to end;
/// how long it took. Exit 5 when it did not, saying where it is and that
/// nothing was typed.
fn turn_ended(app: &AppConnection, target: u64, timeout: u64) -> Result<Duration, Failure> {
    let started = Instant::now();
    let wait = Wait {
        target: Some(target),
        timeout_secs: Some(timeout),
        ..Wait::default()
    };
    match app.send(wait, None)?.answer {
        Waited::TimedOut => {
            let still = super::wait::still_going(app, &[target], false, timeout);
            Err(Failure::new(
                Exit::TimedOut,
                format!("{}; nothing was typed", still.message),
            ))
        }
        Waited::Agent(_) | Waited::Agents(_) => Ok(started.elapsed()),
    }
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
