//! Changes: what an environment did since the commit it was created from.

use krad_bus::protocol::{ApiError, ChangesInfo};
use krad_bus::request::changes::Changes;
use krad_bus::server::{CallContext, Handle};

use crate::app::EmbeddedApp;

impl Handle<Changes> for EmbeddedApp {
    async fn handle(&self, _ctx: &CallContext, request: Changes) -> Result<ChangesInfo, ApiError> {
        let with_patch = request.patch.unwrap_or(false);
        self.core()
            .environments()
            .changes(&request.environment, with_patch)
            .await
    }
}
