//! `List`: the agents the app hosts, by terminal id.

use serde::{Deserialize, Serialize};

use super::{Call, RequestKind, Rights};
use crate::protocol::AgentRecord;

/// The List request.
///
/// # Format
///
/// ```json
/// "List"
/// {"List":{"environment":"main"}}
/// {"Agents":[{"terminal":1,…},{"terminal":2,…}]}
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct List {
    /// Only the agents of this environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
}

impl Call for List {
    const KIND: RequestKind = RequestKind::List;
    const RIGHTS: Rights = Rights::Anyone;
    const AT_MOST_ONCE: bool = false;
    type Answer = Vec<AgentRecord>;
}
