//! Claude Code's hooks: `UserPromptSubmit`, `PreToolUse` and `PostToolUse`
//! report `working`; `Stop` reports `idle` with the last assistant message,
//! `StopFailure` `idle` with the error; `SessionStart` (a new, resumed or
//! cleared session, not a compaction) reports `idle`; a `permission_prompt`
//! notification reports `asking` and an `idle_prompt` one `idle`;
//! `PermissionRequest` becomes an Ask on the bus.

use krad_bus::request::report::{Report, ReportedState};
use serde::Deserialize;
use serde_json::Value;

use super::{Permission, ask, cut, decision};
use crate::connect::ConnectArgs;
use crate::exit::Exit;

/// A Claude Code hook event, as far as krad reads it (every other field is
/// ignored; a field krad reads that is missing is empty).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ClaudeEvent {
    /// `Stop`, `PreToolUse`, …
    pub hook_event_name: String,
    pub session_id: Option<String>,
    /// The session's transcript (JSONL), for a `Stop` without its message.
    pub transcript_path: Option<String>,
    /// `SessionStart`: `startup`, `resume`, `clear`, `compact`, …
    pub source: Option<String>,
    pub tool_name: Option<String>,
    /// The tool's own input: any JSON.
    pub tool_input: Value,
    pub tool_use_id: Option<String>,
    pub last_assistant_message: Option<String>,
    /// `StopFailure`: a word (`rate_limit`), or an object with a `message`.
    pub error: Option<Value>,
    pub error_details: Option<String>,
    /// `Notification`: `permission_prompt`, `idle_prompt`, …
    pub notification_type: Option<String>,
    pub message: Option<String>,
    /// `PermissionRequest`: what "always allow" could keep. Kept as given, so
    /// that the one chosen goes back to Claude Code exactly.
    pub permission_suggestions: Vec<Value>,
}

/// One of Claude Code's `permission_suggestions`, as far as krad reads it.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
enum Suggestion {
    AddRules {
        #[serde(default)]
        behavior: String,
        #[serde(default)]
        rules: Vec<Rule>,
    },
    AddDirectories {
        #[serde(default)]
        directories: Vec<String>,
    },
    /// A mode change (`setMode`) or anything newer: never offered.
    #[serde(other)]
    Other,
}

/// A permission rule: a tool, and what of it (`Bash` + `npm test:*`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Rule {
    #[serde(default)]
    tool_name: String,
    rule_content: Option<String>,
}

impl Suggestion {
    /// A scoped rule: every rule names a tool and what of it, so that it never
    /// allows a whole tool.
    fn scoped_rules(&self) -> bool {
        matches!(self, Suggestion::AddRules { behavior, rules }
            if behavior == "allow"
                && !rules.is_empty()
                && rules.iter().all(|r| !r.tool_name.is_empty()
                    && r.rule_content.as_deref().is_some_and(|c| !c.is_empty())))
    }

    /// Access to folders (the TUI's "always allow access to DIR/").
    fn directories(&self) -> bool {
        matches!(self, Suggestion::AddDirectories { directories }
            if !directories.is_empty() && directories.iter().all(|d| !d.is_empty()))
    }

    /// As a person reads it: `Bash(npm test:*)`, `access to /repo`.
    fn label(&self) -> String {
        match self {
            Suggestion::AddDirectories { directories } => {
                format!("access to {}", directories.join(", "))
            }
            Suggestion::AddRules { rules, .. } => rules
                .iter()
                .map(|rule| match &rule.rule_content {
                    Some(content) => format!("{}({content})", rule.tool_name),
                    None => rule.tool_name.clone(),
                })
                .collect::<Vec<_>>()
                .join(", "),
            Suggestion::Other => String::new(),
        }
    }
}

/// What Claude Code suggests keeping for "always allow", as it gave it, and
/// its label: the first `addRules` suggestion whose every rule has its content,
/// or else an `addDirectories` one. Mode changes (`setMode`) are never offered.
pub fn always_allow_rule(event: &ClaudeEvent) -> Option<(Value, String)> {
    let read: Vec<(&Value, Suggestion)> = event
        .permission_suggestions
        .iter()
        .filter_map(|v| Some((v, Suggestion::deserialize(v).ok()?)))
        .collect();
    read.iter()
        .find(|(_, s)| s.scoped_rules())
        .or_else(|| read.iter().find(|(_, s)| s.directories()))
        .map(|(v, s)| ((*v).clone(), s.label()))
}

