//! `krad envs`: the environments — main and the worktrees — with their state.

use krad_bus::request::{Request, deadline, environments::Environments};
use serde_json::Value;

use crate::connect::{Bus, ConnectArgs};
use crate::exit::Exit;
use crate::output;
use crate::render::{self, Column};

/// Arguments of `krad envs`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  krad envs\n  krad envs --json | jq '.Environments[].name'")]
pub struct EnvsArgs {}

/// Lists the environments.
pub fn run(_args: EnvsArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let bus = Bus::find(connect)?;
    let answer = bus.call(
        &Request::Environments(Environments {}).to_value(),
        None,
        deadline::STANDARD,
    )?;
    if json {
        output::json(&answer);
        return Ok(Exit::Success);
    }
    let empty = Vec::new();
    let envs = answer["Environments"].as_array().unwrap_or(&empty);
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
    let rows: Vec<Vec<String>> = envs
        .iter()
        .map(|env| {
            let terminals: Vec<String> = env["terminals"]
                .as_array()
                .map(|ts| ts.iter().map(|t| t.to_string()).collect())
                .unwrap_or_default();
            let group = match (env["group"].as_str(), env["variant"].as_u64()) {
                (Some(g), Some(v)) => format!("{g} #{v}"),
                _ => String::new(),
            };
            vec![
                text(env, "name"),
                text(env, "kind"),
                text(env, "status").replace('_', " "),
                text(env, "branch"),
                group,
                terminals.join(","),
                text(env, "path"),
            ]
        })
        .collect();
    let columns = [
        Column::new("NAME", 4, 24),
        Column::new("KIND", 4, 8),
        Column::new("STATUS", 5, 12),
        Column::new("BRANCH", 6, 30),
        Column::new("GROUP", 5, 20),
        Column::new("TERMINALS", 9, 16),
        Column::new("PATH", 4, 200),
    ];
    for line in render::table(&columns, &rows, render::terminal_width()) {
        output::line(&line);
    }
    Ok(Exit::Success)
}
