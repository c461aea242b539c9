//! `krad output`: what an agent's terminal shows — the last lines of scrollback,
//! then the screen (Output).

use krad_bus::protocol::OutputInfo;
use krad_bus::request::output::{MAX_LINES, Output};

use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::Exit;
use crate::print;

/// Arguments of `krad output`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Prints the scrollback lines (oldest first), then the visible screen without its trailing \
blank rows.

Examples:
  krad output 4
  krad output 4 --lines 0
  krad output 4 --lines 2000 --json | jq -r '.Output.scrollback[]'")]
pub(crate) struct OutputArgs {
    /// The terminal id.
    #[arg(value_name = "TARGET", value_parser = super::parse_target)]
    pub target: u64,
    /// Lines of scrollback above the screen (default 100, at most 10000).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(0..=MAX_LINES))]
    pub lines: Option<u64>,
}

/// Sends Output and prints the text.
pub(crate) fn run(args: OutputArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let request = Output {
        target: args.target,
        lines: args.lines,
    };
    let reply = AppConnection::find(connect)?.send(request, None)?;
    print::emit(json, &reply, |info| {
        print::lines(text_lines(info));
        if info.truncated {
            eprintln!("krad: there is more scrollback than shown (--lines, at most {MAX_LINES})");
        }
    });
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
