//! Send: types text into a terminal, now or once the agent is idle.

use krad_bus::protocol::{
    AgentRecord, AgentState, ApiError, ErrorCode, Response, SentInfo, StateSource,
};
use krad_bus::request::send::{Send, When};
use krad_bus::server::CallContext;

use super::may_act_on;
use crate::Core;
use crate::store::set_state;
use crate::watcher::keystrokes;

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
    let bytes = keystrokes(
        &request.text,
        request.enter.unwrap_or(false),
        terminal.bracketed_paste(),
    );
    match terminal.write(bytes).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            if let Some(e) = exited(&watch.borrow()) {
                return e.into();
            }
            return ApiError::new(
                ErrorCode::Failed,
                format!("cannot write to terminal {id}: {e}"),
            )
            .into();
        }
        Err(_) => {
            return ApiError::new(ErrorCode::Failed, format!("terminal {id} closed its input"))
                .into();
        }
    }
    // Keystrokes answer a question: an asking agent is working again.
    let after = core.store.update(id, |e| {
        e.record.state == AgentState::Asking
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
