//! PickVariant: keeps one variant, archives and closes the others; with
//! `best`, the first of the group's ranking (see [`crate::checks::scores`]).

use krad_bus::protocol::{ApiError, PickedInfo};
use krad_bus::request::pick_variant::PickVariant;
use krad_bus::server::{CallContext, Handle};

use crate::app::EmbeddedApp;
use crate::checks::scores;
use crate::environments::variants;

impl Handle<PickVariant> for EmbeddedApp {
    async fn handle(
        &self,
        ctx: &CallContext,
        request: PickVariant,
    ) -> Result<PickedInfo, ApiError> {
        let core = self.core();
        if request.best {
            return scores::pick_best(core.checks(), &core.closer(), ctx, request).await;
        }
        variants::pick(core.environments(), &core.closer(), ctx, request).await
    }
}
