//! Report: a terminal says what its agent is doing (hooks call it).

use krad_bus::protocol::{AgentState, ApiError, ErrorCode, Response, StateSource};
use krad_bus::request::report::Report;
use krad_bus::server::CallContext;

use crate::Core;
use crate::store::set_state;

pub(crate) async fn handle(core: &Core, ctx: &CallContext, request: Report) -> Response {
    let Some(me) = ctx.principal.terminal() else {
        return ApiError::new(
            ErrorCode::Forbidden,
            "only a terminal reports, about itself",
        )
        .into();
    };
    let id = me.terminal;
    let mut exited = false;
    let updated = core.store.update(id, |e| {
        if e.record.state == AgentState::Exited {
            exited = true;
            return false;
        }
        e.last_activity = std::time::Instant::now();
        let mut changed = set_state(
            &mut e.record,
            request.state.into(),
            StateSource::Hook,
            request.message.clone(),
        );
        if let Some(title) = &request.title
            && e.record.title.as_ref() != Some(title)
        {
            e.record.title = Some(title.clone());
            changed = true;
        }
        changed
    });
    if updated.is_some()
        && !exited
        && let Some(session) = &request.session
    {
        core.feed.session(id, session);
    }
    match updated {
        None => Core::no_terminal(id).into(),
        Some(_) if exited => {
            ApiError::new(ErrorCode::Conflict, format!("terminal {id} has exited"))
                .with_detail(serde_json::json!({ "terminal": id }))
                .into()
        }
        Some(_) => Response::Ok,
    }
}
