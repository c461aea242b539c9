//! `krad net`: what a contained agent tried to reach on the network — each
//! connection attempt its sandbox's allowlist saw, allowed or refused
//! (Connections).

use std::time::Duration;

use krad_bus::request::connections::{ConnectionAttempt, Connections, ConnectionsInfo};

use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::Exit;
use crate::print;

/// How often `--follow` asks for new attempts.
const FOLLOW_EVERY: Duration = Duration::from_millis(500);

/// Arguments of `krad net`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Only agents in a sandbox with [sandbox] network = \"allow\" have their connections \
checked and logged (docs/sandbox.md). Each line: time, allowed or REFUSED, host:port, \
how (proxy, tunnel, relay), bytes sent and received.

Examples:
  krad net 4
  krad net 4 --follow
  krad net 4 --json | jq '.Connections.attempts[] | select(.allowed | not)'")]
pub(crate) struct NetArgs {
    /// The terminal id, or the agent's name.
    #[arg(value_name = "TARGET", value_parser = super::parse_target)]
    pub target: super::Target,
    /// Keep printing new attempts as they come (with --json, one attempt per line).
    #[arg(long, short)]
    pub follow: bool,
}

/// Sends Connections (again and again with `--follow`) and prints the attempts.
pub(crate) fn run(args: NetArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let app = AppConnection::find(connect)?;
    let target = args.target.resolve(&app)?;
    let ask = |since| Connections { target, since };
    let reply = app.send(ask(None), None)?;
    if !args.follow {
        print::emit(json, &reply, |info| print::lines(text_lines(info)));
        return Ok(Exit::Success);
    }
    let mut last = show_new(&reply.answer, json, None);
    loop {
        std::thread::sleep(FOLLOW_EVERY);
        let reply = app.send(ask(last), None)?;
        last = show_new(&reply.answer, json, last).or(last);
    }
}

/// Prints the attempts after `last` (the head too, the first time); answers
/// the newest one's number.
fn show_new(info: &ConnectionsInfo, json: bool, last: Option<u64>) -> Option<u64> {
    if last.is_none() && !json {
        print::lines(text_lines(&ConnectionsInfo {
            attempts: Vec::new(),
            ..info.clone()
        }));
    }
    for attempt in &info.attempts {
        if json {
            print::json(&serde_json::to_value(attempt).unwrap_or_default());
        } else {
            print::line(&attempt_line(attempt));
        }
    }
    info.attempts.last().map(|a| a.seq)
}

/// The allowlist, then one line per attempt.
fn text_lines(info: &ConnectionsInfo) -> Vec<String> {
    if info.network.is_none() {
        return vec![format!(
            "terminal {} has no allowlist: its connections are not logged \
             ([sandbox] network = \"allow\" logs them)",
            info.terminal
        )];
    }
    let mut lines = vec![format!("allowed: {}", info.allow.join(", "))];
    if info.dropped > 0 {
        lines.push(format!("({} older attempts no longer kept)", info.dropped));
    }
    lines.extend(info.attempts.iter().map(attempt_line));
    lines
}

fn attempt_line(a: &ConnectionAttempt) -> String {
    let verdict = if a.allowed { "allowed" } else { "REFUSED" };
    let mut line = format!(
        "{}  {verdict:<7}  {}:{}  {}  sent {} B, received {} B",
        a.at, a.host, a.port, a.via, a.sent, a.received
    );
    if let Some(error) = &a.error {
        line.push_str(&format!("  ({error})"));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_attempts_stand_out() {
        let info = ConnectionsInfo {
            terminal: 4,
            network: Some("allow".into()),
            allow: vec!["api.anthropic.com".into()],
            attempts: vec![ConnectionAttempt {
                seq: 1,
                at: "2026-12-06T12:00:00.000Z".into(),
                host: "example.com".into(),
                port: 443,
                via: "tunnel".into(),
                allowed: false,
                ..ConnectionAttempt::default()
            }],
            dropped: 0,
        };
        let lines = text_lines(&info);
        assert_eq!(lines[0], "allowed: api.anthropic.com");
        assert!(
            lines[1].contains("REFUSED  example.com:443  tunnel"),
            "{lines:?}"
        );
        let plain = ConnectionsInfo {
            terminal: 5,
            ..ConnectionsInfo::default()
        };
        assert!(text_lines(&plain)[0].contains("no allowlist"));
    }
}
