//! SubscribeAgents: checks the environment it names and opens the stream
//! ([`AgentStream`]).

use krad_bus::protocol::ApiError;
use krad_bus::request::subscribe_agents::SubscribeAgents;
use krad_bus::server::{CallContext, Open};

use crate::app::EmbeddedApp;
use crate::subscription::AgentStream;

impl Open<SubscribeAgents> for EmbeddedApp {
    type Stream = AgentStream;

    async fn open(
        &self,
        _ctx: &CallContext,
        request: SubscribeAgents,
    ) -> Result<AgentStream, ApiError> {
        if let Some(env) = &request.environment {
            self.core().environments().check(env)?;
        }
        Ok(AgentStream::new(
            self.core().store().clone(),
            request.environment,
            request.since_rev,
        ))
    }
}
