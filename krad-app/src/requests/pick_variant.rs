//! PickVariant: keeps one variant, archives and closes the others.

use krad_bus::protocol::{ApiError, PickedInfo};
use krad_bus::request::pick_variant::PickVariant;
use krad_bus::server::{CallContext, Handle};

use crate::app::EmbeddedApp;
use crate::environments::variants;

impl Handle<PickVariant> for EmbeddedApp {
    async fn handle(
        &self,
        ctx: &CallContext,
        request: PickVariant,
    ) -> Result<PickedInfo, ApiError> {
        let core = self.core();
        variants::pick(core.environments(), &core.closer(), ctx, request).await
    }
}
