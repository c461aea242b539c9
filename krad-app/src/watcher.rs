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
//! * an OSC 7501 state announcement (Codex CLI writes them) counts as a hook:
//!   `working` → `working`, `blocked:…` → `asking`, `done`/`idle` → `idle`; from
//!   the first one on, the program's Reports bring messages but not states;
//! * exit: → `exited` (`process`) with the code or signal; final.

use std::sync::Arc;
use std::time::{Duration, Instant};

use krad_bus::protocol::{AgentState, StateSource};
use krad_term::{ExitStatus, Terminal, TerminalEvent};
use tokio::sync::mpsc;

use crate::Core;
use crate::announced;
use crate::config::HookKind;
use crate::screen_questions;
use crate::store::set_state;

/// A program is taken as ready for a typed prompt after this long without output.
const READY_QUIET: Duration = Duration::from_millis(400);
/// A program that printed nothing this long after starting gets its prompt anyway.
const READY_SILENT: Duration = Duration::from_secs(3);
/// A program whose hooks say when it is ready (Claude Code's `SessionStart`) gets
/// its prompt once they did, or after this long without them.
const READY_HOOK_LIMIT: Duration = Duration::from_secs(15);

/// A screen is read for questions this long after it changed (at most this often).
const QUESTION_CALM: Duration = Duration::from_millis(250);

