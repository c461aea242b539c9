//! Conflicts: whether the environments' work merges cleanly, foreseen.

use krad_bus::protocol::{ApiError, ConflictsInfo};
use krad_bus::request::conflicts::Conflicts;
use krad_bus::server::{CallContext, Handle};

use crate::app::EmbeddedApp;
use crate::environments::conflicts;

impl Handle<Conflicts> for EmbeddedApp {
    async fn handle(
        &self,
        _ctx: &CallContext,
        request: Conflicts,
    ) -> Result<ConflictsInfo, ApiError> {
        conflicts::conflicts(self.core().environments(), request.environments.as_deref()).await
    }
}
