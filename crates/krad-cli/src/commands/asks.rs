//! `krad asks`: the questions agents are waiting on, oldest first.

use krad_bus::request::ask::Asks;
use krad_bus::request::{Request, deadline};

use crate::connect::{Bus, ConnectArgs};
use crate::exit::Exit;
use crate::output;

/// Arguments of `krad asks`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Answer one with `krad answer ASK OPTION`.\n\nExamples:\n  krad asks\n  krad asks --terminal 4 --json"
)]
pub struct AsksArgs {
    /// Only this terminal's asks.
    #[arg(long, value_name = "ID")]
    pub terminal: Option<u64>,
}

/// Lists the open asks.
pub fn run(args: AsksArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let bus = Bus::find(connect)?;
    let request = Request::Asks(Asks {
        terminal: args.terminal,
    });
    let answer = bus.call(&request.to_value(), None, deadline::STANDARD)?;
    if json {
        output::json(&answer);
        return Ok(Exit::Success);
    }
    let empty = Vec::new();
    let asks = answer["Asks"].as_array().unwrap_or(&empty);
    if asks.is_empty() {
        output::line("no open asks");
    }
    for ask in asks {
        let text = |key: &str| ask[key].as_str().unwrap_or("").to_owned();
        output::line(&format!(
            "{}  terminal {} ({})  {}  — expires {}",
            text("ask"),
            ask["terminal"],
            text("kind"),
            text("title"),
            text("expires_at")
        ));
        let options: Vec<String> = ask["options"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|o| {
                format!(
                    "{} ({})",
                    o["id"].as_str().unwrap_or("?"),
                    o["label"].as_str().unwrap_or("")
                )
            })
            .collect();
        if !options.is_empty() {
            output::line(&format!("    options: {}", options.join(", ")));
        }
        let fields: Vec<&str> = ask["fields"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f["id"].as_str())
            .collect();
        if !fields.is_empty() {
            output::line(&format!("    fields: {}", fields.join(", ")));
        }
        if ask["kind"] == "text" {
            output::line("    answer with --text");
        }
    }
    Ok(Exit::Success)
}
