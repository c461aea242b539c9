//! Spawn: an agent on a new terminal (see [`crate::spawning`]), or in the
//! queue when `[limits]` leave no room ([`crate::queue`]).

use krad_bus::protocol::{AgentRecord, ApiError};
use krad_bus::request::spawn::Spawn;
use krad_bus::server::{CallContext, Handle};

use crate::app::EmbeddedApp;
use crate::{queue, spawning};

impl Handle<Spawn> for EmbeddedApp {
    async fn handle(&self, ctx: &CallContext, request: Spawn) -> Result<AgentRecord, ApiError> {
        let spawner = self.core().spawner();
        spawning::spawn(spawner, ctx, request, None)
            .await?
            .or_queued(|queued| queue::spawn_later(spawner, queued))
    }
}
