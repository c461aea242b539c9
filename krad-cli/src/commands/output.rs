//! `krad output`: what an agent's terminal shows — the last lines of scrollback,
//! then the screen (Output).

use krad_bus::protocol::OutputInfo;
use krad_bus::request::output::{MAX_LINES, Output};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use krad_bus::client::{ClientError, Item, Lines};
use krad_bus::protocol::{AttachMessage, DataInfo};
use krad_bus::request::attach::Attach;

use crate::connect::{AppConnection, ConnectArgs, answer_failure, client_failure};
use crate::exit::Exit;
use crate::exit::Failure;
use crate::print;

/// Arguments of `krad output`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Prints the scrollback lines (oldest first), then the visible screen without its trailing \
blank rows. `krad read` is the same command.

Examples:
  krad output 4
  krad output 4 --lines 0
  krad output 4 --follow | grep --line-buffered ERROR   # as it prints, until it exits
  krad output 4 --lines 2000 --json | jq -r '.Output.scrollback[]'")]
pub(crate) struct OutputArgs {
    /// The terminal id, or the agent's name.
    #[arg(value_name = "TARGET", value_parser = super::parse_target)]
    pub target: super::Target,
    /// Lines of scrollback above the screen (default 100, at most 10000).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(0..=MAX_LINES))]
    pub lines: Option<u64>,
    /// Then stream what the program prints from now on, as it prints it
    /// (its bytes, escape sequences included), until it exits or the app
    /// stops; with --json, the Attach stream's lines.
    #[arg(long, short = 'f')]
    pub follow: bool,
}

/// Sends Output and prints the text.
pub(crate) fn run(args: OutputArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let app = AppConnection::find(connect)?;
    let target = args.target.resolve(&app)?;
    let request = Output {
        target,
        lines: args.lines,
    };
    // Opened first: nothing printed between the screen and the stream is lost
    // (what it printed meanwhile may show twice).
    let follow = if args.follow {
        Some(open_follow(&app, target)?)
    } else {
        None
    };
    let reply = app.send(request, None)?;
    print::emit(json, &reply, |info| {
        print::lines(text_lines(info));
        if info.truncated {
            eprintln!("krad: there is more scrollback than shown (--lines, at most {MAX_LINES})");
        }
    });
    match follow {
        Some(stream) => follow_output(stream, json),
        None => Ok(Exit::Success),
    }
}

/// The terminal's Attach stream, its first line (the screen) read: a reader
/// that never types, nor resizes.
fn open_follow(app: &AppConnection, target: u64) -> Result<Lines<AttachMessage>, Failure> {
    let mut stream = app
        .client()
        .attach(Attach { target })
        .map_err(client_failure)?;
    match stream.next() {
        // Judged as an answer: an `Error` first is the request refused.
        Some(Ok(first)) => match answer_failure(&first.raw) {
            Some(failure) => Err(failure),
            None => Ok(stream),
        },
        Some(Err(e)) => Err(client_failure(e)),
        None => Err(client_failure(ClientError::NoAnswer)),
    }
}

/// Writes what the program prints until it exits (exit 0) or the app stops
/// (exit 7).
fn follow_output(stream: Lines<AttachMessage>, json: bool) -> anyhow::Result<Exit> {
    for line in stream {
        let line = line.map_err(client_failure)?;
        if json {
            print::json(&line.raw);
        }
        match line.item {
            Item::Message(AttachMessage::Output(DataInfo { data })) if !json => {
                let bytes = BASE64
                    .decode(data)
                    .map_err(|e| Failure::new(Exit::Failure, format!("unreadable output: {e}")))?;
                print::bytes(&bytes);
            }
            Item::Message(AttachMessage::Exited(_)) => return Ok(Exit::Success),
            Item::Message(AttachMessage::ShuttingDown) => {
                return Err(Failure::new(
                    Exit::Unreachable,
                    "the app stopped while following the terminal's output",
                )
                .into());
            }
            _ => {}
        }
    }
    Ok(Exit::Success)
}

/// The scrollback, then the screen; trailing blanks trimmed from each line and
/// blank rows from the screen's end.
fn text_lines(info: &OutputInfo) -> Vec<String> {
    let mut lines: Vec<String> = info
        .scrollback
        .iter()
        .map(|l| l.trim_end().to_owned())
        .collect();
    let mut screen: Vec<String> = info
        .screen
        .split('\n')
        .map(|l| l.trim_end().to_owned())
        .collect();
    while screen.last().is_some_and(|l| l.is_empty()) {
        screen.pop();
    }
    lines.extend(screen);
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scrollback_then_screen() {
        let info = json!({"terminal":4,"screen":"$ make   \nok\n\n\n","cursor":[1,2],
            "scrollback":["old 1","old 2  "],"truncated":false});
        let info: OutputInfo = serde_json::from_value(info).unwrap();
        assert_eq!(text_lines(&info), vec!["old 1", "old 2", "$ make", "ok"]);
        let blank = json!({"terminal":4,"screen":"","cursor":[0,0],"scrollback":[],
            "truncated":false});
        assert!(text_lines(&serde_json::from_value(blank).unwrap()).is_empty());
    }
}
