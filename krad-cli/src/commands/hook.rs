//! `krad hook`: the glue between an agent CLI's own notifications and the bus.
//!
//! * `krad hook claude` — the command of the hooks the `claude` profile injects
//!   with `--settings`. Reads the hook's JSON on stdin: `UserPromptSubmit`,
//!   `PreToolUse` and `PostToolUse` report `working`; `Stop` reports `idle` with
//!   the last assistant message, `StopFailure` `idle` with the error;
//!   `SessionStart` (a new, resumed or cleared session, not a compaction)
//!   reports `idle`; a `permission_prompt` notification reports `asking` and an
//!   `idle_prompt` one `idle`; `PermissionRequest` becomes an Ask on the bus.
//! * `krad hook codex JSON` — Codex's `notify` program: `agent-turn-complete`
//!   reports `idle` with the last assistant message.
//!
//! A hook must never get in the agent's way: it prints nothing on stdout (Claude
//! Code would read it), always exits 0, and says what went wrong only in the
//! log (`RUST_LOG=debug`).

use std::io::Read;

use krad_bus::protocol::{AnsweredInfo, DecidedBy};
use krad_bus::request::ask::{Ask, AskKind, AskOption, AskTool};
use krad_bus::request::deadline;
use krad_bus::request::report::{Report, ReportedState};
use serde_json::{Value, json};

use crate::connect::{Bus, ConnectArgs};
use crate::exit::Exit;

/// Messages longer than this are cut (with an ellipsis).
const MAX_MESSAGE: usize = 2000;

/// Arguments of `krad hook`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Injected by the claude and codex profiles; you do not call it yourself.\n\n\
    Examples:\n  echo '{\"hook_event_name\":\"Stop\",\"last_assistant_message\":\"Done.\"}' | krad hook claude\n  \
    krad hook codex '{\"type\":\"agent-turn-complete\",\"last-assistant-message\":\"Done.\"}'"
)]
pub struct HookArgs {
    #[command(subcommand)]
    pub agent: HookAgent,
}

/// Which agent CLI is calling.
#[derive(Debug, clap::Subcommand)]
pub enum HookAgent {
    /// A Claude Code hook (the event's JSON on stdin).
    Claude,
    /// A Codex notify call (the event's JSON as the last argument).
    Codex {
        /// The notification, as Codex passes it.
        notification: Option<String>,
    },
}

/// Turns the event into a Report; never fails the caller.
pub fn run(args: HookArgs, connect: &ConnectArgs, _json: bool) -> anyhow::Result<Exit> {
    let report = match args.agent {
        HookAgent::Claude => {
            let mut input = String::new();
            let _ = std::io::stdin()
                .take(16 * 1024 * 1024)
                .read_to_string(&mut input);
            let event = serde_json::from_str::<Value>(&input).ok();
            if let Some(event) = &event
                && event.get("hook_event_name").and_then(Value::as_str) == Some("PermissionRequest")
            {
                return Ok(permission_request(event, connect));
            }
            event.and_then(|event| claude_report(&event))
        }
        HookAgent::Codex { notification } => notification
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .and_then(|event| codex_report(&event)),
    };
    let Some(report) = report else {
        tracing::debug!("hook event ignored");
        return Ok(Exit::Success);
    };
    let sent = Bus::find(connect).and_then(|bus| bus.send(report, None));
    if let Err(e) = sent {
        tracing::debug!("hook could not report: {e}");
    }
    Ok(Exit::Success)
}

/// How long a permission request waits on the bus for someone to answer before
/// it gives the question back to Claude Code's own dialog (also on screen
/// meanwhile), unless `KRAD_PERMISSION_ASK_SECS` says otherwise (1–1800).
pub const PERMISSION_ASK_SECS: u64 = 120;

/// The variable that changes [`PERMISSION_ASK_SECS`] (a profile's `env` sets it).
pub const PERMISSION_ASK_SECS_ENV: &str = "KRAD_PERMISSION_ASK_SECS";

/// How long this permission request waits on the bus.
fn permission_ask_secs() -> u64 {
    std::env::var(PERMISSION_ASK_SECS_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|secs| (1..=deadline::MAX_WAIT_SECS).contains(secs))
        .unwrap_or(PERMISSION_ASK_SECS)
}

