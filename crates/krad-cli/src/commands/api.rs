//! `krad api`: the handshake — which API version, build and pid the app serves.

use krad_bus::request::{Request, deadline, hello::Hello};

use crate::connect::{Bus, ConnectArgs};
use crate::exit::Exit;
use crate::output;

/// Arguments of `krad api`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  krad api\n  krad api --json")]
pub struct ApiArgs {}

/// Sends Hello and prints what the app serves.
pub fn run(_args: ApiArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let bus = Bus::find(connect)?;
    let answer = bus.call(
        &Request::Hello(Hello {}).to_value(),
        None,
        deadline::STANDARD,
    )?;
    if json {
        output::json(&answer);
        return Ok(Exit::Success);
    }
    let hello = &answer["Hello"];
    let pid = hello["pid"]
        .as_u64()
        .map(|p| format!(", pid {p}"))
        .unwrap_or_default();
    output::line(&format!(
        "agents API v{} at {} (build {}{pid})",
        hello["api_version"],
        bus.endpoint(),
        hello["build"].as_str().unwrap_or("?"),
    ));
    if let Some(requests) = hello["requests"].as_array() {
        let names: Vec<&str> = requests.iter().filter_map(|r| r.as_str()).collect();
        output::line(&format!("requests: {}", names.join(", ")));
    }
    Ok(Exit::Success)
}
