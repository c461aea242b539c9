//! `krad asks`: the questions agents are waiting on, oldest first.

use krad_bus::protocol::AskInfo;
use krad_bus::request::ask::AskKind;
use krad_bus::request::asks::Asks;

use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::Exit;
use crate::print;
use crate::render;

/// Arguments of `krad asks`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Answer one with `krad answer ASK OPTION`.\n\nExamples:\n  krad asks\n  krad asks --terminal 4 --json"
)]
pub(crate) struct AsksArgs {
    /// Only this terminal's asks.
    #[arg(long, value_name = "ID")]
    pub terminal: Option<u64>,
}

/// Lists the open asks.
pub(crate) fn run(args: AsksArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let request = Asks {
        terminal: args.terminal,
    };
    let reply = AppConnection::find(connect)?.send(request, None)?;
    print::emit(json, &reply, |asks| print::lines(asks_lines(asks)));
    Ok(Exit::Success)
}

/// Each ask on a line, with its options or fields below it.
fn asks_lines(asks: &[AskInfo]) -> Vec<String> {
    if asks.is_empty() {
        return vec!["no open asks".to_owned()];
    }
    let mut lines = Vec::new();
    for ask in asks {
        lines.push(format!(
            "{}  terminal {} ({})  {}  — expires {}",
            ask.ask,
            ask.terminal,
            render::wire_name(&ask.kind),
            ask.title,
            ask.expires_at
        ));
        let options: Vec<String> = ask
            .options
            .iter()
            .map(|o| format!("{} ({})", o.id, o.label))
            .collect();
        if !options.is_empty() {
            lines.push(format!("    options: {}", options.join(", ")));
        }
        let fields: Vec<&str> = ask.fields.iter().map(|f| f.id.as_str()).collect();
        if !fields.is_empty() {
            lines.push(format!("    fields: {}", fields.join(", ")));
        }
        if ask.kind == AskKind::Text {
            lines.push("    answer with --text".to_owned());
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_ask_with_its_options() {
        let ask = json!({"ask":"a-1","terminal":4,"environment":"main","kind":"permission",
            "title":"Bash: rm -rf build","options":[{"id":"allow","label":"Allow"},
            {"id":"deny","label":"Deny"}],"fields":[],"tool":null,"revision":1,
            "created_at":"2025-01-01T00:00:00Z","expires_at":"2025-01-01T00:10:00Z",
            "priority":"high"});
        let lines = asks_lines(&[serde_json::from_value(ask).unwrap()]);
        assert_eq!(
            lines,
            [
                "a-1  terminal 4 (permission)  Bash: rm -rf build  — expires 2025-01-01T00:10:00Z",
                "    options: allow (Allow), deny (Deny)"
            ]
        );
        assert_eq!(asks_lines(&[]), ["no open asks"]);
    }
}
