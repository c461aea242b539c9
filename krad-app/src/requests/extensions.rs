//! Extensions: the MCP servers the config names ([`crate::extensions`]), their
//! state and their tools. Listing never starts a server: one not used yet is
//! `stopped`, with no tools.

use crate::app::EmbeddedApp;
use krad_bus::protocol::{ApiError, ExtensionInfo};
use krad_bus::request::extensions::Extensions;
use krad_bus::server::{CallContext, Handle};

impl Handle<Extensions> for EmbeddedApp {
    async fn handle(
        &self,
        _ctx: &CallContext,
        _request: Extensions,
    ) -> Result<Vec<ExtensionInfo>, ApiError> {
        Ok(self.core().extensions().list())
    }
}
