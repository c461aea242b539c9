//! CollectEnvironments (`krad gc`): archives and removes the worktree
//! environments that match, keeping those still in use (see
//! [`crate::environments::gc`]). Client and lead terminals only (the bus
//! refuses plain terminals).

use krad_bus::protocol::{ApiError, CollectedInfo};
use krad_bus::request::collect_environments::CollectEnvironments;
use krad_bus::server::{CallContext, Handle};

use crate::app::EmbeddedApp;
use crate::environments::gc;

impl Handle<CollectEnvironments> for EmbeddedApp {
    async fn handle(
        &self,
        ctx: &CallContext,
        request: CollectEnvironments,
    ) -> Result<CollectedInfo, ApiError> {
        gc::collect(
            self.core().environments(),
            &self.core().closer(),
            ctx,
            &request,
        )
        .await
    }
}
