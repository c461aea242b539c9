//! `krad hosts`: the SSH hosts of the config and the state of their links;
//! `krad hosts check NAME` connects and says whether the host answers.

use krad_bus::request::hosts::{CheckHost, Hosts};
use krad_bus::request::{Request, deadline};
use serde_json::Value;

use crate::connect::{Bus, ConnectArgs};
use crate::exit::Exit;
use crate::output;
use crate::render::{self, Column};

/// Arguments of `krad hosts`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Hosts are configured as [hosts.NAME] in the config file (see docs/hosts.md).\n\n\
    Examples:\n  krad hosts\n  krad hosts check gpu\n  krad hosts --json"
)]
pub struct HostsArgs {
    #[command(subcommand)]
    pub command: Option<HostsCommand>,
}

/// What to do with hosts.
#[derive(Debug, clap::Subcommand)]
pub enum HostsCommand {
    /// Connect to a host (if needed) and show its link; exit 1 with ssh's reason when it cannot be reached.
    Check {
        /// The host's name in the config.
        name: String,
    },
}

/// Lists or checks hosts.
pub fn run(args: HostsArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let bus = Bus::find(connect)?;
    let (request, wait) = match args.command {
        None => (Request::Hosts(Hosts {}), deadline::STANDARD),
        Some(HostsCommand::Check { name }) => {
            (Request::CheckHost(CheckHost { name }), deadline::LONG)
        }
    };
    let answer = bus.call(&request.to_value(), None, wait)?;
    if json {
        output::json(&answer);
        return Ok(Exit::Success);
    }
    let empty = Vec::new();
    let hosts = answer["Hosts"].as_array().unwrap_or(&empty);
    if hosts.is_empty() {
        output::line("no hosts (add [hosts.NAME] to the config file)");
        return Ok(Exit::Success);
    }
    let text = |v: &Value, key: &str| match &v[key] {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let rows: Vec<Vec<String>> = hosts
        .iter()
        .map(|h| {
            vec![
                text(h, "name"),
                text(h, "ssh"),
                text(h, "state"),
                text(h, "remote_port"),
                text(h, "reconnects"),
                render::one_line(&text(h, "error")),
            ]
        })
        .collect();
    let columns = [
        Column::new("NAME", 4, 20),
        Column::new("SSH", 3, 30),
        Column::new("STATE", 5, 10),
        Column::new("PORT", 4, 6),
        Column::new("RECONNECTS", 10, 10),
        Column::new("ERROR", 5, 200),
    ];
    for line in render::table(&columns, &rows, render::terminal_width()) {
        output::line(&line);
    }
    Ok(Exit::Success)
}
