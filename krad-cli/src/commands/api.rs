//! `krad api`: the handshake — which API version, build and pid the app serves.

use krad_bus::request::hello::Hello;

use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::Exit;
use crate::print;

/// Arguments of `krad api`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  krad api\n  krad api --json")]
pub(crate) struct ApiArgs {}

/// Sends Hello and prints what the app serves.
pub(crate) fn run(_args: ApiArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let bus = AppConnection::find(connect)?;
    let reply = bus.send(Hello {}, None)?;
    print::emit(json, &reply, |hello| {
        let pid = hello.pid.map(|p| format!(", pid {p}")).unwrap_or_default();
        print::line(&format!(
            "agents API v{} at {} (build {}{pid})",
            hello.api_version,
            bus.endpoint(),
            hello.build,
        ));
        print::line(&format!("requests: {}", hello.requests.join(", ")));
        if let Some(memory) = &hello.memory_limits {
            print::line(&format!("memory limits per terminal: {memory}"));
        }
    });
    Ok(Exit::Success)
}