/// A Claude Code PermissionRequest: raised as an Ask on the bus; the decision is
/// printed the way Claude Code reads it. Nothing is printed when nobody decided
/// (expired, the app gone), so Claude Code shows its own prompt as usual.
fn permission_request(event: &Value, connect: &ConnectArgs) -> Exit {
    let Some(tool) = event.get("tool_name").and_then(Value::as_str) else {
        return Exit::Success;
    };
    let rule = always_allow_rule(event);
    let mut options = vec![
        AskOption {
            id: "allow".into(),
            label: "Allow".into(),
        },
        AskOption {
            id: "deny".into(),
            label: "Deny".into(),
        },
    ];
    if let Some(rule) = &rule {
        options.insert(
            1,
            AskOption {
                id: "allow-always".into(),
                label: format!("Always allow {}", rule_label(rule)),
            },
        );
    }
    let ask = Ask {
        kind: AskKind::Permission,
        tool: Some(AskTool {
            name: tool.to_owned(),
            input: event.get("tool_input").cloned().unwrap_or(Value::Null),
        }),
        tool_call_id: event
            .get("tool_use_id")
            .and_then(Value::as_str)
            .map(str::to_owned),
        title: None,
        options: Some(options),
        fields: None,
        expires_in_secs: Some(permission_ask_secs()),
    };
    let answered = match Bus::find(connect).and_then(|bus| bus.send(ask, None)) {
        Ok(reply) => reply.answer,
        Err(e) => {
            tracing::debug!("permission request not routed: {e}");
            return Exit::Success;
        }
    };
    if let Some(decision) = claude_decision(rule.as_ref(), &answered) {
        crate::print::json(&decision);
    }
    Exit::Success
}

/// What Claude Code suggests keeping for "always allow", as it gave it: the
/// first `addRules` suggestion whose every rule has its content (so that it
/// never allows a whole tool), or else an `addDirectories` one (its TUI's
/// "always allow access to DIR/"). Mode changes (`setMode`) are never offered.
pub fn always_allow_rule(event: &Value) -> Option<Value> {
    let suggestions = event.get("permission_suggestions")?.as_array()?;
    let text = |v: &Value| v.as_str().is_some_and(|t| !t.is_empty());
    let scoped_rules = |suggestion: &&Value| {
        suggestion.get("type").and_then(Value::as_str) == Some("addRules")
            && suggestion.get("behavior").and_then(Value::as_str) == Some("allow")
            && suggestion
                .get("rules")
                .and_then(Value::as_array)
                .is_some_and(|rules| {
                    !rules.is_empty()
                        && rules.iter().all(|rule| {
                            rule.get("toolName").is_some_and(text)
                                && rule.get("ruleContent").is_some_and(text)
                        })
                })
    };
    let directories = |suggestion: &&Value| {
        suggestion.get("type").and_then(Value::as_str) == Some("addDirectories")
            && suggestion
                .get("directories")
                .and_then(Value::as_array)
                .is_some_and(|dirs| !dirs.is_empty() && dirs.iter().all(text))
    };
    suggestions
        .iter()
        .find(scoped_rules)
        .or_else(|| suggestions.iter().find(directories))
        .cloned()
}

/// A suggestion as a person reads it: `Bash(npm test:*)`, `access to /repo`.
fn rule_label(suggestion: &Value) -> String {
    if let Some(dirs) = suggestion.get("directories").and_then(Value::as_array) {
        let dirs: Vec<&str> = dirs.iter().filter_map(Value::as_str).collect();
        return format!("access to {}", dirs.join(", "));
    }
    let rules: Vec<String> = suggestion
        .get("rules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|rule| {
            let tool = rule.get("toolName").and_then(Value::as_str).unwrap_or("?");
            match rule.get("ruleContent").and_then(Value::as_str) {
                Some(content) => format!("{tool}({content})"),
                None => tool.to_owned(),
            }
        })
        .collect();
    rules.join(", ")
}

