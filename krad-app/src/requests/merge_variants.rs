//! MergeVariants: several variants landed in the order that conflicts least
//! (see [`crate::checks::merge`]).

use krad_bus::protocol::{ApiError, MergedInfo};
use krad_bus::request::merge_variants::MergeVariants;
use krad_bus::server::{CallContext, Handle};

use crate::app::EmbeddedApp;
use crate::checks::merge;

impl Handle<MergeVariants> for EmbeddedApp {
    async fn handle(
        &self,
        ctx: &CallContext,
        request: MergeVariants,
    ) -> Result<MergedInfo, ApiError> {
        let core = self.core();
        merge::merge(core.checks(), &core.closer(), ctx, request).await
    }
}
