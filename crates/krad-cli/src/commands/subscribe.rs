//! `krad subscribe`: the SubscribeAgents stream as JSON lines, one per message,
//! flushed as each arrives — for scripts and other programs to follow the agents.

use krad_bus::client::{ClientError, MessageStream};
use krad_bus::request::{Request, subscribe_agents::SubscribeAgents};
use serde_json::Value;

use crate::connect::{Bus, ConnectArgs, answer_failure};
use crate::exit::{Exit, Failure};
use crate::output;

/// Arguments of `krad subscribe`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
The first line is a Snapshot ({\"Snapshot\":{\"rev\",\"agents\",\"fresh\"}}), then one line per \
change ({\"Agent\":…} or {\"Removed\":…}), a Heartbeat every 15 s without one, and \
\"ShuttingDown\" when the app stops (exit 0). Always JSON lines, with or without --json.

Examples:
  krad subscribe
  krad subscribe --env feat-x | jq -c 'select(.Agent.state == \"idle\") | .Agent.terminal'
  krad subscribe --since-rev 120")]
pub struct SubscribeArgs {
    /// Only the agents of this environment.
    #[arg(long = "env", value_name = "NAME")]
    pub environment: Option<String>,
    /// Resume: start with only what changed after this rev (a fresh snapshot if the app cannot tell).
    #[arg(long, value_name = "N")]
    pub since_rev: Option<u64>,
}

/// Prints the stream until the app stops or closes it.
pub fn run(args: SubscribeArgs, connect: &ConnectArgs, _json: bool) -> anyhow::Result<Exit> {
    let bus = Bus::find(connect)?;
    print_stream(&bus, args.environment, args.since_rev)
}

/// Opens a SubscribeAgents stream.
pub(crate) fn open(
    bus: &Bus,
    environment: Option<String>,
    since_rev: Option<u64>,
) -> Result<MessageStream, Failure> {
    let request = Request::SubscribeAgents(SubscribeAgents {
        environment,
        since_rev,
    });
    bus.client()
        .stream(&request.to_value(), None)
        .map_err(stream_failure)
}

/// Prints every message of a SubscribeAgents stream as one JSON line. Ends with
/// success on `"ShuttingDown"` or when the app closes the stream; an `Error`
/// message ends it with that error's exit code.
pub(crate) fn print_stream(
    bus: &Bus,
    environment: Option<String>,
    since_rev: Option<u64>,
) -> anyhow::Result<Exit> {
    for message in open(bus, environment, since_rev)? {
        let message = message.map_err(stream_failure)?;
        if let Some(failure) = answer_failure(&message) {
            return Err(failure.into());
        }
        output::json(&message);
        if is_shutting_down(&message) {
            break;
        }
    }
    Ok(Exit::Success)
}

/// Whether the message is the app's last: `"ShuttingDown"`.
pub(crate) fn is_shutting_down(message: &Value) -> bool {
    message == "ShuttingDown"
}

/// The failure a broken stream stands for.
pub(crate) fn stream_failure(error: ClientError) -> Failure {
    match error {
        ClientError::Unreachable { endpoint, source } => Failure::new(
            Exit::Unreachable,
            format!(
                "the app is not running: nothing answers at {endpoint} ({source}); \
                 start it with `krad serve` in your repository"
            ),
        ),
        ClientError::BadEndpoint(_) => Failure::new(Exit::Usage, error.to_string()),
        other => Failure::new(Exit::Failure, other.to_string()),
    }
}
