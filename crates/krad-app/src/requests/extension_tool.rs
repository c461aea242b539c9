//! ExtensionTool: calls a tool of an extension, starting its server on first
//! use. The call is cancelled on the MCP side (`notifications/cancelled`) when
//! the bus drops this future: the client left or the deadline passed.

use std::sync::Arc;

use krad_bus::protocol::Response;
use krad_bus::request::extension_tool::ExtensionTool;
use krad_bus::server::CallContext;

use crate::Core;

pub(crate) async fn handle(
    core: &Arc<Core>,
    _ctx: &CallContext,
    request: ExtensionTool,
) -> Response {
    match core
        .extensions
        .call(&request.extension, &request.tool, request.arguments)
        .await
    {
        Ok(result) => Response::ToolResult(result),
        Err(e) => e.into(),
    }
}
