//! `krad output`: what an agent's terminal shows — the last lines of scrollback,
//! then the screen (Output).

use krad_bus::request::{
    Request, deadline,
    output::{MAX_LINES, Output},
};
use serde_json::Value;

use crate::connect::{Bus, ConnectArgs};
use crate::exit::{Exit, Failure};
use crate::output;

/// Arguments of `krad output`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Prints the scrollback lines (oldest first), then the visible screen without its trailing \
blank rows.

Examples:
  krad output 4
  krad output 4 --lines 0
  krad output 4 --lines 2000 --json | jq -r '.Output.scrollback[]'")]
pub struct OutputArgs {
    /// The terminal id.
    #[arg(value_name = "TARGET", value_parser = super::parse_target)]
    pub target: u64,
    /// Lines of scrollback above the screen (default 100, at most 10000).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(0..=MAX_LINES))]
    pub lines: Option<u64>,
}

/// Sends Output and prints the text.
pub fn run(args: OutputArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let bus = Bus::find(connect)?;
    let request = Request::Output(Output {
        target: args.target,
        lines: args.lines,
    });
    let deadline = request.deadline().unwrap_or(deadline::STANDARD);
    let answer = bus.call(&request.to_value(), None, deadline)?;
    if json {
        output::json(&answer);
        return Ok(Exit::Success);
    }
    let Some(info) = answer.get("Output") else {
        return Err(Failure::new(
            Exit::Failure,
            format!("unexpected answer to Output: {answer}"),
        )
        .into());
    };
    for line in text_lines(info) {
        output::line(&line);
    }
    if info.get("truncated").and_then(Value::as_bool) == Some(true) {
        eprintln!("krad: there is more scrollback than shown (--lines, at most {MAX_LINES})");
    }
    Ok(Exit::Success)
}

/// The scrollback, then the screen; trailing blanks trimmed from each line and
/// blank rows from the screen's end.
fn text_lines(info: &Value) -> Vec<String> {
    let mut lines: Vec<String> = info
        .get("scrollback")
        .and_then(Value::as_array)
        .map(|lines| {
            lines
                .iter()
                .filter_map(Value::as_str)
                .map(|l| l.trim_end().to_owned())
                .collect()
        })
        .unwrap_or_default();
    let mut screen: Vec<String> = info
        .get("screen")
        .and_then(Value::as_str)
        .unwrap_or_default()
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
        assert_eq!(text_lines(&info), vec!["old 1", "old 2", "$ make", "ok"]);
        assert!(text_lines(&json!({})).is_empty());
    }
}