/// Runs until the terminal's program exits.
pub(crate) async fn run(
    core: Arc<Core>,
    id: u64,
    terminal: Arc<dyn Terminal>,
    mut events: mpsc::Receiver<TerminalEvent>,
    mut typed_prompt: Option<String>,
    idle_after: Option<Duration>,
    hooks: HookKind,
) {
    // Claude Code says through its SessionStart hook when it is up.
    let ready_by_hook = hooks == HookKind::Claude;
    let look_for_questions = screen_questions::known(hooks);
    let mut question_check_at: Option<tokio::time::Instant> = None;
    let mut typing: Option<tokio::task::JoinHandle<()>> = None;
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
        let (hook_heard, asking) = store
            .with(id, |e| (e.hook_heard, e.record.state == AgentState::Asking))
            .unwrap_or((false, false));
        // Never type into a question (a trust dialog would take the Enter).
        let type_at = typed_prompt.as_ref().filter(|_| !asking).map(|_| {
            if ready_by_hook && !hook_heard {
                return spawned + READY_HOOK_LIMIT;
            }
            // Even once its hook said it is up, a program that has drawn its
            // screen gets a moment of quiet first (a question may be on it).
            match last_output {
                Some(at) => at + READY_QUIET,
                None => spawned + READY_SILENT,
            }
        });
        tokio::select! {
            event = events.recv() => match event {
                Some(TerminalEvent::Exited(status)) => {
                    exited(&core, id, status);
                    return;
                }
                Some(event) => {
                    if event == TerminalEvent::Output {
                        let now = tokio::time::Instant::now();
                        last_output = Some(now);
                        // At most every QUESTION_CALM, also while output flows
                        // (a spinner never lets the screen be calm).
                        if look_for_questions {
                            question_check_at.get_or_insert(now + QUESTION_CALM);
                        }
                    }
                    // What an announcement leaves unsaid is on the screen (the
                    // command awaiting approval, the error); read outside the store.
                    let screen = match &event {
                        TerminalEvent::AgentState(word)
                            if word.starts_with("blocked") || word.starts_with("error") =>
                        {
                            Some(terminal.snapshot(0).screen)
                        }
                        _ => None,
                    };
                    apply(&core, id, event, screen.as_deref());
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
            () = sleep_until(question_check_at) => {
                question_check_at = None;
                look_at_the_question(&core, id, terminal.as_ref(), hooks);
            }
            () = sleep_until(type_at) => {
                // Typed on a task of its own: meanwhile this loop keeps taking the
                // terminal's events (a full queue would drop them).
                if let Some(prompt) = typed_prompt.take() {
                    let terminal = terminal.clone();
                    typing = Some(tokio::spawn(async move {
                        type_prompt(terminal.as_ref(), &prompt).await;
                    }));
                }
            }
            _ = until_done(&mut typing) => {
                typing = None;
                store.update(id, |e| {
                    e.prompt_pending = false;
                    false
                });
            }
            changed = record_watch.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
    }
}

/// Waits for the typing task, if there is one (else never returns).
async fn until_done(typing: &mut Option<tokio::task::JoinHandle<()>>) {
    match typing {
        Some(task) => {
            let _ = task.await;
        }
        None => std::future::pending().await,
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn apply(core: &Core, id: u64, event: TerminalEvent, screen: Option<&str>) {
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
            TerminalEvent::AgentState(announced) => {
                e.last_activity = Instant::now();
                e.announces_state = true;
                let Some((state, mut message)) = announced::state(&announced, screen.unwrap_or(""))
                else {
                    return false;
                };
                let turn_over = announced::ends_a_turn(&announced);
                if e.first_turn_pending {
                    if turn_over || state == AgentState::Asking {
                        e.first_turn_pending = false;
                    } else if state == AgentState::Idle {
                        // Up, and about to take the prompt it was started with.
                        return false;
                    }
                }
                if let Some(before) = &mut e.screen_question
                    && state != AgentState::Asking
                {
                    // A question is on the screen: the announced state is the
                    // state once it is gone.
                    *before = (state, StateSource::Hook);
                    if message.is_some() {
                        e.pending_message = message;
                    }
                    return false;
                }
                match state {
                    // A new turn: what the last one said is no longer news.
                    AgentState::Working => e.pending_message = None,
                    // The turn's reply, if its report came before the announcement.
                    AgentState::Idle if message.is_none() => message = e.pending_message.take(),
                    _ => {}
                }
                record.state != AgentState::Exited
                    && set_state(record, state, StateSource::Hook, message)
            }
            TerminalEvent::Exited(_) => false,
        }
    });
}

/// Reads the screen for what no hook tells:
/// * a question (a login, a trust dialog) makes the agent `asking` (`screen`);
///   once it is gone, the agent is back in the state it was in before
///   (`working` if it was starting);
/// * the agent's own permission dialog, while it asks: once the dialog is gone
///   the question is over — `idle` if the user declined it (Claude Code says
///   nothing then), else `working` — and its open asks are decided by `program`.
fn look_at_the_question(core: &Core, id: u64, terminal: &dyn Terminal, hooks: HookKind) {
    let screen = terminal.snapshot(0).screen;
    let question = screen_questions::find(hooks, &screen);
    let dialog = screen_questions::permission_dialog(hooks, &screen);
    let declined = screen_questions::declined(hooks, &screen);
    let mut dialog_gone = false;
    let error = (hooks == HookKind::Codex)
        .then(|| announced::codex_error(&screen))
        .flatten();
    core.store.update(id, |e| {
        let record = &mut e.record;
        if record.state != AgentState::Asking {
            e.dialog_seen = false;
        }
        // The announcement may come before the error is drawn.
        if record.state == AgentState::Idle
            && record.message.as_deref() == Some(announced::ERROR)
            && let Some(error) = error
        {
            let source = record.state_source;
            return set_state(
                record,
                AgentState::Idle,
                source,
                Some(format!("{}: {error}", announced::ERROR)),
            );
        }
        match (question, e.screen_question) {
            (_, _) if record.state == AgentState::Exited => false,
            (Some(message), before) => {
                // A hook's own question (a permission) outranks the screen.
                if record.state == AgentState::Asking && record.state_source == StateSource::Hook {
                    return false;
                }
                if before.is_none() {
                    e.screen_question = Some((record.state, record.state_source));
                }
                set_state(
                    record,
                    AgentState::Asking,
                    StateSource::Screen,
                    Some(message.to_owned()),
                )
            }
            (None, Some((state, source))) => {
                e.screen_question = None;
                if record.state != AgentState::Asking || record.state_source != StateSource::Screen
                {
                    return false;
                }
                let (state, source) = match state {
                    AgentState::Starting | AgentState::Asking => {
                        (AgentState::Working, StateSource::Screen)
                    }
                    other => (other, source),
                };
                // What was said meanwhile belongs to that state (an idle's reply).
                let pending = e.pending_message.take();
                let message = pending.filter(|_| state == AgentState::Idle);
                set_state(record, state, source, message)
            }
            (None, None) if record.state == AgentState::Asking => {
                if dialog {
                    e.dialog_seen = true;
                    // The announcement may come before the dialog is drawn.
                    if record.message.as_deref() == Some(announced::NEEDS_APPROVAL)
                        && let Some(command) = announced::pending_command(&screen)
                    {
                        let message = announced::approval(command);
                        return set_state(
                            record,
                            AgentState::Asking,
                            record.state_source,
                            Some(message),
                        );
                    }
                    return false;
                }
                if e.announces_state || (!e.dialog_seen && !declined) {
                    // Its announcements tell when the dialog is gone; or it is not
                    // drawn yet, or went before it was seen: the hooks tell.
                    return false;
                }
                e.dialog_seen = false;
                dialog_gone = true;
                if declined {
                    set_state(
                        record,
                        AgentState::Idle,
                        StateSource::Screen,
                        Some("declined: the turn stopped at the permission dialog".to_owned()),
                    )
                } else {
                    set_state(record, AgentState::Working, StateSource::Screen, None)
                }
            }
            (None, None) => false,
        }
    });
    if dialog_gone {
        let decided = core.asks.decide_all_by_program(id);
        tracing::debug!(terminal = id, decided, "the permission dialog is gone");
    }
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
        let message = match (&e.record.host, status.code, status.signal) {
            (Some(host), Some(255), _) => format!(
                "the SSH link to host {host} is gone (ssh exited 255); the program there may still run"
            ),
            (_, Some(code), _) => format!("exited with code {code}"),
            (_, None, Some(signal)) => format!("ended by signal {signal}"),
            (_, None, None) => "ended".to_owned(),
        };
        set_state(
            &mut e.record,
            AgentState::Exited,
            StateSource::Process,
            Some(message),
        );
        true
    });
    if let Some(path) = token_file {
        let _ = std::fs::remove_file(path);
    }
    tracing::info!(terminal = id, code = ?status.code, signal = ?status.signal, "exited");
}

/// Types a prompt and presses Enter (as a write of its own, once the prompt is
/// taken).
pub(crate) async fn type_prompt(terminal: &dyn Terminal, prompt: &str) {
    let typed = crate::input::type_into(terminal, prompt, true, &[]);
    match tokio::time::timeout(Duration::from_secs(10), typed).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(terminal = terminal.id(), "could not type the prompt: {e}"),
        Err(_) => tracing::warn!(terminal = terminal.id(), "typing the prompt timed out"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
