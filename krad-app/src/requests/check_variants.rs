//! CheckVariants: a group's checks queued now (see [`crate::checks`]).

use krad_bus::protocol::{ApiError, ErrorCode, ScoresInfo};
use krad_bus::request::check_variants::CheckVariants;
use krad_bus::server::{CallContext, Handle};
use serde_json::json;

use crate::app::EmbeddedApp;
use crate::checks::{Why, scores};

impl Handle<CheckVariants> for EmbeddedApp {
    async fn handle(
        &self,
        _ctx: &CallContext,
        request: CheckVariants,
    ) -> Result<ScoresInfo, ApiError> {
        let checks = self.core().checks();
        if checks.specs().is_empty() {
            return Err(ApiError::new(
                ErrorCode::Invalid,
                "the config names no checks: add them under [checks] (docs/environments.md)",
            ));
        }
        let store = self.core().store();
        let group = store.group(&request.group).ok_or_else(|| {
            ApiError::new(
                ErrorCode::NotFound,
                format!("no variant group {:?}", request.group),
            )
            .with_detail(json!({ "group": request.group }))
        })?;
        if let Some(n) = request.variant
            && !group.variants.contains_key(&n)
        {
            return Err(ApiError::new(
                ErrorCode::NotFound,
                format!("group {:?} has no variant {n}", group.name),
            )
            .with_detail(json!({ "group": group.name, "variant": n })));
        }
        for (&n, variant) in &group.variants {
            if request.variant.is_some_and(|v| v != n)
                || store.environment(&variant.environment).is_none()
            {
                continue;
            }
            checks.queue(&group.name, n, &variant.environment, Why::Asked);
        }
        scores::scores(checks, &group.name).await
    }
}
