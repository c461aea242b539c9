//! Budget: a terminal's or a variant group's cost limit, set or raised
//! ([`crate::budget`]).

use krad_bus::protocol::{AgentRecord, ApiError, ErrorCode};
use krad_bus::request::budget::Budget;
use krad_bus::server::{CallContext, Handle};

use crate::app::EmbeddedApp;
use crate::records::no_terminal;

impl Handle<Budget> for EmbeddedApp {
    async fn handle(
        &self,
        _ctx: &CallContext,
        request: Budget,
    ) -> Result<Vec<AgentRecord>, ApiError> {
        let core = self.core();
        if let Some(id) = request.target {
            let record = core
                .budgets()
                .set_terminal_limit(id, request.max_cost_usd)
                .ok_or_else(|| no_terminal(id))?;
            return Ok(vec![record]);
        }
        let group = request.group.unwrap_or_default();
        if !core.store().has_group(&group) {
            return Err(ApiError::new(
                ErrorCode::NotFound,
                format!("no variant group {group:?}: `krad variants` lists them"),
            )
            .with_detail(serde_json::json!({ "group": group })));
        }
        core.budgets()
            .set_group_limit_now(&group, request.max_cost_usd)
            .map_err(|e| {
                ApiError::new(
                    ErrorCode::Failed,
                    format!("cannot record the group's limit: {e}"),
                )
            })
    }
}
