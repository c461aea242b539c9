//! RunVariants: a variant group, one agent in each of N fresh worktrees (see
//! [`crate::run_variants`]).

use krad_bus::protocol::{ApiError, VariantsInfo};
use krad_bus::request::run_variants::RunVariants;
use krad_bus::server::{CallContext, Handle};

use crate::app::EmbeddedApp;
use crate::run_variants;

impl Handle<RunVariants> for EmbeddedApp {
    async fn handle(
        &self,
        ctx: &CallContext,
        request: RunVariants,
    ) -> Result<VariantsInfo, ApiError> {
        run_variants::run(self.core().spawner(), ctx, request).await
    }
}
