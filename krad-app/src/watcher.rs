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

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use krad_bus::protocol::{AgentRecord, AgentState, StateSource};
use krad_term::{ExitStatus, Terminal, TerminalEvent};
use tokio::sync::mpsc;

use crate::announced;
use crate::asks::AskBoard;
use crate::config::HookKind;
use crate::hosts::HostLinks;
use crate::profile::Profile;
use crate::screen_questions;
use crate::store::Store;
use crate::store::{Entry, set_state};

/// A program is taken as ready for a typed prompt after this long without output.
const READY_QUIET: Duration = Duration::from_millis(400);
/// A program that printed nothing this long after starting gets its prompt anyway.
const READY_SILENT: Duration = Duration::from_secs(3);
/// A program whose hooks say when it is ready (Claude Code's `SessionStart`) gets
/// its prompt once they did, or after this long without them.
const READY_HOOK_LIMIT: Duration = Duration::from_secs(15);

/// The process of a program with no state source is looked at this long
/// after it starts, and after its output calms.
const PROCESS_LOOK: Duration = Duration::from_secs(1);

/// A screen is read for questions this long after it changed (at most this often).
const QUESTION_CALM: Duration = Duration::from_millis(250);

/// What a terminal's watcher reaches: the records, the asks, the hosts.
#[derive(Clone)]
pub(crate) struct Watching {
    pub(crate) store: Arc<Store>,
    pub(crate) asks: Arc<AskBoard>,
    pub(crate) hosts: Arc<HostLinks>,
}

