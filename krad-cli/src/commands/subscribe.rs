//! `krad subscribe`: the SubscribeAgents stream as JSON lines, one per message,
//! flushed as each arrives — for scripts and other programs to follow the agents.

use krad_bus::client::{self, ClientError, Item, Lines};
use krad_bus::protocol::StreamMessage;
use krad_bus::request::subscribe_agents::SubscribeAgents;
use serde_json::Value;

use crate::connect::{AppConnection, ConnectArgs, client_failure, item_failure};
use crate::exit::{Exit, Failure};
use crate::print;

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
pub(crate) struct SubscribeArgs {
    /// Only the agents of this environment.
    #[arg(long = "env", value_name = "NAME")]
    pub environment: Option<String>,
    /// Resume: start with only what changed after this rev (a fresh snapshot if the app cannot tell).
    #[arg(long, value_name = "N")]
    pub since_rev: Option<u64>,
}

/// Prints the stream until the app stops or closes it.
pub(crate) fn run(args: SubscribeArgs, connect: &ConnectArgs, _json: bool) -> anyhow::Result<Exit> {
    let bus = AppConnection::find(connect)?;
    print_stream(&bus, args.environment, args.since_rev)
}

/// Opens a SubscribeAgents stream.
pub(crate) fn open(
    bus: &AppConnection,
    environment: Option<String>,
    since_rev: Option<u64>,
) -> Result<Lines<StreamMessage>, Failure> {
    bus.client()
        .subscribe(SubscribeAgents {
            environment,
            since_rev,
        })
        .map_err(client_failure)
}

/// One line of a SubscribeAgents stream: its JSON as the app wrote it, and the
/// message it is (`None` for one this CLI does not know).
#[derive(Debug)]
pub(crate) struct Line {
    /// The line as JSON.
    pub raw: Value,
    /// The message, typed.
    pub message: Option<StreamMessage>,
}

/// Reads a line of the stream; a broken stream, or an `Error` instead of the
/// stream (the request refused), is a [`Failure`].
pub(crate) fn read(
    line: Result<client::Line<StreamMessage>, ClientError>,
) -> Result<Line, Failure> {
    let client::Line { raw, item } = line.map_err(client_failure)?;
    if let Some(failure) = item_failure(&item) {
        return Err(failure.answered(raw));
    }
    let message = match item {
        Item::Message(message) => Some(message),
        _ => None,
    };
    Ok(Line { raw, message })
}

/// Prints every message of a SubscribeAgents stream as one JSON line. Ends with
/// success on `"ShuttingDown"` or when the app closes the stream; an `Error`
/// message ends it with that error's exit code.
pub(crate) fn print_stream(
    bus: &AppConnection,
    environment: Option<String>,
    since_rev: Option<u64>,
) -> anyhow::Result<Exit> {
    for line in open(bus, environment, since_rev)? {
        let line = read(line)?;
        print::json(&line.raw);
        if matches!(line.message, Some(StreamMessage::ShuttingDown)) {
            break;
        }
    }
    Ok(Exit::Success)
}
