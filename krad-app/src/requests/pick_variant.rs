//! PickVariant: keeps one variant, archives and closes the others; with
//! `best`, the first of the group's ranking (see [`crate::checks::scores`]).

use krad_bus::protocol::{ApiError, ErrorCode, PickedInfo};
use krad_bus::request::pick_variant::PickVariant;
use krad_bus::server::{CallContext, Handle};
use serde_json::json;

use crate::app::EmbeddedApp;
use crate::checks::scores;
use crate::environments::variants;

impl Handle<PickVariant> for EmbeddedApp {
    async fn handle(
        &self,
        ctx: &CallContext,
        mut request: PickVariant,
    ) -> Result<PickedInfo, ApiError> {
        let core = self.core();
        if !request.best {
            return variants::pick(core.environments(), &core.closer(), ctx, request).await;
        }
        let scores = scores::scores(core.checks(), &request.group).await?;
        let Some(best) = scores.best else {
            let why = scores.why.clone().unwrap_or_default();
            return Err(ApiError::new(
                ErrorCode::Conflict,
                format!("no pick by rule in group {:?}: {why}", scores.group),
            )
            .with_detail(json!({ "group": scores.group, "scores": scores })));
        };
        request.variant = best;
        request.best = false;
        let mut picked = variants::pick(core.environments(), &core.closer(), ctx, request).await?;
        picked.scores = Some(Box::new(scores));
        Ok(picked)
    }
}