/// What Claude Code reads from a PermissionRequest hook, for an Ask's answer;
/// `None` when nobody decided. `rule`: the suggestion "always allow" keeps.
pub fn claude_decision(rule: Option<&Value>, answered: &AnsweredInfo) -> Option<Value> {
    let by = match answered.by {
        DecidedBy::Timeout | DecidedBy::Program => return None,
        DecidedBy::Phone => "phone",
        DecidedBy::Client => "client",
        DecidedBy::Other => "?",
    };
    let decision = match answered.answer.option()? {
        "allow" => json!({ "behavior": "allow" }),
        "allow-always" => match rule {
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

/// The report a Claude Code hook event stands for.
pub fn claude_report(event: &Value) -> Option<Report> {
    let text = |key: &str| event.get(key).and_then(Value::as_str).map(str::to_owned);
    let report = |state, message: Option<String>| Report {
        state,
        message: message.map(cut),
        title: None,
        session: text("session_id"),
    };
    match event.get("hook_event_name")?.as_str()? {
        "UserPromptSubmit" => Some(report(ReportedState::Working, None)),
        // A compaction starts a session in the middle of a turn.
        "SessionStart" => match event.get("source").and_then(Value::as_str) {
            Some("compact") => None,
            _ => Some(report(ReportedState::Idle, None)),
        },
        "PostToolUse" => Some(report(ReportedState::Working, None)),
        "StopFailure" => {
            let error = event
                .get("error")
                .map(|e| match e {
                    Value::String(s) => s.clone(),
                    Value::Object(o) => o
                        .get("message")
                        .and_then(Value::as_str)
                        .map_or_else(|| e.to_string(), str::to_owned),
                    other => other.to_string(),
                })
                .or_else(|| text("error_details"))
                .unwrap_or_else(|| "the turn failed".to_owned());
            Some(report(ReportedState::Idle, Some(format!("error: {error}"))))
        }
        "PreToolUse" => {
            let tool = text("tool_name")?;
            let detail = event
                .pointer("/tool_input/command")
                .or_else(|| event.pointer("/tool_input/file_path"))
                .and_then(Value::as_str)
                .map(|d| format!("{tool}: {}", d.lines().next().unwrap_or_default()));
            Some(report(ReportedState::Working, Some(detail.unwrap_or(tool))))
        }
        "Stop" => {
            let message = text("last_assistant_message")
                .or_else(|| text("transcript_path").and_then(|p| last_assistant_text(&p)));
            Some(report(ReportedState::Idle, message))
        }
        "Notification" => match event.get("notification_type").and_then(Value::as_str) {
            Some("permission_prompt") => Some(report(ReportedState::Asking, text("message"))),
            Some("idle_prompt") => Some(report(ReportedState::Idle, None)),
            _ => None,
        },
        _ => None,
    }
}

/// The first words of the prompt of Codex's hidden title turn: its notify is not
/// the user's turn (its message is the generated title, its thread not the
/// conversation's).
const CODEX_TITLE_PROMPT: &str = "Generate a concise, single-line task title";

/// The report a Codex notify call stands for.
pub fn codex_report(event: &Value) -> Option<Report> {
    if event.get("type")?.as_str()? != "agent-turn-complete" {
        return None;
    }
    let title_turn = event
        .pointer("/input-messages/0")
        .and_then(Value::as_str)
        .is_some_and(|m| m.trim_start().starts_with(CODEX_TITLE_PROMPT));
    if title_turn {
        return None;
    }
    Some(Report {
        state: ReportedState::Idle,
        message: event
            .get("last-assistant-message")
            .and_then(Value::as_str)
            .map(|m| cut(m.to_owned())),
        title: None,
        session: event
            .get("thread-id")
            .and_then(Value::as_str)
            .map(str::to_owned),
    })
}

/// The text of the last assistant message of a Claude Code transcript (JSONL).
fn last_assistant_text(path: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().rev().find_map(|line| {
        let entry: Value = serde_json::from_str(line).ok()?;
        if entry.get("type")?.as_str()? != "assistant" {
            return None;
        }
        let parts = entry.pointer("/message/content")?.as_array()?;
        let joined: Vec<&str> = parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect();
        (!joined.is_empty()).then(|| joined.join("\n"))
    })
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
    use serde_json::json;

    #[test]
    fn claude_events_map_to_reports() {
        let r = claude_report(&json!({"hook_event_name":"Stop","last_assistant_message":"Done."}))
            .unwrap();
        assert_eq!(
            (r.state, r.message.as_deref()),
            (ReportedState::Idle, Some("Done."))
        );
        let r = claude_report(&json!({"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"npm test\nx"}})).unwrap();
        assert_eq!(
            (r.state, r.message.as_deref()),
            (ReportedState::Working, Some("Bash: npm test"))
        );
        let r = claude_report(&json!({"hook_event_name":"Notification","notification_type":"permission_prompt","message":"Claude needs your permission to use Bash"})).unwrap();
        assert_eq!(r.state, ReportedState::Asking);
        assert!(
            claude_report(
                &json!({"hook_event_name":"Notification","notification_type":"auth_success"})
            )
            .is_none()
        );
        let r =
            claude_report(&json!({"hook_event_name":"SessionStart","source":"resume"})).unwrap();
        assert_eq!((r.state, r.message), (ReportedState::Idle, None));
        assert!(
            claude_report(&json!({"hook_event_name":"SessionStart","source":"compact"})).is_none()
        );
        let r =
            claude_report(&json!({"hook_event_name":"StopFailure","error":"rate_limit"})).unwrap();
        assert_eq!(
            (r.state, r.message.as_deref()),
            (ReportedState::Idle, Some("error: rate_limit"))
        );
        let r =
            claude_report(&json!({"hook_event_name":"PostToolUse","tool_name":"Bash"})).unwrap();
        assert_eq!(r.state, ReportedState::Working);
        assert!(claude_report(&json!("garbage")).is_none());
    }

    #[test]
    fn always_allow_keeps_exactly_the_suggested_rule() {
        let event = json!({
            "hook_event_name": "PermissionRequest",
            "tool_name": "Bash",
            "permission_suggestions": [
                {"type": "setMode", "mode": "acceptEdits", "destination": "session"},
                {"type": "addRules", "behavior": "allow", "destination": "localSettings",
                 "rules": [{"toolName": "Bash", "ruleContent": "npm test:*"}]}
            ]
        });
        let rule = always_allow_rule(&event).unwrap();
        assert_eq!(rule_label(&rule), "Bash(npm test:*)");
        let answered = serde_json::from_value(
            json!({"ask": "a", "by": "client", "answer": {"option": "allow-always"}}),
        )
        .unwrap();
        let decision = claude_decision(Some(&rule), &answered).unwrap();
        assert_eq!(
            decision.pointer("/hookSpecificOutput/decision/updatedPermissions/0"),
            Some(&rule)
        );
        // A rule without content would allow the whole tool: not offered.
        let bare = json!({"permission_suggestions": [
            {"type": "addRules", "behavior": "allow", "destination": "session",
             "rules": [{"toolName": "Bash"}]}
        ]});
        assert!(always_allow_rule(&bare).is_none());
        // What the TUI offers for a command in the folder: access to it.
        let dirs = json!({"permission_suggestions": [
            {"type": "setMode", "mode": "acceptEdits", "destination": "session"},
            {"type": "addDirectories", "directories": ["/r/repo"], "destination": "session"}
        ]});
        let rule = always_allow_rule(&dirs).unwrap();
        assert_eq!(rule["type"], "addDirectories");
        assert_eq!(rule_label(&rule), "access to /r/repo");
        let only_mode = json!({"permission_suggestions": [
            {"type": "setMode", "mode": "acceptEdits", "destination": "session"}
        ]});
        assert!(always_allow_rule(&only_mode).is_none());
        assert!(always_allow_rule(&json!({})).is_none());
        // Nobody decided: Claude Code asks in its own terminal.
        let timeout =
            serde_json::from_value(json!({"ask": "a", "by": "timeout", "answer": {}})).unwrap();
        assert!(claude_decision(Some(&rule), &timeout).is_none());
        let denied = serde_json::from_value(
            json!({"ask": "a", "by": "phone", "answer": {"option": "deny"}, "note": "newer"}),
        )
        .unwrap();
        assert_eq!(
            claude_decision(None, &denied).unwrap()["hookSpecificOutput"]["decision"]["message"],
            "Denied by the user (via krad, phone)."
        );
    }

    #[test]
    fn stop_falls_back_to_the_transcript() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        std::fs::write(
            &path,
            "{\"type\":\"user\",\"message\":{\"content\":\"hi\"}}\n\
             {\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"All green.\"}]}}\n",
        )
        .unwrap();
        let r = claude_report(&json!({"hook_event_name":"Stop","transcript_path":path})).unwrap();
        assert_eq!(r.message.as_deref(), Some("All green."));
    }

    #[test]
    fn codex_turn_complete_is_idle() {
        let r =
            codex_report(&json!({"type":"agent-turn-complete","last-assistant-message":"Fixed."}))
                .unwrap();
        assert_eq!(
            (r.state, r.message.as_deref()),
            (ReportedState::Idle, Some("Fixed."))
        );
        assert!(codex_report(&json!({"type":"other"})).is_none());
        let title = json!({"type":"agent-turn-complete","thread-id":"t2",
            "input-messages":["Generate a concise, single-line task title of at most 36 characters…"],
            "last-assistant-message":"{\"title\":\"Say hello\"}"});
        assert!(codex_report(&title).is_none(), "the hidden title turn");
    }

    #[test]
    fn long_messages_are_cut_on_a_char_boundary() {
        let cut = cut("é".repeat(MAX_MESSAGE));
        assert!(cut.len() <= MAX_MESSAGE + '…'.len_utf8());
        assert!(cut.ends_with('…'));
    }
}
