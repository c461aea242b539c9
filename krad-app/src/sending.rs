//! Sending (Send) text and keys to a terminal: once its agent is idle when
//! asked, as an intent under a request id, and what the keystrokes do to an
//! asking agent's state. Typing itself is [`crate::input`].

use krad_bus::protocol::keys::Key;
use krad_bus::protocol::{AgentRecord, AgentState, ApiError, ErrorCode, SentInfo, StateSource};
use krad_bus::request::send::{Send, When};
use krad_bus::server::CallContext;
use tokio::sync::watch;

use crate::input::{TypeError, type_into};
use crate::intents::{Plan, Underway};
use crate::records::no_terminal;
use crate::store::{Store, set_state};

/// Sends `request` to its terminal, whose record `watch` follows.
pub(crate) async fn send(
    store: &Store,
    ctx: &CallContext,
    request: Send,
    mut watch: watch::Receiver<AgentRecord>,
) -> Result<SentInfo, ApiError> {
    let id = request.target;
    if request.when == Some(When::Idle) {
        // Hold the text until the agent is idle or asking (the bus's deadline bounds it).
        loop {
            let state = watch.borrow_and_update().state;
            if matches!(
                state,
                AgentState::Idle | AgentState::Asking | AgentState::Exited
            ) {
                break;
            }
            if watch.changed().await.is_err() {
                break;
            }
        }
    }
    let Some(terminal) = store.with(id, |e| e.terminal.clone()) else {
        return Err(no_terminal(id));
    };
    if let Some(e) = exited(&watch.borrow()) {
        return Err(e);
    }
    // Validated with the request: every key parses.
    let keys: Vec<Key> = request
        .keys
        .as_deref()
        .unwrap_or_default()
        .iter()
        .filter_map(|k| Key::parse(k).ok())
        .collect();
    let enter = request.enter.unwrap_or(false);
    // A Report made while the text is written (the program may answer the
    // moment it reads it) is newer than this Send: it keeps its state.
    let reports_before = store.with(id, |e| e.reports).unwrap_or_default();
    // Under a request id, the write is an intent: a crash while it runs is
    // answered (not sent again) on the retry.
    let _underway = match &ctx.once {
        Some(_) => Some(Underway::begin(
            store.db(),
            ctx,
            Plan::Send { terminal: id },
        )?),
        None => None,
    };
    if let Err(e) = type_into(terminal.as_ref(), &request.text, enter, &keys).await {
        if let Some(e) = exited(&watch.borrow()) {
            return Err(e);
        }
        // A program that does not read its input: retryable, once it reads. A
        // terminal on an SSH host whose link is down: retryable, once the
        // host's tmux client takes it back.
        let code = match &e {
            TypeError::Io(io) if io.kind() == std::io::ErrorKind::WouldBlock => ErrorCode::Busy,
            TypeError::Io(io) if io.kind() == std::io::ErrorKind::NotConnected => {
                ErrorCode::Unavailable
            }
            _ => ErrorCode::Failed,
        };
        return Err(
            ApiError::new(code, format!("cannot write to terminal {id}: {e}"))
                .with_detail(serde_json::json!({ "terminal": id })),
        );
    }
    // Keystrokes that can answer a question make an asking agent work again —
    // unless the agent tells its states itself (hooks, announcements): then it
    // stays asking until it says the question is gone.
    let answers = enter || keys.iter().any(|k| k.ends_a_dialog() || k.is_char());
    let after = store.update(id, |e| {
        e.record.state == AgentState::Asking
            && e.reports == reports_before
            && answers
            && !e.tells_its_state()
            && set_state(&mut e.record, AgentState::Working, StateSource::Input, None)
    });
    Ok(SentInfo {
        terminal: id,
        delivered: true,
        state: after.map_or(AgentState::Exited, |r| r.state),
        queue_place: None,
    })
}

fn exited(record: &AgentRecord) -> Option<ApiError> {
    (record.state == AgentState::Exited).then(|| {
        ApiError::new(
            ErrorCode::Conflict,
            format!("terminal {} has exited; nothing was sent", record.terminal),
        )
        .with_detail(serde_json::json!({ "terminal": record.terminal }))
    })
}
