//! Report: a terminal says what its agent is doing (hooks call it); taken into
//! its record by [`crate::reports`].

use krad_bus::protocol::{ApiError, ErrorCode};
use krad_bus::request::report::Report;
use krad_bus::server::{CallContext, Handle};

use crate::app::EmbeddedApp;
use crate::reports;

impl Handle<Report> for EmbeddedApp {
    async fn handle(&self, ctx: &CallContext, request: Report) -> Result<(), ApiError> {
        let Some(me) = ctx.principal.terminal() else {
            return Err(ApiError::new(
                ErrorCode::Forbidden,
                "only a terminal reports, about itself",
            ));
        };
        reports::take(
            self.core().asks(),
            self.core().store(),
            self.core().feed(),
            me.terminal,
            &request,
        )
    }
}
