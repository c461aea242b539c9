//! `ExtensionTool`: calls a tool of an extension (an MCP server).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::time::Duration;

use super::{Call, RequestKind, Rights, deadline};
use crate::protocol::ToolResultInfo;

/// The ExtensionTool request.
///
/// # Format
///
/// ```json
/// {"ExtensionTool":{"extension":"github","tool":"search","arguments":{"q":"krad"}}}
/// {"ToolResult":{"content":[{"type":"text","text":"…"}],"is_error":false}}
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExtensionTool {
    /// The extension's name in the config.
    pub extension: String,
    /// The tool's name.
    pub tool: String,
    /// The tool's arguments (default `{}`).
    #[serde(default)]
    pub arguments: Map<String, Value>,
}

impl Call for ExtensionTool {
    const KIND: RequestKind = RequestKind::ExtensionTool;
    const RIGHTS: Rights = Rights::Anyone;
    const AT_MOST_ONCE: bool = false;
    type Answer = ToolResultInfo;

    fn deadline(&self) -> Option<Duration> {
        Some(deadline::LONGEST)
    }

    fn cancels_when_client_leaves(&self) -> bool {
        true
    }
}
