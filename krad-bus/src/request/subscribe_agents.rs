//! `SubscribeAgents`: a stream of every change to the agents (section 6).

use serde::{Deserialize, Serialize};

use super::{Call, RequestKind, Rights};
use crate::protocol::Streamed;

/// The SubscribeAgents request.
///
/// # Format
///
/// ```json
/// {"SubscribeAgents":{"environment":"main","since_rev":120}}
/// {"Snapshot":{"rev":120,"agents":[…],"fresh":true}}
/// {"Agent":{…}}
/// {"Removed":{"terminal":4,"rev":122}}
/// {"Heartbeat":{"rev":122}}
/// "ShuttingDown"
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SubscribeAgents {
    /// Only the agents of this environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    /// Resume: only what changed after this rev.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_rev: Option<u64>,
}

impl Call for SubscribeAgents {
    const KIND: RequestKind = RequestKind::SubscribeAgents;
    const RIGHTS: Rights = Rights::Anyone;
    const AT_MOST_ONCE: bool = false;
    type Answer = Streamed;
}
