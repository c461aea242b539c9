//! `ExtensionTool`: calls a tool of an extension (an MCP server).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::Fields;

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

impl Fields for ExtensionTool {}
