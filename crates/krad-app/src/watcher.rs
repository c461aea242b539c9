//! One task per terminal: turns what the terminal noticed (output, bell,
//! notifications, title, exit) and the passing of time (the profile's quiet time,
//! the moment to type a prompt) into agent states.
//!
//! The rules, in one place:
//! * first output: `starting` → `working` (`screen`); output also ends a quiet guess
//!   (`idle` from `quiet` → `working`), but never overrides what a hook said;
//! * a bell while working, unless a hook said so: → `idle` (`screen`);
//! * an OSC 9/777 notification, unless a hook said so: → `asking` when it reads
//!   like a question or a permission, else `idle` (`screen`), with its text;
//! * working with no output nor report for the profile's `idle_after`: → `idle`
//!   (`quiet`), whatever the source — hooks can miss a turn's end;
//! * exit: → `exited` (`process`) with the code or signal; final.

use std::sync::Arc;
use std::time::{Duration, Instant};

use krad_bus::protocol::{AgentState, StateSource};
use krad_term::{ExitStatus, Terminal, TerminalEvent};
use tokio::sync::mpsc;

use crate::Core;
use crate::store::set_state;

/// A program is taken as ready for a typed prompt after this long without output.
const READY_QUIET: Duration = Duration::from_millis(400);
/// A program that printed nothing this long after starting gets its prompt anyway.
const READY_SILENT: Duration = Duration::from_secs(3);