/// A Claude Code PermissionRequest: raised as an Ask on the bus; the decision is
/// printed the way Claude Code reads it. Nothing is printed when nobody decided
/// (expired, the app gone), so Claude Code shows its own prompt as usual.
pub(super) fn permission_request(event: &ClaudeEvent, connect: &ConnectArgs) -> Exit {
    let Some(tool) = &event.tool_name else {
        return Exit::Success;
    };
    let rule = always_allow_rule(event);
    let permission = Permission {
        tool: tool.clone(),
        input: event.tool_input.clone(),
        call_id: event.tool_use_id.clone(),
        always: rule.as_ref().map(|(_, label)| label.clone()),
    };
    let Some(answered) = ask(permission, connect) else {
        return Exit::Success;
    };
    if let Some(decision) = decision(rule.as_ref().map(|(rule, _)| rule), &answered) {
        crate::output::json(&decision);
    }
    Exit::Success
}

/// The report a Claude Code hook event stands for.
pub fn claude_report(event: &ClaudeEvent) -> Option<Report> {
    let report = |state, message: Option<String>| Report {
        state,
        message: message.map(cut),
        title: None,
        session: event.session_id.clone(),
    };
    match event.hook_event_name.as_str() {
        "UserPromptSubmit" => Some(report(ReportedState::Working, None)),
        // A compaction starts a session in the middle of a turn.
        "SessionStart" => match event.source.as_deref() {
            Some("compact") => None,
            _ => Some(report(ReportedState::Idle, None)),
        },
        "PostToolUse" => Some(report(ReportedState::Working, None)),
        "StopFailure" => {
            let error = event
                .error
                .as_ref()
                .map(|e| match e {
                    Value::String(s) => s.clone(),
                    Value::Object(o) => o
                        .get("message")
                        .and_then(Value::as_str)
                        .map_or_else(|| e.to_string(), str::to_owned),
                    other => other.to_string(),
                })
                .or_else(|| event.error_details.clone())
                .unwrap_or_else(|| "the turn failed".to_owned());
            Some(report(ReportedState::Idle, Some(format!("error: {error}"))))
        }
        "PreToolUse" => {
            let tool = event.tool_name.clone()?;
            let detail = ["command", "file_path"]
                .iter()
                .find_map(|key| event.tool_input.get(key).and_then(Value::as_str))
                .map(|d| format!("{tool}: {}", d.lines().next().unwrap_or_default()));
            Some(report(ReportedState::Working, Some(detail.unwrap_or(tool))))
        }
        "Stop" => {
            let message = event.last_assistant_message.clone().or_else(|| {
                event
                    .transcript_path
                    .as_deref()
                    .and_then(last_assistant_text)
            });
            Some(report(ReportedState::Idle, message))
        }
        "Notification" => match event.notification_type.as_deref() {
            Some("permission_prompt") => Some(report(ReportedState::Asking, event.message.clone())),
            Some("idle_prompt") => Some(report(ReportedState::Idle, None)),
            _ => None,
        },
        _ => None,
    }
}

/// One line of a Claude Code transcript, as far as krad reads it.
#[derive(Deserialize)]
struct TranscriptLine {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    message: TranscriptMessage,
}

#[derive(Default, Deserialize)]
struct TranscriptMessage {
    /// A user's message may be a plain string: read as no parts.
    #[serde(default, deserialize_with = "parts_or_nothing")]
    content: Vec<Part>,
}

#[derive(Deserialize)]
struct Part {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}

fn parts_or_nothing<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Part>, D::Error> {
    let value = Value::deserialize(d)?;
    Ok(Vec::<Part>::deserialize(value).unwrap_or_default())
}

