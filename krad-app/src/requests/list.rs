//! List: every agent, by terminal id, spliced from each record's kept JSON.

use crate::app::EmbeddedApp;
use krad_bus::protocol::{ApiError, EncodedAnswer};
use krad_bus::request::list::List;
use krad_bus::server::{CallContext, HandleEncoded};

impl HandleEncoded<List> for EmbeddedApp {
    async fn handle_encoded(
        &self,
        _ctx: &CallContext,
        request: List,
    ) -> Result<EncodedAnswer, ApiError> {
        let core = self.core();
        if let Some(env) = &request.environment {
            core.environments().check(env)?;
        }
        Ok(core.store().list_answer(request.environment.as_deref()))
    }
}