/// Runs until the terminal's program exits.
pub(crate) async fn run(
    core: Arc<Core>,
    id: u64,
    terminal: Arc<dyn Terminal>,
    mut events: mpsc::Receiver<TerminalEvent>,
    mut typed_prompt: Option<String>,
    idle_after: Option<Duration>,
) {
    let store = &core.store;
    let Some(mut record_watch) = store.watch(id) else {
        return;
    };
    let spawned = tokio::time::Instant::now();
    let mut last_output: Option<tokio::time::Instant> = None;
    loop {
        let quiet_at = idle_after.and_then(|quiet| {
            store
                .with(id, |e| {
                    (e.record.state == AgentState::Working).then_some(e.last_activity + quiet)
                })
                .flatten()
                .map(tokio::time::Instant::from_std)
        });
        let type_at = typed_prompt.as_ref().map(|_| match last_output {
            Some(at) => at + READY_QUIET,
            None => spawned + READY_SILENT,
        });
        tokio::select! {
            event = events.recv() => match event {
                Some(TerminalEvent::Exited(status)) => {
                    exited(&core, id, status);
                    return;
                }
                Some(event) => {
                    if event == TerminalEvent::Output {
                        last_output = Some(tokio::time::Instant::now());
                    }
                    apply(&core, id, event);
                }
                None => {
                    // The host went away without an exit: take what it knows.
                    let status = terminal.exit_status().unwrap_or(ExitStatus { code: None, signal: None });
                    exited(&core, id, status);
                    return;
                }
            },
            () = sleep_until(quiet_at) => {
                if let Some(quiet) = idle_after {
                    store.update(id, |e| {
                        e.record.state == AgentState::Working
                            && e.last_activity.elapsed() >= quiet
                            && set_state(&mut e.record, AgentState::Idle, StateSource::Quiet, None)
                    });
                }
            }
            () = sleep_until(type_at) => {
                if let Some(prompt) = typed_prompt.take() {
                    type_prompt(terminal.as_ref(), &prompt).await;
                }
            }
            changed = record_watch.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn apply(core: &Core, id: u64, event: TerminalEvent) {
    core.store.update(id, |e| {
        let record = &mut e.record;
        let hooked = record.state_source == StateSource::Hook;
        match event {
            TerminalEvent::Output => {
                e.last_activity = Instant::now();
                let guessing = record.state == AgentState::Starting
                    || (record.state == AgentState::Idle
                        && record.state_source == StateSource::Quiet);
                guessing && set_state(record, AgentState::Working, StateSource::Screen, None)
            }
            TerminalEvent::Bell => {
                record.state == AgentState::Working
                    && !hooked
                    && set_state(record, AgentState::Idle, StateSource::Screen, None)
            }
            TerminalEvent::Notification { title, body } => {
                let text = match title {
                    Some(title) if !title.is_empty() => format!("{title}: {body}"),
                    _ => body,
                };
                let state = if looks_like_a_question(&text) {
                    AgentState::Asking
                } else {
                    AgentState::Idle
                };
                matches!(
                    record.state,
                    AgentState::Working | AgentState::Idle | AgentState::Starting
                ) && !hooked
                    && set_state(record, state, StateSource::Screen, Some(text))
            }
            TerminalEvent::Title(title) => {
                let title = (!title.is_empty()).then_some(title);
                if record.title == title {
                    return false;
                }
                record.title = title;
                true
            }
            TerminalEvent::Exited(_) => false,
        }
    });
}

/// Whether a notification asks something of the user.
fn looks_like_a_question(text: &str) -> bool {
    let lower = text.to_lowercase();
    [
        "permission",
        "approv",
        "confirm",
        "allow",
        "needs your",
        "waiting for your",
    ]
    .iter()
    .any(|w| lower.contains(w))
        || lower.trim_end().ends_with('?')
}

fn exited(core: &Core, id: u64, status: ExitStatus) {
    let token_file = core.store.with(id, |e| e.token_file.clone()).flatten();
    core.store.update(id, |e| {
        e.record.exit_code = status.code;
        e.record.signal = status.signal;
        // On a host the terminal is `ssh -tt`: 255 is ssh saying the link is gone.
        let link_gone = match (&e.record.host, status.code) {
            (Some(host), Some(255)) => Some(format!(
                "the SSH link to host {host} is gone (ssh exited 255); the program there may still run"
            )),
            _ => None,
        };
        set_state(
            &mut e.record,
            AgentState::Exited,
            StateSource::Process,
            link_gone,
        );
        true
    });
    if let Some(path) = token_file {
        let _ = std::fs::remove_file(path);
    }
    tracing::info!(terminal = id, code = ?status.code, signal = ?status.signal, "exited");
}

/// Types a prompt and presses Enter, as a bracketed paste when the program asked
/// for one.
pub(crate) async fn type_prompt(terminal: &dyn Terminal, prompt: &str) {
    let bytes = keystrokes(prompt, true, terminal.bracketed_paste());
    match tokio::time::timeout(Duration::from_secs(10), terminal.write(bytes)).await {
        Ok(Ok(Ok(()))) => {}
        other => tracing::warn!(
            terminal = terminal.id(),
            "could not type the prompt: {other:?}"
        ),
    }
}

/// The bytes that type `text` (and Enter): wrapped in bracketed-paste markers
/// when the program turned bracketed paste on, so several lines arrive as one.
pub(crate) fn keystrokes(text: &str, enter: bool, bracketed: bool) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(text.len() + 16);
    if bracketed && !text.is_empty() {
        bytes.extend_from_slice(b"\x1b[200~");
        // A paste-end marker inside the text would end the paste early.
        bytes.extend_from_slice(text.replace("\x1b[201~", "").as_bytes());
        bytes.extend_from_slice(b"\x1b[201~");
    } else {
        bytes.extend_from_slice(text.as_bytes());
    }
    if enter {
        bytes.push(b'\r');
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keystrokes_wrap_pastes() {
        assert_eq!(keystrokes("a\nb", true, true), b"\x1b[200~a\nb\x1b[201~\r");
        assert_eq!(keystrokes("ls", true, false), b"ls\r");
        assert_eq!(keystrokes("x", false, false), b"x");
        assert_eq!(
            keystrokes("a\x1b[201~b", false, true),
            b"\x1b[200~ab\x1b[201~"
        );
    }

    #[test]
    fn questions() {
        assert!(looks_like_a_question(
            "Claude needs your permission to use Bash"
        ));
        assert!(looks_like_a_question("Approval requested: rm -rf build"));
        assert!(looks_like_a_question("Proceed?"));
        assert!(!looks_like_a_question("Agent turn complete"));
    }
}
