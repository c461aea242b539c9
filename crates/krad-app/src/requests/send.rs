//! Send: types text and keys into a terminal, now or once the agent is idle.

use krad_bus::protocol::keys::Key;
use krad_bus::protocol::{
    AgentRecord, AgentState, ApiError, ErrorCode, Response, SentInfo, StateSource,
};
use krad_bus::request::send::{Send, When};
use krad_bus::server::CallContext;

use super::may_act_on;
use crate::Core;
use crate::input::type_into;
use crate::store::set_state;

pub(crate) async fn handle(core: &Core, ctx: &CallContext, request: Send) -> Response {
    let id = request.target;
    let Some(mut watch) = core.store.watch(id) else {
        return Core::no_terminal(id).into();
    };
    let record = watch.borrow_and_update().clone();
    if let Err(e) = may_act_on(&ctx.principal, "Send", &record) {
        return e.into();
    }
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
    let Some(terminal) = core.store.with(id, |e| e.terminal.clone()) else {
        return Core::no_terminal(id).into();
    };
    if let Some(e) = exited(&watch.borrow()) {
        return e.into();
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
    if let Err(e) = type_into(terminal.as_ref(), &request.text, enter, &keys).await {
        if let Some(e) = exited(&watch.borrow()) {
            return e.into();
        }
        return ApiError::new(
            ErrorCode::Failed,
            format!("cannot write to terminal {id}: {e}"),
        )
        .into();
    }
    // Keystrokes that can answer a question make an asking agent work again —
    // unless the agent tells its states itself (hooks, announcements): then it
    // stays asking until it says the question is gone.
    let answers = enter || keys.iter().any(|k| k.ends_a_dialog() || k.is_char());
    let after = core.store.update(id, |e| {
        e.record.state == AgentState::Asking
            && answers
            && !e.tells_its_state()
            && set_state(&mut e.record, AgentState::Working, StateSource::Input, None)
    });
    Response::Sent(SentInfo {
        terminal: id,
        delivered: true,
        state: after.map_or(AgentState::Exited, |r| r.state),
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
