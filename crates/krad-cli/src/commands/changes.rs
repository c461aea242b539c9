//! `krad changes`: what an environment did since it was created — a diffstat, or
//! the patch (coloured on a terminal).

use std::io::IsTerminal;

use krad_bus::request::{Request, changes::Changes, deadline};
use serde_json::Value;

use crate::connect::{Bus, ConnectArgs};
use crate::exit::Exit;
use crate::output;

/// Arguments of `krad changes`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Committed and uncommitted work are both shown, untracked files included, \
against the commit the environment was created from.\n\nExamples:\n  krad changes fix-login\n  \
krad changes fix-login --patch | less -R\n  krad changes main --json"
)]
pub struct ChangesArgs {
    /// The environment.
    pub environment: String,
    /// Print the patch instead of the diffstat.
    #[arg(long)]
    pub patch: bool,
    /// Colour the patch: auto (on a terminal), always, never.
    #[arg(long, value_enum, default_value_t = ColorWhen::Auto)]
    pub color: ColorWhen,
}

/// When to colour.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ColorWhen {
    /// On a terminal.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

/// Prints the changes.
pub fn run(args: ChangesArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let bus = Bus::find(connect)?;
    let request = Request::Changes(Changes {
        environment: args.environment,
        patch: Some(args.patch),
    });
    let answer = bus.call(&request.to_value(), None, deadline::LONG)?;
    if json {
        output::json(&answer);
        return Ok(Exit::Success);
    }
    let changes = &answer["Changes"];
    if args.patch {
        let colour = match args.color {
            ColorWhen::Always => true,
            ColorWhen::Never => false,
            ColorWhen::Auto => {
                std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
            }
        };
        for line in changes["patch"].as_str().unwrap_or("").lines() {
            output::line(&if colour { paint(line) } else { line.to_owned() });
        }
        if changes["truncated"] == true {
            eprintln!("krad: the patch was cut at the answer's size limit");
        }
        return Ok(Exit::Success);
    }
    diffstat(changes);
    Ok(Exit::Success)
}

fn diffstat(changes: &Value) {
    let empty = Vec::new();
    let files = changes["files"].as_array().unwrap_or(&empty);
    if files.is_empty() {
        output::line("no changes");
        return;
    }
    let width = files
        .iter()
        .filter_map(|f| f["path"].as_str())
        .map(|p| p.chars().count())
        .max()
        .unwrap_or(0);
    let (mut added, mut removed) = (0, 0);
    for file in files {
        let path = file["path"].as_str().unwrap_or("?");
        let (a, r) = (
            file["added"].as_u64().unwrap_or(0),
            file["removed"].as_u64().unwrap_or(0),
        );
        added += a;
        removed += r;
        let detail = if file["binary"] == true {
            "binary".to_owned()
        } else {
            format!("+{a} -{r}")
        };
        let status = match (file["status"].as_str(), file["from"].as_str()) {
            (Some("renamed"), Some(from)) => format!("renamed from {from}"),
            (Some(status), _) => status.to_owned(),
            (None, _) => String::new(),
        };
        output::line(&format!(" {path:<width$}  {detail:>12}  {status}"));
    }
    output::line(&format!(
        " {} file(s) changed, {added} insertion(s)(+), {removed} deletion(s)(-)",
        files.len()
    ));
}

fn paint(line: &str) -> String {
    let code = if line.starts_with("+++") || line.starts_with("---") || line.starts_with("diff ") {
        "1"
    } else if line.starts_with('+') {
        "32"
    } else if line.starts_with('-') {
        "31"
    } else if line.starts_with("@@") {
        "36"
    } else {
        return line.to_owned();
    };
    format!("\x1b[{code}m{line}\x1b[0m")
}
