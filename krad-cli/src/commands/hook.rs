//! `krad hook`: the glue between an agent CLI's own hooks and notifications and
//! the bus.
//!
//! * `krad hook claude` — the command of the hooks the `claude` profile injects
//!   with `--settings`; the event's JSON on stdin ([`claude`]).
//! * `krad hook codex` — the command of the hooks the `codex` profile injects
//!   with `-c hooks.…` (the event's JSON on stdin: its `PermissionRequest`
//!   becomes an Ask), and, with the JSON as its last argument, Codex's `notify`
//!   program (`agent-turn-complete` reports `idle` with the last assistant
//!   message) ([`codex`]).
//!
//! Both CLIs' JSON is read into typed structs that name only what krad reads:
//! fields they add are ignored, and an event krad does not know is ignored.
//!
//! A hook must never get in the agent's way: it prints nothing on stdout but a
//! permission's decision (the CLI reads it), always exits 0, and says what went
//! wrong only in the log (`RUST_LOG=debug`).

use std::io::Read;

use krad_bus::protocol::{AnsweredInfo, DecidedBy};
use krad_bus::request::ask::{Ask, AskKind, AskOption, AskTool};
use krad_bus::request::deadline;
use serde_json::{Value, json};

use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::Exit;

mod claude;
mod codex;

pub(crate) use claude::{ClaudeEvent, claude_report};
pub(crate) use codex::{CodexHookEvent, CodexNotification, codex_report};

/// Messages longer than this are cut (with an ellipsis).
const MAX_MESSAGE: usize = 2000;

/// Arguments of `krad hook`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Injected by the claude and codex profiles; you do not call it yourself.\n\n\
    Examples:\n  echo '{\"hook_event_name\":\"Stop\",\"last_assistant_message\":\"Done.\"}' | krad hook claude\n  \
    krad hook codex '{\"type\":\"agent-turn-complete\",\"last-assistant-message\":\"Done.\"}'"
)]
pub(crate) struct HookArgs {
    #[command(subcommand)]
    pub agent: HookAgent,
}

/// Which agent CLI is calling.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum HookAgent {
    /// A Claude Code hook (the event's JSON on stdin).
    Claude,
    /// A Codex hook (the event's JSON on stdin), or its notify call (the JSON
    /// as the last argument).
    Codex {
        /// The notification, as Codex's `notify` passes it.
        notification: Option<String>,
    },
}

/// Turns the event into a Report or an Ask; never fails the caller.
pub(crate) fn run(args: HookArgs, connect: &ConnectArgs, _json: bool) -> anyhow::Result<Exit> {
    let report = match args.agent {
        HookAgent::Claude => {
            let Some(event) = parse::<ClaudeEvent>(&stdin()) else {
                return Ok(Exit::Success);
            };
            if event.hook_event_name == "PermissionRequest" {
                return Ok(claude::permission_request(&event, connect));
            }
            claude_report(&event)
        }
        HookAgent::Codex {
            notification: Some(text),
        } => parse::<CodexNotification>(&text).and_then(|n| codex_report(&n)),
        HookAgent::Codex { notification: None } => {
            if let Some(event) = parse::<CodexHookEvent>(&stdin())
                && event.hook_event_name == "PermissionRequest"
            {
                return Ok(codex::permission_request(&event, connect));
            }
            None
        }
    };
    let Some(report) = report else {
        tracing::debug!("hook event ignored");
        return Ok(Exit::Success);
    };
    let sent = AppConnection::find(connect).and_then(|bus| bus.send(report, None));
    if let Err(e) = sent {
        tracing::debug!("hook could not report: {e}");
    }
    Ok(Exit::Success)
}

/// The hook's stdin (at most 16 MiB).
fn stdin() -> String {
    let mut input = String::new();
    let _ = std::io::stdin()
        .take(16 * 1024 * 1024)
        .read_to_string(&mut input);
    input
}

/// The CLI's JSON as `T`; `None` (logged) when it is not that.
fn parse<T: serde::de::DeserializeOwned>(text: &str) -> Option<T> {
    serde_json::from_str(text)
        .inspect_err(|e| tracing::debug!("hook input not understood: {e}"))
        .ok()
}

/// How long a permission request waits on the bus for someone to answer before
/// it gives the question back to the CLI's own dialog, unless
/// `KRAD_PERMISSION_ASK_SECS` says otherwise (1–1800).
pub(crate) const PERMISSION_ASK_SECS: u64 = 120;

/// The variable that changes [`PERMISSION_ASK_SECS`] (a profile's `env` sets it).
pub(crate) const PERMISSION_ASK_SECS_ENV: &str = "KRAD_PERMISSION_ASK_SECS";

/// How long this permission request waits on the bus.
fn permission_ask_secs() -> u64 {
    std::env::var(PERMISSION_ASK_SECS_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|secs| (1..=deadline::MAX_WAIT_SECS).contains(secs))
        .unwrap_or(PERMISSION_ASK_SECS)
}

