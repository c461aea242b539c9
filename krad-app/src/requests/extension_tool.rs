//! ExtensionTool: calls a tool of an extension, starting its server on first
//! use. The call is cancelled on the MCP side (`notifications/cancelled`) when
//! the bus drops this future: the client left or the deadline passed.

use crate::app::EmbeddedApp;
use krad_bus::protocol::{ApiError, ToolResultInfo};
use krad_bus::request::extension_tool::ExtensionTool;
use krad_bus::server::{CallContext, Handle};

impl Handle<ExtensionTool> for EmbeddedApp {
    async fn handle(
        &self,
        _ctx: &CallContext,
        request: ExtensionTool,
    ) -> Result<ToolResultInfo, ApiError> {
        self.core()
            .extensions()
            .call(&request.extension, &request.tool, request.arguments)
            .await
    }
}
