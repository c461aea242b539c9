//! SubscribeAgents: checks the request and opens the stream.

use krad_bus::protocol::ApiError;
use krad_bus::request::subscribe_agents::SubscribeAgents;
use krad_bus::server::CallContext;

use crate::{AgentStream, Core};

/// Checks the request and opens the stream.
pub(crate) fn open(
    core: &Core,
    _ctx: &CallContext,
    request: SubscribeAgents,
) -> Result<AgentStream, ApiError> {
    if let Some(env) = &request.environment {
        core.check_environment(env)?;
    }
    Ok(AgentStream::new(
        core.store.clone(),
        request.environment,
        request.since_rev,
    ))
}