/// Runs until the terminal's program exits, with the quiet time and hooks
/// of its `profile`. `contained`: it runs in a sandbox on this machine (its refused writes are
/// told).
pub(crate) async fn run(
    app: Watching,
    contained: bool,
    id: u64,
    terminal: Arc<dyn Terminal>,
    mut events: mpsc::Receiver<TerminalEvent>,
    typed_prompt: Option<String>,
    profile: Arc<Profile>,
) {
    let (idle_after, hooks) = (profile.idle_after, profile.hooks);
    let Some(mut record_watch) = app.store.watch(id) else {
        return;
    };
    let mut watch = Watch {
        // Claude Code says through its SessionStart hook when it is up.
        ready_by_hook: hooks == HookKind::Claude,
        look_for_questions: screen_questions::known(hooks),
        question_check_at: None,
        // A program that tells no state of its own: its process tells.
        tells_nothing: hooks == HookKind::None && idle_after.is_none(),
        process_check_at: (hooks == HookKind::None && idle_after.is_none())
            .then(|| tokio::time::Instant::now() + PROCESS_LOOK),
        refusals: contained.then(Default::default),
        refusals_check_at: None,
        typing: None,
        spawned: tokio::time::Instant::now(),
        last_output: None,
        app,
        id,
        terminal,
        typed_prompt,
        idle_after,
        hooks,
    };
    loop {
        let quiet_at = watch.quiet_at();
        let type_at = watch.type_at();
        tokio::select! {
            event = events.recv() => {
                if watch.take(event).is_break() {
                    return;
                }
            }
            () = sleep_until(quiet_at) => watch.idle_if_still_quiet(),
            () = sleep_until(watch.question_check_at) => watch.read_the_screen(),
            () = sleep_until(watch.refusals_check_at) => watch.read_refusals(),
            () = sleep_until(watch.process_check_at) => watch.look_at_the_process(),
            () = sleep_until(type_at) => watch.start_typing(),
            _ = until_done(&mut watch.typing) => watch.typing_done(),
            changed = record_watch.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
    }
}

/// What the task of one terminal keeps from one event to the next.
struct Watch {
    app: Watching,
    id: u64,
    terminal: Arc<dyn Terminal>,
    hooks: HookKind,
    /// The profile's quiet time.
    idle_after: Option<Duration>,
    /// The prompt to type once the program is ready (taken when typed).
    typed_prompt: Option<String>,
    /// The program's hooks say when it is up.
    ready_by_hook: bool,
    /// Its screen has questions worth reading.
    look_for_questions: bool,
    /// When to read the screen for questions next.
    question_check_at: Option<tokio::time::Instant>,
    /// Its program tells no state of its own (no hooks, no quiet time): its
    /// process is looked at once it starts and once its output calms.
    tells_nothing: bool,
    /// When to look next at whether its process waits for input.
    process_check_at: Option<tokio::time::Instant>,
    /// In a sandbox here: the writes it refused, told so far.
    refusals: Option<crate::sandbox::refusals::Refusals>,
    /// When to read the screen for refused writes next.
    refusals_check_at: Option<tokio::time::Instant>,
    /// The task typing the prompt, while it types.
    typing: Option<tokio::task::JoinHandle<()>>,
    spawned: tokio::time::Instant,
    last_output: Option<tokio::time::Instant>,
}

impl Watch {
    /// When a working agent has been quiet for the profile's quiet time.
    fn quiet_at(&self) -> Option<tokio::time::Instant> {
        self.idle_after.and_then(|quiet| {
            self.app
                .store
                .with(self.id, |e| {
                    (e.record.state == AgentState::Working).then_some(e.last_activity + quiet)
                })
                .flatten()
                .map(tokio::time::Instant::from_std)
        })
    }

    /// When to type the prompt, if one waits.
    fn type_at(&self) -> Option<tokio::time::Instant> {
        let (hook_heard, asking) = self
            .app
            .store
            .with(self.id, |e| {
                (e.hook_heard, e.record.state == AgentState::Asking)
            })
            .unwrap_or((false, false));
        // Never type into a question (a trust dialog would take the Enter).
        self.typed_prompt.as_ref().filter(|_| !asking).map(|_| {
            if self.ready_by_hook && !hook_heard {
                return self.spawned + READY_HOOK_LIMIT;
            }
            // Even once its hook said it is up, a program that has drawn its
            // screen gets a moment of quiet first (a question may be on it).
            match self.last_output {
                Some(at) => at + READY_QUIET,
                None => self.spawned + READY_SILENT,
            }
        })
    }

    /// Takes what the terminal noticed; breaks once its program is gone.
    fn take(&mut self, event: Option<TerminalEvent>) -> ControlFlow<()> {
        match event {
            Some(TerminalEvent::Exited(status)) => self.ended(status),
            Some(event) => {
                if event == TerminalEvent::Output {
                    self.output_seen();
                }
                // What an announcement leaves unsaid is on the screen (the
                // command awaiting approval, the error); read outside the store.
                let screen = match &event {
                    TerminalEvent::AgentState(word)
                        if word.starts_with("blocked") || word.starts_with("error") =>
                    {
                        Some(self.terminal.snapshot(0).screen)
                    }
                    _ => None,
                };
                apply(&self.app, self.id, event, screen.as_deref());
                ControlFlow::Continue(())
            }
            None => {
                // The host went away without an exit: take what it knows.
                let status = self.terminal.exit_status().unwrap_or(ExitStatus {
                    code: None,
                    signal: None,
                });
                self.ended(status)
            }
        }
    }

    /// Its program ended with `status`: on record as `exited`, with what its
    /// screen said last; the watch is over.
    fn ended(&mut self, status: ExitStatus) -> ControlFlow<()> {
        let said = last_line(self.terminal.as_ref());
        exited(&self.app, self.id, status, said);
        crate::cgroup::forget(self.id);
        ControlFlow::Break(())
    }

    fn output_seen(&mut self) {
        let now = tokio::time::Instant::now();
        self.last_output = Some(now);
        if self.tells_nothing {
            // Looked at once the output calms (a prompt drawn, a command
            // echoed): no polling of a program that prints nothing.
            self.process_check_at = Some(now + PROCESS_LOOK);
        }
        // At most every QUESTION_CALM, also while output flows
        // (a spinner never lets the screen be calm).
        if self.look_for_questions {
            self.question_check_at.get_or_insert(now + QUESTION_CALM);
        }
        if self.refusals.is_some() {
            self.refusals_check_at
                .get_or_insert(now + crate::sandbox::refusals::LOOK_EVERY);
        }
    }

    /// A program with no state source of its own, once it runs: `working`,
    /// or `idle` while its terminal's foreground process waits for input
    /// (a shell at its prompt) — never `starting` for its whole life, nor
    /// `working` at a prompt. Left alone once it reports a state itself.
    fn look_at_the_process(&mut self) {
        self.process_check_at = None;
        let Some((pid, here, told)) = self.app.store.with(self.id, |e| {
            (
                e.record.pid,
                e.record.host.is_none(),
                e.hook_heard || e.reports > 0,
            )
        }) else {
            return;
        };
        if told {
            self.tells_nothing = false;
            return;
        }
        let waits = pid
            .filter(|_| here)
            .and_then(crate::foreground::waits_for_input);
        self.app.store.update(self.id, |e| {
            let record = &mut e.record;
            let next = match (record.state, waits) {
                (AgentState::Starting | AgentState::Working, Some(true)) => AgentState::Idle,
                (AgentState::Starting, _) => AgentState::Working,
                (AgentState::Idle, Some(false)) if record.state_source == StateSource::Process => {
                    AgentState::Working
                }
                _ => return false,
            };
            set_state(record, next, StateSource::Process, None)
        });
    }

    /// Tells the writes the sandbox refused that its screen shows.
    fn read_refusals(&mut self) {
        self.refusals_check_at = None;
        if let Some(refusals) = &mut self.refusals {
            let snapshot = self.terminal.snapshot(crate::sandbox::refusals::SCROLLBACK);
            refusals.look(self.id, &snapshot);
        }
    }

    /// A working agent quiet for the profile's quiet time is idle.
    fn idle_if_still_quiet(&self) {
        if let Some(quiet) = self.idle_after {
            self.app.store.update(self.id, |e| {
                e.record.state == AgentState::Working
                    && e.last_activity.elapsed() >= quiet
                    && set_state(&mut e.record, AgentState::Idle, StateSource::Quiet, None)
            });
        }
    }

    fn read_the_screen(&mut self) {
        self.question_check_at = None;
        look_at_the_question(&self.app, self.id, self.terminal.as_ref(), self.hooks);
    }

    fn start_typing(&mut self) {
        // Typed on a task of its own: meanwhile the loop keeps taking the
        // terminal's events (a full queue would drop them).
        if let Some(prompt) = self.typed_prompt.take() {
            let terminal = self.terminal.clone();
            // Claude Code's UserPromptSubmit hook says it took the prompt.
            let heard = (self.hooks == HookKind::Claude).then(|| {
                let app = self.app.clone();
                let id = self.id;
                let before = app.store.with(id, |e| e.reports).unwrap_or_default();
                move || {
                    app.store
                        .with(id, |e| e.reports)
                        .is_some_and(|r| r > before)
                }
            });
            self.typing = Some(tokio::spawn(async move {
                type_prompt(terminal.as_ref(), &prompt).await;
                // Checked aside: the prompt counts as typed now.
                if let Some(heard) = heard {
                    tokio::spawn(async move {
                        let submitted =
                            crate::input::until_submitted(terminal.as_ref(), &prompt, heard);
                        if let Err(e) = submitted.await {
                            tracing::warn!(
                                terminal = terminal.id(),
                                "could not submit the prompt: {e}"
                            );
                        }
                    });
                }
            }));
        }
    }

    fn typing_done(&mut self) {
        self.typing = None;
        self.app.store.update(self.id, |e| {
            e.prompt_pending = false;
            false
        });
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

fn apply(app: &Watching, id: u64, event: TerminalEvent, screen: Option<&str>) {
    app.store.update(id, |e| match event {
        TerminalEvent::Output => output(e),
        TerminalEvent::Bell => bell(&mut e.record),
        TerminalEvent::Notification { title, body } => notification(&mut e.record, title, body),
        TerminalEvent::Title(title) => retitle(&mut e.record, title),
        TerminalEvent::AgentState(announced) => announcement(e, &announced, screen),
        TerminalEvent::Exited(_) => false,
    });
}

/// Output ends a guess: `starting` or a quiet `idle` → `working`.
fn output(e: &mut Entry) -> bool {
    e.last_activity = Instant::now();
    let record = &mut e.record;
    let guessing = record.state == AgentState::Starting
        || (record.state == AgentState::Idle && record.state_source == StateSource::Quiet);
    guessing && set_state(record, AgentState::Working, StateSource::Screen, None)
}

/// A bell while working, unless a hook said so: → `idle`.
fn bell(record: &mut AgentRecord) -> bool {
    record.state == AgentState::Working
        && record.state_source != StateSource::Hook
        && set_state(record, AgentState::Idle, StateSource::Screen, None)
}

/// A notification, unless a hook said so: → `asking` or `idle`, with its text.
fn notification(record: &mut AgentRecord, title: Option<String>, body: String) -> bool {
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
    ) && record.state_source != StateSource::Hook
        && set_state(record, state, StateSource::Screen, Some(text))
}

fn retitle(record: &mut AgentRecord, title: String) -> bool {
    let title = (!title.is_empty()).then_some(title);
    if record.title == title {
        return false;
    }
    record.title = title;
    true
}

/// An OSC 7501 state announcement: counts as a hook.
fn announcement(e: &mut Entry, announced: &str, screen: Option<&str>) -> bool {
    e.last_activity = Instant::now();
    e.announces_state = true;
    let Some((state, mut message)) = announced::state(announced, screen.unwrap_or("")) else {
        return false;
    };
    let turn_over = announced::ends_a_turn(announced);
    let mut problem_found = false;
    if state == AgentState::Asking && e.profile.hooks == HookKind::Codex && e.permission_asks == 0 {
        // Codex shows its dialog once its hooks are done: had krad's hook run,
        // it would have raised an ask first.
        message = message.map(|m| announced::unhooked(&m));
        if e.record.hook_problem.is_none() {
            tracing::warn!(
                terminal = e.record.terminal,
                "Codex asks for an approval that krad's PermissionRequest hook never saw: \
                 its hooks did not run (not trusted?)"
            );
            e.record.hook_problem = Some(announced::CODEX_HOOK_SKIPPED.to_owned());
            problem_found = true;
        }
    }
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
        // A new turn: what the last one said is no longer news (but a report
        // of this very turn may have come ahead of it).
        AgentState::Working => {
            e.pending_message = None;
            e.turn_end_unreported = false;
        }
        // The turn's reply, if its report came before the announcement.
        AgentState::Idle => {
            let pending = e.pending_message.take();
            if turn_over {
                let ahead = e.reported_ahead.take();
                if message.is_none() {
                    message = pending.or(ahead);
                }
                // Its report is still to come (a failed turn has its message).
                e.turn_end_unreported = message.is_none();
            } else if message.is_none() {
                message = pending;
            }
        }
        _ => {}
    }
    let changed = e.record.state != AgentState::Exited
        && set_state(&mut e.record, state, StateSource::Hook, message);
    changed || problem_found
}

/// Reads the screen for what no hook tells:
/// * a question (a login, a trust dialog) makes the agent `asking` (`screen`);
///   once it is gone, the agent is back in the state it was in before
///   (`working` if it was starting);
/// * the agent's own permission dialog, while it asks: once the dialog is gone
///   the question is over — `idle` if the user declined it (Claude Code says
///   nothing then), else `working` — and its open asks are decided by `program`.
fn look_at_the_question(app: &Watching, id: u64, terminal: &dyn Terminal, hooks: HookKind) {
    let screen = terminal.snapshot(0).screen;
    let question = screen_questions::find(hooks, &screen);
    let dialog = screen_questions::permission_dialog(hooks, &screen);
    let declined = screen_questions::declined(hooks, &screen);
    let mut dialog_gone = false;
    let ask_open = app.asks.has_open(id);
    let error = (hooks == HookKind::Codex)
        .then(|| announced::codex_error(&screen))
        .flatten();
    app.store.update(id, |e| {
        if e.record.state != AgentState::Asking {
            e.dialog_seen = false;
        }
        // The announcement may come before the error is drawn.
        if e.record.state == AgentState::Idle
            && e.record.message.as_deref() == Some(announced::ERROR)
            && let Some(error) = error
        {
            let source = e.record.state_source;
            let message = format!("{}: {error}", announced::ERROR);
            return set_state(&mut e.record, AgentState::Idle, source, Some(message));
        }
        match (question, e.screen_question) {
            (_, _) if e.record.state == AgentState::Exited => false,
            (Some(message), before) => question_shown(e, message, before.is_none(), ask_open),
            (None, Some(before)) => question_gone(e, before),
            (None, None) if e.record.state == AgentState::Asking => {
                if dialog {
                    return dialog_shown(e, &screen);
                }
                if e.announces_state || (!e.dialog_seen && !declined) {
                    // Its announcements tell when the dialog is gone; or it is not
                    // drawn yet, or went before it was seen: the hooks tell.
                    return false;
                }
                e.dialog_seen = false;
                dialog_gone = true;
                dialog_went(&mut e.record, declined)
            }
            (None, None) => false,
        }
    });
    if dialog_gone {
        let decided = app.asks.decide_all_by_program(id);
        tracing::debug!(terminal = id, decided, "the permission dialog is gone");
    }
}

/// A question on the screen: `asking`, the state before kept (when `first`).
fn question_shown(e: &mut Entry, message: &str, first: bool, ask_open: bool) -> bool {
    let record = &mut e.record;
    // A hook's own question on the bus (a permission) outranks the screen; a
    // hook's word that it needs input (Claude Code's `agent_needs_input`) is
    // this question: the screen tells when it is gone.
    if record.state == AgentState::Asking && record.state_source == StateSource::Hook && ask_open {
        return false;
    }
    if first {
        e.screen_question = Some((record.state, record.state_source));
    }
    set_state(
        record,
        AgentState::Asking,
        StateSource::Screen,
        Some(message.to_owned()),
    )
}

/// The screen's question is gone: back to the state before it.
fn question_gone(e: &mut Entry, (state, source): (AgentState, StateSource)) -> bool {
    e.screen_question = None;
    let record = &mut e.record;
    if record.state != AgentState::Asking || record.state_source != StateSource::Screen {
        return false;
    }
    let (state, source) = match state {
        AgentState::Starting | AgentState::Asking => (AgentState::Working, StateSource::Screen),
        other => (other, source),
    };
    // What was said meanwhile belongs to that state (an idle's reply).
    let pending = e.pending_message.take();
    let message = pending.filter(|_| state == AgentState::Idle);
    set_state(record, state, source, message)
}

/// The agent's permission dialog is on the screen while it asks.
fn dialog_shown(e: &mut Entry, screen: &str) -> bool {
    e.dialog_seen = true;
    let record = &mut e.record;
    // The announcement may come before the dialog is drawn.
    let unhooked = announced::unhooked(announced::NEEDS_APPROVAL);
    let waiting = record.message.as_deref() == Some(announced::NEEDS_APPROVAL);
    if (waiting || record.message.as_deref() == Some(unhooked.as_str()))
        && let Some(command) = announced::pending_command(screen)
    {
        let mut message = announced::approval(command);
        if !waiting {
            message = announced::unhooked(&message);
        }
        let source = record.state_source;
        return set_state(record, AgentState::Asking, source, Some(message));
    }
    false
}

/// The permission dialog seen is gone: `idle` if declined, else `working`.
fn dialog_went(record: &mut AgentRecord, declined: bool) -> bool {
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

/// The longest screen line an exit's message carries.
const LAST_LINE: usize = 200;

/// The last line of the terminal's screen that says something (not blank),
/// cut to [`LAST_LINE`] characters: what a program that failed said last.
fn last_line(terminal: &dyn Terminal) -> Option<String> {
    let screen = terminal.snapshot(0).screen;
    let line = screen.lines().map(str::trim).rfind(|l| !l.is_empty())?;
    Some(line.chars().take(LAST_LINE).collect())
}

/// Terminal `id` exited with `status`; `said`, the last line of its screen,
/// ends the message of a program that failed or was killed.
fn exited(app: &Watching, id: u64, status: ExitStatus, said: Option<String>) {
    let token_file = app.store.with(id, |e| e.token_file.clone()).flatten();
    // A host terminal in tmux there: tmux there told its status (its own 255
    // included); none, when its pane was gone (the host lost it).
    let in_host_tmux = app
        .store
        .with(id, |e| {
            e.record
                .host
                .as_deref()
                .and_then(|name| app.hosts.get(name).ok())
                .is_some_and(|host| host.tmux_terminals().is_some())
        })
        .unwrap_or(false);
    app.store.update(id, |e| {
        e.record.exit_code = status.code;
        e.record.signal = status.signal;
        // On a host without tmux the terminal is `ssh -tt`: 255 is ssh saying
        // the link is gone.
        let message = match (&e.record.host, status.code, status.signal) {
            (Some(host), None, None) if in_host_tmux => format!(
                "the program on host {host} is gone: tmux there lost it without an exit status \
                 (was the host restarted, or its tmux server killed?)"
            ),
            (Some(_), Some(code), _) if in_host_tmux => format!("exited with code {code}"),
            (Some(host), Some(255), _) => format!(
                "the SSH link to host {host} is gone (ssh exited 255); the program there may still run"
            ),
            (_, Some(0), _) => "exited with code 0".to_owned(),
            (_, Some(code), _) => with_said(format!("exited with code {code}"), said),
            (_, None, Some(signal)) => with_said(format!("ended by signal {signal}"), said),
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

/// `how` it ended, then what its screen said last, if anything.
fn with_said(how: String, said: Option<String>) -> String {
    match said {
        Some(said) => format!("{how}: {said}"),
        None => how,
    }
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
