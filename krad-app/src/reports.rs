//! A terminal's reports of what its agent is doing (Report, which its hooks
//! send), taken into its record: the state and its source, the message, the
//! title, the session — weighed against what the terminal already says of
//! itself (a question on its screen, a prompt about to be typed, OSC 7501
//! announcements, an open ask).

use krad_bus::protocol::{AgentState, ApiError, ErrorCode, StateSource};
use krad_bus::request::report::Report;

use crate::asks::AskBoard;
use crate::feed::Feed;
use crate::records::no_terminal;
use crate::store::{Entry, Store, set_state};

/// Takes terminal `id`'s report; `conflict` once the terminal has exited.
pub(crate) fn take(
    asks: &AskBoard,
    store: &Store,
    feed: &Feed,
    id: u64,
    request: &Report,
) -> Result<(), ApiError> {
    let state: AgentState = request.state.into();
    decide_moot_asks(asks, id, state);
    let asking_through_bus = state == AgentState::Asking && asks.has_open(id);
    let mut exited = false;
    let updated = store.update(id, |e| {
        if e.record.state == AgentState::Exited {
            exited = true;
            return false;
        }
        take_report(e, state, request, asking_through_bus)
    });
    if updated.is_some()
        && !exited
        && let Some(session) = &request.session
    {
        feed.session(id, session);
    }
    match updated {
        None => Err(no_terminal(id)),
        Some(_) if exited => Err(ApiError::new(
            ErrorCode::Conflict,
            format!("terminal {id} has exited"),
        )
        .with_detail(serde_json::json!({ "terminal": id }))),
        Some(_) => Ok(()),
    }
}

/// An agent that reports it works or is idle went on: the questions it asked
/// through the bus are moot (answered in its own terminal, or dropped).
fn decide_moot_asks(asks: &AskBoard, id: u64, state: AgentState) {
    let moves_on = matches!(state, AgentState::Working | AgentState::Idle);
    if moves_on && asks.has_open(id) {
        let decided = asks.decide_all_by_program(id);
        tracing::debug!(
            terminal = id,
            decided,
            "asks decided by the agent moving on"
        );
    }
}

/// Takes a report into a live terminal's entry; whether its record changed.
fn take_report(
    e: &mut Entry,
    state: AgentState,
    request: &Report,
    asking_through_bus: bool,
) -> bool {
    e.last_activity = std::time::Instant::now();
    e.hook_heard = true;
    e.reports += 1;
    if state == AgentState::Idle && !e.prompt_pending {
        // A turn ended: the one the command line started, if any.
        e.first_turn_pending = false;
    }
    if let Some(path) = request.transcript.as_deref().map(std::path::PathBuf::from)
        && crate::spend::acceptable(&path)
        && !e.transcripts.contains(&path)
    {
        e.transcripts.push(path);
    }
    let mut changed = reported_state(e, state, request, asking_through_bus);
    if let Some(title) = &request.title
        && e.record.title.as_ref() != Some(title)
    {
        e.record.title = Some(title.clone());
        changed = true;
    }
    changed
}

/// What the reported state and message do to the record.
fn reported_state(
    e: &mut Entry,
    state: AgentState,
    request: &Report,
    asking_through_bus: bool,
) -> bool {
    if let Some(before) = &mut e.screen_question
        && state != AgentState::Asking
    {
        // A question is on the screen (a trust dialog): it stays the state;
        // what the hook says is the state once the question is gone.
        if !(e.prompt_pending && state == AgentState::Idle) {
            *before = (state, StateSource::Hook);
        }
        if request.message.is_some() {
            e.pending_message = request.message.clone();
        }
        false
    } else if e.prompt_pending && state == AgentState::Idle {
        // Up, with its prompt about to be typed: not idle, but heard.
        let current = e.record.state;
        set_state(&mut e.record, current, StateSource::Hook, None)
    } else if e.announces_state {
        // The program's own announcements (OSC 7501) decide its state; a
        // report only brings the message of the state it is in.
        message_only(e, state, request.message.as_ref())
    } else if asking_through_bus {
        // The open ask's card names the tool and its input: better than the
        // agent's generic "needs your permission".
        set_state(&mut e.record, state, StateSource::Hook, None)
    } else {
        set_state(
            &mut e.record,
            state,
            StateSource::Hook,
            request.message.clone(),
        )
    }
}

/// A report's message, for an agent that announces its own state: the state's
/// message when it is in that state, else kept for the announcement to come.
///
/// An idle report while idle is the message of the turn whose `done` came
/// without one; with no such turn, it is a turn's that the announcements have
/// not reached yet (Codex's core ahead of its screen): shown now, and kept for
/// that turn's `done` ([`Entry::reported_ahead`]).
fn message_only(e: &mut Entry, state: AgentState, message: Option<&String>) -> bool {
    let source = e.record.state_source;
    match message {
        Some(message) if e.record.state == state => {
            let awaited = std::mem::take(&mut e.turn_end_unreported);
            if state == AgentState::Idle && !awaited && e.record.message.as_ref() != Some(message) {
                e.reported_ahead = Some(message.clone());
            }
            set_state(&mut e.record, state, source, Some(message.clone()))
        }
        // Ahead of the announcement: kept for it.
        Some(message) => {
            e.pending_message = Some(message.clone());
            false
        }
        None => false,
    }
}
