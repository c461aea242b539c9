//! Scores: a variant group's scoreboard (see [`crate::checks::scores`]).

use krad_bus::protocol::{ApiError, ScoresInfo};
use krad_bus::request::scores::Scores;
use krad_bus::server::{CallContext, Handle};

use crate::app::EmbeddedApp;
use crate::checks::scores;

impl Handle<Scores> for EmbeddedApp {
    async fn handle(&self, _ctx: &CallContext, request: Scores) -> Result<ScoresInfo, ApiError> {
        scores::scores(self.core().checks(), &request.group).await
    }
}
