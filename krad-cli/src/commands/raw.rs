//! `krad raw`: any request as JSON, for scripts and for trying the protocol.
//! Prints every answer line as it arrives (one for most requests, many for a
//! stream) and exits with the code the first one maps to.

use std::io::Read;

use anyhow::Context;
use serde_json::Value;

use crate::connect::{AppConnection, ConnectArgs, answer_failure};
use crate::exit::{Exit, Failure};
use crate::print;

/// Arguments of `krad raw`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "The REQUEST is the envelope's `request` value: a name for a request \
without fields, or an object with one key. The envelope around it (token, from) is filled in.\n\n\
Examples:\n  krad raw Hello\n  krad raw '\"Stats\"'\n  krad raw '{\"Shutdown\":{\"close_terminals\":false}}'\n  \
echo '\"Hello\"' | krad raw -"
)]
pub(crate) struct RawArgs {
    /// The request as JSON ("Hello", {"Shutdown":{}}), a bare name, or - to read stdin.
    pub request: String,
    /// An at-most-once request id (1–128 printable ASCII characters, no spaces).
    #[arg(long, value_name = "ID")]
    pub request_id: Option<String>,
    /// Speak another API version (to see what the app says to other clients).
    #[arg(long, value_name = "N", default_value_t = krad_bus::protocol::API_VERSION)]
    pub api_version: u64,
}

/// Sends the request and prints the answer lines.
pub(crate) fn run(args: RawArgs, connect: &ConnectArgs, _json: bool) -> anyhow::Result<Exit> {
    let text = if args.request == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read the request from stdin")?;
        text
    } else {
        args.request.clone()
    };
    let request = parse_request(text.trim())?;
    let bus = AppConnection::find(connect)?.with_api_version(args.api_version);
    let messages = bus
        .client()
        .raw_lines(&request, args.request_id.as_deref())
        .map_err(|e| Failure::new(Exit::Unreachable, format!("the app is not running: {e}")))?;
    let mut exit = None;
    for message in messages {
        let message = message.map_err(|e| Failure::new(Exit::Failure, e.to_string()))?;
        print::json(&message.raw);
        if exit.is_none() {
            exit = Some(answer_failure(&message.raw).map_or(Exit::Success, |f| f.exit));
        }
    }
    exit.ok_or_else(|| {
        Failure::new(
            Exit::Failure,
            "the app closed the connection without answering",
        )
        .into()
    })
}

fn parse_request(text: &str) -> Result<Value, Failure> {
    if !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Ok(Value::String(text.to_owned()));
    }
    serde_json::from_str(text).map_err(|e| {
        Failure::new(
            Exit::Usage,
            format!("the request is not JSON ({e}); write it like '\"Hello\"' or '{{\"Shutdown\":{{}}}}'"),
        )
    })
}
