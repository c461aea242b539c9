//! Codex CLI: its `PermissionRequest` hook (the event's JSON on stdin) becomes
//! an Ask on the bus, answered `allow` or `deny` (Codex takes no rule to keep
//! from a hook: no "always allow"); its `notify` program's
//! `agent-turn-complete` reports `idle` with the last assistant message.

use krad_bus::request::report::{Report, ReportedState};
use serde::Deserialize;
use serde_json::Value;

use super::{Permission, ask, cut, decision};
use crate::connect::ConnectArgs;
use crate::exit::Exit;

/// A Codex hook event, as far as krad reads it.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct CodexHookEvent {
    /// `PermissionRequest`, …
    pub hook_event_name: String,
    /// `Bash` for a shell command (its input `{"command", "description"}`).
    pub tool_name: Option<String>,
    /// The tool's own input: any JSON.
    pub tool_input: Value,
    /// The tool call's id (Codex 0.171 gives none with a PermissionRequest).
    pub tool_use_id: Option<String>,
}

/// What Codex's `notify` program gets, as far as krad reads it.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "kebab-case")]
pub(crate) struct CodexNotification {
    /// `agent-turn-complete`.
    #[serde(rename = "type")]
    pub kind: String,
    pub thread_id: Option<String>,
    pub input_messages: Vec<String>,
    pub last_assistant_message: Option<String>,
}

/// A Codex PermissionRequest: raised as an Ask on the bus; the decision is
/// printed the way Codex reads it. Nothing is printed when nobody decided
/// (expired, the app gone): Codex then shows its own approval dialog.
pub(super) fn permission_request(event: &CodexHookEvent, connect: &ConnectArgs) -> Exit {
    let Some(tool) = &event.tool_name else {
        return Exit::Success;
    };
    let permission = Permission {
        tool: tool.clone(),
        input: event.tool_input.clone(),
        call_id: event.tool_use_id.clone(),
        // Codex refuses `updatedPermissions` from a hook.
        always: None,
    };
    if let Some(answered) = ask(permission, connect)
        && let Some(decision) = decision(None, &answered)
    {
        crate::print::json(&decision);
    }
    Exit::Success
}

/// The first words of the prompt of Codex's hidden title turn: its notify is not
/// the user's turn (its message is the generated title, its thread not the
/// conversation's).
const CODEX_TITLE_PROMPT: &str = "Generate a concise, single-line task title";

/// The report a Codex notify call stands for.
pub(crate) fn codex_report(notification: &CodexNotification) -> Option<Report> {
    if notification.kind != "agent-turn-complete" {
        return None;
    }
    let title_turn = notification
        .input_messages
        .first()
        .is_some_and(|m| m.trim_start().starts_with(CODEX_TITLE_PROMPT));
    if title_turn {
        return None;
    }
    Some(Report {
        state: ReportedState::Idle,
        message: notification.last_assistant_message.clone().map(cut),
        title: None,
        session: notification.thread_id.clone(),
        transcript: notification
            .thread_id
            .as_deref()
            .and_then(rollout_file)
            .and_then(|path| super::transcript(path.to_str())),
    })
}

/// The rollout file Codex keeps of thread `thread`:
/// `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-…-THREAD.jsonl` (`CODEX_HOME`
/// defaults to `~/.codex`), the newest days looked at first.
fn rollout_file(thread: &str) -> Option<std::path::PathBuf> {
    let home = std::env::var_os("CODEX_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".codex")))?;
    let suffix = format!("-{thread}.jsonl");
    let newest_first = |dir: &std::path::Path| -> Vec<std::path::PathBuf> {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .collect();
        entries.sort_unstable_by(|a, b| b.cmp(a));
        entries
    };
    for year in newest_first(&home.join("sessions")) {
        for month in newest_first(&year) {
            for day in newest_first(&month) {
                if let Some(file) = newest_first(&day).into_iter().find(|f| {
                    f.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("rollout-") && n.ends_with(&suffix))
                }) {
                    return Some(file);
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn notification(value: Value) -> CodexNotification {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn codex_turn_complete_is_idle() {
        let r = codex_report(&notification(
            json!({"type":"agent-turn-complete","thread-id":"t1","last-assistant-message":"Fixed."}),
        ))
        .unwrap();
        assert_eq!(
            (r.state, r.message.as_deref(), r.session.as_deref()),
            (ReportedState::Idle, Some("Fixed."), Some("t1"))
        );
        assert!(codex_report(&notification(json!({"type":"other"}))).is_none());
        let title = notification(json!({"type":"agent-turn-complete","thread-id":"t2",
            "input-messages":["Generate a concise, single-line task title of at most 36 characters…"],
            "last-assistant-message":"{\"title\":\"Say hello\"}"}));
        assert!(codex_report(&title).is_none(), "the hidden title turn");
    }

    #[test]
    fn a_permission_request_as_codex_0_171_sends_it() {
        // Seen from Codex 0.171.0 (tests/suite/real/FINDINGS.md).
        let event: CodexHookEvent = serde_json::from_value(json!({
            "session_id": "01a2", "turn_id": "01a3", "transcript_path": "/h/r.jsonl",
            "cwd": "/tmp/repo", "hook_event_name": "PermissionRequest",
            "model": "gpt-5.1-codex", "permission_mode": "default", "tool_name": "Bash",
            "tool_input": {"command": "touch made.txt", "description": "a step"}
        }))
        .unwrap();
        assert_eq!(event.hook_event_name, "PermissionRequest");
        assert_eq!(event.tool_name.as_deref(), Some("Bash"));
        assert_eq!(event.tool_input["command"], "touch made.txt");
        assert_eq!(event.tool_use_id, None);
    }
}
