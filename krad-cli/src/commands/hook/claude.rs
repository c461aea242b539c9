//! Claude Code's hooks: `UserPromptSubmit`, `PreToolUse` and `PostToolUse`
//! report `working`; `Stop` reports `idle` with the last assistant message —
//! or `working` while background work it started (a subagent) is still in
//! flight and will wake it; `StopFailure` reports `idle` with the error;
//! `SessionStart` (a new, resumed or cleared session, not a compaction) reports
//! `idle`; a `permission_prompt` or `agent_needs_input` notification reports
//! `asking` and an `idle_prompt` one `idle`; `PermissionRequest` becomes an Ask
//! on the bus.
//! An event from within a subagent (it has an `agent_id`) never makes the
//! agent idle: the main conversation goes on.

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
pub(crate) struct ClaudeEvent {
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
    /// Set when the event comes from within a subagent (2.1.332), not the main
    /// conversation.
    pub agent_id: Option<String>,
    /// `Stop`: the background work still in flight that will wake the session
    /// (2.1.332: a subagent runs in the background; the main turn stops, and a
    /// new one starts when the subagent is done).
    pub background_tasks: Vec<BackgroundTask>,
}

/// Background work a `Stop` says is in flight, as far as krad reads it.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct BackgroundTask {
    /// `subagent`, `shell`, …
    #[serde(rename = "type")]
    pub kind: String,
    pub description: String,
}

/// How many background tasks a message names.
const NAMED_TASKS: usize = 3;

/// The message of a stop that waits for background work.
fn waiting_for(tasks: &[BackgroundTask]) -> String {
    let named: Vec<&str> = tasks
        .iter()
        .take(NAMED_TASKS)
        .map(|t| {
            if t.description.is_empty() {
                t.kind.as_str()
            } else {
                t.description.as_str()
            }
        })
        .collect();
    let more = tasks.len().saturating_sub(NAMED_TASKS);
    let mut message = format!("waiting for background work: {}", named.join(", "));
    if more > 0 {
        message.push_str(&format!(" and {more} more"));
    }
    message
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
pub(super) fn always_allow_rule(event: &ClaudeEvent) -> Option<(Value, String)> {
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
        crate::print::json(&decision);
    }
    Exit::Success
}

/// The report a Claude Code hook event stands for.
pub(crate) fn claude_report(event: &ClaudeEvent) -> Option<Report> {
    let report = |state, message: Option<String>| Report {
        state,
        message: message.map(cut),
        title: None,
        session: event.session_id.clone(),
        transcript: super::transcript(event.transcript_path.as_deref()),
    };
    let in_subagent = event.agent_id.is_some();
    match event.hook_event_name.as_str() {
        // A subagent's turn ending, failing or waiting is not the agent's.
        "Stop" | "StopFailure" | "SessionStart" if in_subagent => None,
        "Notification"
            if in_subagent && event.notification_type.as_deref() == Some("idle_prompt") =>
        {
            None
        }
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
        // Paused until its background work wakes it: not done.
        "Stop" if !event.background_tasks.is_empty() => Some(report(
            ReportedState::Working,
            Some(waiting_for(&event.background_tasks)),
        )),
        // A background subagent that finished before this turn stopped is not
        // in `background_tasks`, but its report wakes the session at once.
        "Stop"
            if event
                .transcript_path
                .as_deref()
                .is_some_and(|p| !agents_not_reported(p).is_empty()) =>
        {
            Some(report(
                ReportedState::Working,
                Some("waiting for background work: a subagent's report".to_owned()),
            ))
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
            // `agent_needs_input` (2.1.332): an agent of the session — the main
            // one when auto mode cannot check an action, or one in the
            // background — waits for the user.
            Some("permission_prompt" | "agent_needs_input") => {
                Some(report(ReportedState::Asking, event.message.clone()))
            }
            Some("idle_prompt") => Some(report(ReportedState::Idle, None)),
            _ => None,
        },
        _ => None,
    }
}

/// How much of a transcript's end is read for background agents.
const TRANSCRIPT_TAIL: u64 = 8 * 1024 * 1024;

/// A transcript line's `toolUseResult` for an `Agent` call, as far as krad
/// reads it: 2.1.332 writes `{"isAsync":true,"status":"async_launched",
/// "agentId":…}` for a subagent it runs in the background.
#[derive(Deserialize)]
struct LaunchLine {
    #[serde(rename = "toolUseResult")]
    result: Launch,
}

#[derive(Deserialize)]
struct Launch {
    #[serde(default)]
    status: String,
    #[serde(rename = "agentId", default)]
    agent_id: String,
}

/// A transcript line's type (`user`, `assistant`, `queue-operation`, …).
#[derive(Deserialize)]
struct LineKind {
    #[serde(rename = "type", default)]
    kind: String,
}

