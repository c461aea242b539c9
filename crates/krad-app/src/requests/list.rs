//! List: every agent, by terminal id.

use krad_bus::protocol::Response;
use krad_bus::request::list::List;
use krad_bus::server::CallContext;

use crate::Core;

pub(crate) async fn handle(core: &Core, _ctx: &CallContext, request: List) -> Response {
    if let Some(env) = &request.environment
        && let Err(e) = core.check_environment(env)
    {
        return e.into();
    }
    Response::Agents(core.store.list(request.environment.as_deref()))
}