/// A permission the CLI is about to ask for, whichever CLI it is.
struct Permission {
    /// The tool (`Bash`, …) and its input as the CLI gave them.
    tool: String,
    input: Value,
    /// The tool call's id, when the CLI gives one.
    call_id: Option<String>,
    /// "Always allow": the label of what it would keep, when the CLI offers one.
    always: Option<String>,
}

/// Raises the permission as an Ask on the bus and waits for the decision;
/// `None` when it could not be raised (no bus, the app gone).
fn ask(permission: Permission, connect: &ConnectArgs) -> Option<AnsweredInfo> {
    let option = |id: &str, label: String| AskOption {
        id: id.into(),
        label,
    };
    let mut options = vec![option("allow", "Allow".into())];
    if let Some(label) = permission.always {
        options.push(option("allow-always", format!("Always allow {label}")));
    }
    options.push(option("deny", "Deny".into()));
    let ask = Ask {
        kind: AskKind::Permission,
        tool: Some(AskTool {
            name: permission.tool,
            input: permission.input,
        }),
        tool_call_id: permission.call_id,
        title: None,
        options: Some(options),
        fields: None,
        expires_in_secs: Some(permission_ask_secs()),
    };
    match AppConnection::find(connect).and_then(|bus| bus.send(ask, None)) {
        Ok(reply) => Some(reply.answer),
        Err(e) => {
            tracing::debug!("permission request not routed: {e}");
            None
        }
    }
}

/// The PermissionRequest hook's output for an Ask's answer, in the form both
/// Claude Code and Codex read (`hookSpecificOutput.decision`); `None` when
/// nobody decided, so that the CLI asks in its own terminal. `always`: the
/// permission "always allow" keeps (`updatedPermissions`: Claude Code only).
pub(crate) fn decision(always: Option<&Value>, answered: &AnsweredInfo) -> Option<Value> {
    let by = match answered.by {
        DecidedBy::Timeout | DecidedBy::Program => return None,
        DecidedBy::Phone => "phone",
        DecidedBy::Client => "client",
        DecidedBy::Other => "?",
    };
    let decision = match answered.answer.option()? {
        "allow" => json!({ "behavior": "allow" }),
        "allow-always" => match always {
            Some(rule) => json!({ "behavior": "allow", "updatedPermissions": [rule] }),
            None => json!({ "behavior": "allow" }),
        },
        "deny" => {
            json!({ "behavior": "deny", "message": format!("Denied by the user (via krad, {by}).") })
        }
        _ => return None,
    };
    Some(json!({
        "hookSpecificOutput": { "hookEventName": "PermissionRequest", "decision": decision }
    }))
}

/// A CLI's file of its model calls, as Report takes it (an absolute path
/// to a `.jsonl` file); `None` for anything else.
fn transcript(path: Option<&str>) -> Option<String> {
    path.filter(|p| p.starts_with('/') && p.ends_with(".jsonl") && p.len() <= 4096)
        .map(str::to_owned)
}

fn cut(mut message: String) -> String {
    if message.len() > MAX_MESSAGE {
        let mut end = MAX_MESSAGE;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push('…');
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_cut_on_a_char_boundary() {
        let cut = cut("é".repeat(MAX_MESSAGE));
        assert!(cut.len() <= MAX_MESSAGE + '…'.len_utf8());
        assert!(cut.ends_with('…'));
    }

    #[test]
    fn nobody_deciding_prints_nothing_and_a_denial_says_who() {
        let timeout =
            serde_json::from_value(json!({"ask": "a", "by": "timeout", "answer": {}})).unwrap();
        assert!(decision(None, &timeout).is_none());
        let program =
            serde_json::from_value(json!({"ask": "a", "by": "program", "answer": {}})).unwrap();
        assert!(decision(None, &program).is_none());
        let denied = serde_json::from_value(
            json!({"ask": "a", "by": "phone", "answer": {"option": "deny"}, "note": "newer"}),
        )
        .unwrap();
        assert_eq!(
            decision(None, &denied).unwrap()["hookSpecificOutput"]["decision"]["message"],
            "Denied by the user (via krad, phone)."
        );
        let allowed: AnsweredInfo = serde_json::from_value(
            json!({"ask": "a", "by": "client", "answer": {"option": "allow"}}),
        )
        .unwrap();
        assert_eq!(
            decision(None, &allowed).unwrap(),
            json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest",
                "decision": {"behavior": "allow"}}})
        );
    }

    // Regression (issue 35): foreign JSON is read through typed structs that
    // tolerate what they do not name, and ignore what they cannot read.
    #[test]
    fn unknown_fields_are_ignored_and_garbage_is_no_event() {
        assert!(parse::<ClaudeEvent>("\"garbage\"").is_none());
        assert!(parse::<ClaudeEvent>("{not json").is_none());
        let event: ClaudeEvent = parse(
            r#"{"hook_event_name":"Stop","last_assistant_message":"ok","brand_new":{"x":[1]}}"#,
        )
        .unwrap();
        assert_eq!(event.hook_event_name, "Stop");
        let n: CodexNotification = parse(
            r#"{"type":"agent-turn-complete","last-assistant-message":"ok","client":"codex-tui","new":1}"#,
        )
        .unwrap();
        assert_eq!(n.last_assistant_message.as_deref(), Some("ok"));
    }
}
