//! List: every agent, by terminal id.

use krad_bus::protocol::{AgentRecord, ApiError};
use krad_bus::request::list::List;
use krad_bus::server::{CallContext, Handle};

use crate::EmbeddedApp;

impl Handle<List> for EmbeddedApp {
    async fn handle(
        &self,
        _ctx: &CallContext,
        request: List,
    ) -> Result<Vec<AgentRecord>, ApiError> {
        let core = &self.core;
        if let Some(env) = &request.environment
            && let Err(e) = core.check_environment(env)
        {
            return Err(e);
        }
        Ok(core.store.list(request.environment.as_deref()))
    }
}
