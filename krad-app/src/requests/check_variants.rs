//! CheckVariants: a group's checks queued now (see [`crate::checks`]).

use krad_bus::protocol::{ApiError, ScoresInfo};
use krad_bus::request::check_variants::CheckVariants;
use krad_bus::server::{CallContext, Handle};

use crate::app::EmbeddedApp;
use crate::checks::scores;

impl Handle<CheckVariants> for EmbeddedApp {
    async fn handle(
        &self,
        _ctx: &CallContext,
        request: CheckVariants,
    ) -> Result<ScoresInfo, ApiError> {
        let checks = self.core().checks();
        checks.check_group(&request.group, request.variant)?;
        scores::scores(checks, &request.group).await
    }
}
