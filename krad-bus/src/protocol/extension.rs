//! Programs and extensions: the answers of Code, Extensions and ExtensionTool.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The answer to Code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeResultInfo {
    /// The exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that killed it (9 after a timeout).
    pub signal: Option<i32>,
    /// What it printed on stdout (up to the cap).
    pub stdout: String,
    /// What it printed on stderr (up to the cap).
    pub stderr: String,
    /// How long it ran.
    pub duration_ms: u64,
    /// True when stdout or stderr was cut at the cap.
    pub truncated: bool,
}

/// Whether an extension's server runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExtensionState {
    /// Not started yet (it starts on first use).
    Stopped,
    /// Running, its tools listed.
    Running,
    /// It would not start or died; it is retried with backoff.
    Failed,
    /// A value this build does not know, from a newer app: shown, never acted on.
    #[serde(other)]
    Other,
}

/// A tool of an extension.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolInfo {
    /// Its name.
    pub name: String,
    /// What it does.
    pub description: Option<String>,
    /// Its arguments' JSON schema.
    pub input_schema: Value,
}

/// An extension (an MCP server named in the config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExtensionInfo {
    /// Its name in the config.
    pub name: String,
    /// stopped, running or failed.
    pub state: ExtensionState,
    /// Its tools, once it ran.
    pub tools: Vec<ToolInfo>,
    /// Why it failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How many times its server was started again after the first start
    /// (after it died or would not start).
    #[serde(default)]
    pub restarts: u64,
}

/// The answer to ExtensionTool: the tool's result as the server gave it.
///
/// ```json
/// {"content":[{"type":"text","text":"…","annotations":{"priority":0.7}}],"is_error":false,
///  "structuredContent":{…},"isError":false,"_meta":{…}}
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResultInfo {
    /// The content items, as MCP gave them (every field kept).
    pub content: Vec<Value>,
    /// True when the tool reported an error (the result's `isError`).
    pub is_error: bool,
    /// True when the content was cut, or members dropped, at the response limit.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// The result's other members as the server gave them, under their MCP
    /// names: `structuredContent`, `isError`, `_meta`, and any other. Never
    /// `content`, `is_error` or `truncated`.
    #[serde(flatten)]
    pub others: Map<String, Value>,
}