/// The text of the last assistant message of a Claude Code transcript (JSONL).
fn last_assistant_text(path: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().rev().find_map(|line| {
        let entry: TranscriptLine = serde_json::from_str(line).ok()?;
        if entry.kind != "assistant" {
            return None;
        }
        let joined: Vec<&str> = entry
            .message
            .content
            .iter()
            .filter(|p| p.kind == "text")
            .filter_map(|p| p.text.as_deref())
            .collect();
        (!joined.is_empty()).then(|| joined.join("\n"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::hook::decision;
    use serde_json::json;

    fn event(value: Value) -> ClaudeEvent {
        serde_json::from_value(value).unwrap()
    }

    fn report(value: Value) -> Option<Report> {
        claude_report(&event(value))
    }

    #[test]
    fn claude_events_map_to_reports() {
        let r = report(json!({"hook_event_name":"Stop","last_assistant_message":"Done."})).unwrap();
        assert_eq!(
            (r.state, r.message.as_deref()),
            (ReportedState::Idle, Some("Done."))
        );
        let r = report(json!({"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"npm test\nx"}})).unwrap();
        assert_eq!(
            (r.state, r.message.as_deref()),
            (ReportedState::Working, Some("Bash: npm test"))
        );
        let r = report(json!({"hook_event_name":"Notification","notification_type":"permission_prompt","message":"Claude needs your permission to use Bash"})).unwrap();
        assert_eq!(r.state, ReportedState::Asking);
        assert!(
            report(json!({"hook_event_name":"Notification","notification_type":"auth_success"}))
                .is_none()
        );
        let r = report(json!({"hook_event_name":"SessionStart","source":"resume"})).unwrap();
        assert_eq!((r.state, r.message), (ReportedState::Idle, None));
        assert!(report(json!({"hook_event_name":"SessionStart","source":"compact"})).is_none());
        let r = report(json!({"hook_event_name":"StopFailure","error":"rate_limit"})).unwrap();
        assert_eq!(
            (r.state, r.message.as_deref()),
            (ReportedState::Idle, Some("error: rate_limit"))
        );
        let r = report(
            json!({"hook_event_name":"StopFailure","error":{"message":"overloaded","code":529}}),
        )
        .unwrap();
        assert_eq!(r.message.as_deref(), Some("error: overloaded"));
        let r = report(json!({"hook_event_name":"PostToolUse","tool_name":"Bash"})).unwrap();
        assert_eq!(r.state, ReportedState::Working);
        assert!(report(json!({"hook_event_name":"SomethingNew"})).is_none());
    }

    #[test]
    fn always_allow_keeps_exactly_the_suggested_rule() {
        let rules = event(json!({
            "hook_event_name": "PermissionRequest",
            "tool_name": "Bash",
            "permission_suggestions": [
                {"type": "setMode", "mode": "acceptEdits", "destination": "session"},
                {"type": "addRules", "behavior": "allow", "destination": "localSettings",
                 "rules": [{"toolName": "Bash", "ruleContent": "npm test:*"}]}
            ]
        }));
        let (rule, label) = always_allow_rule(&rules).unwrap();
        assert_eq!(label, "Bash(npm test:*)");
        assert_eq!(
            rule["destination"], "localSettings",
            "as Claude Code gave it"
        );
        let answered = serde_json::from_value(
            json!({"ask": "a", "by": "client", "answer": {"option": "allow-always"}}),
        )
        .unwrap();
        let decided = decision(Some(&rule), &answered).unwrap();
        assert_eq!(
            decided.pointer("/hookSpecificOutput/decision/updatedPermissions/0"),
            Some(&rule)
        );
        // A rule without content would allow the whole tool: not offered.
        let bare = event(json!({"permission_suggestions": [
            {"type": "addRules", "behavior": "allow", "destination": "session",
             "rules": [{"toolName": "Bash"}]}
        ]}));
        assert!(always_allow_rule(&bare).is_none());
        // What the TUI offers for a command in the folder: access to it.
        let dirs = event(json!({"permission_suggestions": [
            {"type": "setMode", "mode": "acceptEdits", "destination": "session"},
            {"type": "addDirectories", "directories": ["/r/repo"], "destination": "session"}
        ]}));
        let (rule, label) = always_allow_rule(&dirs).unwrap();
        assert_eq!(rule["type"], "addDirectories");
        assert_eq!(label, "access to /r/repo");
        let only_mode = event(json!({"permission_suggestions": [
            {"type": "setMode", "mode": "acceptEdits", "destination": "session"},
            {"type": "somethingNewer", "x": 1}
        ]}));
        assert!(always_allow_rule(&only_mode).is_none());
        assert!(always_allow_rule(&event(json!({}))).is_none());
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
        let r = report(json!({"hook_event_name":"Stop","transcript_path":path})).unwrap();
        assert_eq!(r.message.as_deref(), Some("All green."));
    }
}
