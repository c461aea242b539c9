//! `Extensions`: the MCP servers the config names, their state and their tools.

use serde::{Deserialize, Serialize};

use super::Fields;

/// The Extensions request (no fields).
///
/// # Format
///
/// ```json
/// "Extensions"
/// {"Extensions":[{"name":"github","state":"running","tools":[{"name":"search","description":"…","input_schema":{…}}]}]}
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Extensions {}

impl Fields for Extensions {}