/// The background agents the transcript (its last 8 MiB) shows launched and
/// not yet reported: no `<task-notification>` delivered to the session as a
/// user message names them (`<task-id>ID</…>`).
fn agents_not_reported(path: &str) -> Vec<String> {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = std::fs::File::open(path) else {
        return Vec::new();
    };
    let len = file.metadata().map_or(0, |m| m.len());
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(TRANSCRIPT_TAIL)));
    let mut bytes = Vec::new();
    if file.read_to_end(&mut bytes).is_err() {
        return Vec::new();
    }
    let text = String::from_utf8_lossy(&bytes);
    let mut launched = Vec::new();
    let mut reported = Vec::new();
    for line in text.lines() {
        if line.contains("async_launched")
            && let Ok(launch) = serde_json::from_str::<LaunchLine>(line)
            && launch.result.status == "async_launched"
            && !launch.result.agent_id.is_empty()
        {
            launched.push(launch.result.agent_id);
        }
        // Delivered: in a user message. (A report the session has not read yet
        // is in a `queue-operation` line.)
        let delivered = line.contains("<task-id>")
            && serde_json::from_str::<LineKind>(line).is_ok_and(|l| l.kind == "user");
        let mut rest = if delivered { line } else { "" };
        while let Some(start) = rest.find("<task-id>") {
            rest = &rest[start + "<task-id>".len()..];
            if let Some(end) = rest.find("</task-id>") {
                reported.push(rest[..end].to_owned());
            }
        }
    }
    launched.retain(|id| !reported.contains(id));
    launched
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
        // As Claude Code 2.1.332 sent it when auto mode's check was unreachable.
        let r = report(
            json!({"hook_event_name":"Notification","notification_type":"agent_needs_input",
            "message":"Auto mode can't check actions in this session and needs your choice"}),
        )
        .unwrap();
        assert_eq!(
            (r.state, r.message.as_deref()),
            (
                ReportedState::Asking,
                Some("Auto mode can't check actions in this session and needs your choice")
            )
        );
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

    // Regression (issue 36): Claude Code 2.1.332 runs subagents in the
    // background; its main turn stops meanwhile and a new one starts when they
    // are done. Idle in between was a flicker.
    #[test]
    fn a_stop_with_background_work_in_flight_is_still_working() {
        let r = report(
            json!({"hook_event_name":"Stop","last_assistant_message":"R1",
            "background_tasks":[{"id":"a3e","type":"subagent","status":"running",
                "description":"check a thing"}],"session_crons":[]}),
        )
        .unwrap();
        assert_eq!(
            (r.state, r.message.as_deref()),
            (
                ReportedState::Working,
                Some("waiting for background work: check a thing")
            )
        );
        let r = report(
            json!({"hook_event_name":"Stop","last_assistant_message":"R3",
            "background_tasks":[],"session_crons":[]}),
        )
        .unwrap();
        assert_eq!(
            (r.state, r.message.as_deref()),
            (ReportedState::Idle, Some("R3"))
        );
        let many: Vec<Value> = (0..5)
            .map(|i| json!({"type":"shell","status":"running","description":format!("t{i}")}))
            .collect();
        let r = report(json!({"hook_event_name":"Stop","background_tasks":many})).unwrap();
        assert_eq!(
            r.message.as_deref(),
            Some("waiting for background work: t0, t1, t2 and 2 more")
        );
    }

    // Regression (issue 36): a background subagent that finished before the
    // turn that started it stopped is not in that Stop's `background_tasks`;
    // the transcript shows it launched and not yet reported.
    #[test]
    fn a_stop_before_a_finished_subagent_s_report_is_still_working() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let launch = r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_1"}]},"toolUseResult":{"isAsync":true,"status":"async_launched","agentId":"adc48","description":"check a thing"}}"#;
        std::fs::write(&path, format!("{launch}\n")).unwrap();
        let stop = json!({"hook_event_name":"Stop","last_assistant_message":"main slow",
            "background_tasks":[],"transcript_path":path});
        let r = report(stop.clone()).unwrap();
        assert_eq!(
            (r.state, r.message.as_deref()),
            (
                ReportedState::Working,
                Some("waiting for background work: a subagent's report")
            )
        );
        // Queued for the session, not read yet: still waiting.
        let queued = r#"{"type":"queue-operation","operation":"enqueue","content":"<task-notification>\n<task-id>adc48</task-id>\n</task-notification>"}"#;
        std::fs::write(&path, format!("{launch}\n{queued}\n")).unwrap();
        assert_eq!(report(stop.clone()).unwrap().state, ReportedState::Working);
        let notified = r#"{"type":"user","message":{"content":"<task-notification>\n<task-id>adc48</task-id>\n<status>completed</status>\n</task-notification>"}}"#;
        std::fs::write(&path, format!("{launch}\n{queued}\n{notified}\n")).unwrap();
        let r = report(stop).unwrap();
        assert_eq!(
            (r.state, r.message.as_deref()),
            (ReportedState::Idle, Some("main slow"))
        );
    }

    #[test]
    fn a_subagent_s_events_never_make_it_idle() {
        for event in ["Stop", "StopFailure", "SessionStart", "Notification"] {
            assert!(
                report(
                    json!({"hook_event_name":event,"agent_id":"a3e","agent_type":"general-purpose",
                    "notification_type":"idle_prompt","error":"server_error"})
                )
                .is_none(),
                "{event}"
            );
        }
        let r = report(json!({"hook_event_name":"PreToolUse","agent_id":"a3e",
            "tool_name":"Bash","tool_input":{"command":"ls"}}))
        .unwrap();
        assert_eq!(r.state, ReportedState::Working);
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
