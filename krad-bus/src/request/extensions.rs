//! `Extensions`: the MCP servers the config names, their state and their tools.

use serde::{Deserialize, Serialize};

use super::{Call, RequestKind, Rights};
use crate::protocol::ExtensionInfo;

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

impl Call for Extensions {
    const KIND: RequestKind = RequestKind::Extensions;
    const RIGHTS: Rights = Rights::Anyone;
    const AT_MOST_ONCE: bool = false;
    type Answer = Vec<ExtensionInfo>;
}
