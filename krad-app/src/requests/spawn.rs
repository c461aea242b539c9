//! Spawn: an agent on a new terminal (see [`crate::spawning`]).

use krad_bus::protocol::{AgentRecord, ApiError};
use krad_bus::request::spawn::Spawn;
use krad_bus::server::{CallContext, Handle};

use crate::{EmbeddedApp, spawning};

impl Handle<Spawn> for EmbeddedApp {
    async fn handle(&self, ctx: &CallContext, request: Spawn) -> Result<AgentRecord, ApiError> {
        spawning::spawn(&self.core, ctx, request, None).await
    }
}
