//! Asks: the open asks, oldest first.

use crate::app::EmbeddedApp;
use krad_bus::protocol::{ApiError, AskInfo};
use krad_bus::request::asks::Asks;
use krad_bus::server::{CallContext, Handle};

impl Handle<Asks> for EmbeddedApp {
    async fn handle(&self, _ctx: &CallContext, request: Asks) -> Result<Vec<AskInfo>, ApiError> {
        let core = self.core();
        Ok(core.asks().list(request.terminal))
    }
}
