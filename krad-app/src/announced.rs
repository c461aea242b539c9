//! What a program's OSC 7501 announcements mean (Codex CLI writes them:
//! `state=working`, `blocked:app=codex:kind=permission`, `done`, `idle`,
//! `error`), and what the screen adds to them that they leave unsaid: the
//! command an approval is for, the error a turn ended with.

use krad_bus::protocol::AgentState;

/// The state (and message) an OSC 7501 announcement stands for (Codex writes
/// `working`, `blocked:app=codex:kind=permission`, `done`, `idle`, `error`);
/// `None` for one that says nothing about the turn (`clear`, unknown words).
/// `screen` supplies what the announcement leaves unsaid.
pub(crate) fn state(announced: &str, screen: &str) -> Option<(AgentState, Option<String>)> {
    let word = announced.split([':', ';']).next().unwrap_or_default();
    match word {
        "working" => Some((AgentState::Working, None)),
        "done" | "idle" => Some((AgentState::Idle, None)),
        "error" => {
            let error = codex_error(screen)
                .map_or_else(|| ERROR.to_owned(), |line| format!("{ERROR}: {line}"));
            Some((AgentState::Idle, Some(error)))
        }
        "blocked" => {
            let kind = announced
                .split([':', ';'])
                .find_map(|part| part.strip_prefix("kind="))
                .unwrap_or("input");
            let message = match kind {
                "permission" => match pending_command(screen) {
                    Some(command) => approval(command),
                    None => NEEDS_APPROVAL.to_owned(),
                },
                other => format!("needs you: {other}"),
            };
            Some((AgentState::Asking, Some(message)))
        }
        _ => None,
    }
}

/// Whether the announcement ends a turn (`done`, `error`) — unlike `idle`, which
/// Codex also says while it starts up.
pub(crate) fn ends_a_turn(announced: &str) -> bool {
    matches!(announced.split([':', ';']).next(), Some("done" | "error"))
}

/// An error's message until the error is on screen.
pub(crate) const ERROR: &str = "error";

/// The error of Codex's last turn: a `■ …` line after the turn's prompt (the
/// `› …` line before it; the last `›` line is the input box).
pub(crate) fn codex_error(screen: &str) -> Option<&str> {
    let mut prompts = 0;
    for line in screen.lines().rev() {
        let line = line.trim_start();
        if line.starts_with('›') {
            prompts += 1;
            if prompts > 1 {
                return None;
            }
        } else if let Some(error) = line.strip_prefix('■') {
            return Some(error.trim()).filter(|e| !e.is_empty());
        }
    }
    None
}

/// An approval's message until the command it is for is on screen.
pub(crate) const NEEDS_APPROVAL: &str = "needs your approval";

/// The last screen line that starts with `mark` (after blanks), without it.
fn last_line_starting<'a>(screen: &'a str, mark: &str) -> Option<&'a str> {
    screen
        .lines()
        .rev()
        .find_map(|line| line.trim_start().strip_prefix(mark))
        .map(str::trim)
        .filter(|line| !line.is_empty())
}

/// The command Codex's approval dialog shows (`$ touch made.txt` under "Would
/// you like to run the following command?").
pub(crate) fn pending_command(screen: &str) -> Option<&str> {
    let (_, dialog) = screen.rsplit_once("Would you like to run the following command?")?;
    last_line_starting(dialog, "$ ")
}

/// An approval's message once its command is known.
pub(crate) fn approval(command: &str) -> String {
    format!("{NEEDS_APPROVAL} to run: {command}")
}

/// What an approval's message adds when krad's `PermissionRequest` hook did not
/// run for it (Codex skips a hook it does not trust, without a word): the
/// approval is not on the bus, only in the agent's terminal.
pub(crate) const HOOK_DID_NOT_RUN: &str =
    " (krad's approval hook did not run: answer in its terminal)";

/// The record's `hook_problem` once a Codex approval showed that krad's hook
/// never saw.
pub(crate) const CODEX_HOOK_SKIPPED: &str = "Codex showed an approval dialog that krad's \
     PermissionRequest hook never saw: Codex skipped krad's hooks (not trusted), so its \
     approvals are not asks; answer them in its terminal (krad attach), and start it again \
     with the codex profile and no `-c hooks.…` override";

/// `message` with [`HOOK_DID_NOT_RUN`], once.
pub(crate) fn unhooked(message: &str) -> String {
    if message.ends_with(HOOK_DID_NOT_RUN) {
        message.to_owned()
    } else {
        format!("{message}{HOOK_DID_NOT_RUN}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announced_states() {
        assert_eq!(
            state("working:app=codex", ""),
            Some((AgentState::Working, None))
        );
        assert_eq!(state("done", ""), Some((AgentState::Idle, None)));
        assert_eq!(state("idle", ""), Some((AgentState::Idle, None)));
        let dialog = "› make a file\n• Running touch made.txt\n  Would you like to run the following command?\n  Reason: x\n  $ touch made.txt\n› 1. Yes, proceed (y)";
        assert_eq!(
            state("blocked:app=codex:kind=permission", dialog),
            Some((
                AgentState::Asking,
                Some("needs your approval to run: touch made.txt".into())
            ))
        );
        assert_eq!(
            state("blocked:app=codex:kind=permission", ""),
            Some((AgentState::Asking, Some("needs your approval".into())))
        );
        assert_eq!(
            codex_error("› one\n■ old error\n› two\n• fine\n› Ask Codex"),
            None,
            "an older turn's error"
        );
        let error = "› fail please\n■ {\"error\":{\"message\":\"bad things\"}}\n› Ask Codex";
        assert_eq!(
            state("error:app=codex", error),
            Some((
                AgentState::Idle,
                Some("error: {\"error\":{\"message\":\"bad things\"}}".into())
            ))
        );
        assert_eq!(state("clear", ""), None);
        assert_eq!(state("", ""), None);
    }
}
