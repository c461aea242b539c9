//! `Budget`: sets what a terminal's (or a variant group's) model calls may
//! cost, raising it past a limit that stopped the agent. An addition of
//! krad's to the contract, for `krad budget`.

use serde::{Deserialize, Serialize};

use super::{Call, RequestKind, Rights};
use crate::protocol::{AgentRecord, ApiError, Dollars};

/// The Budget request.
///
/// # Format
///
/// ```json
/// {"Budget":{"target":4,"max_cost_usd":2.5}}
/// {"Budget":{"group":"variants-1","max_cost_usd":10}}
/// {"Budget":{"target":4,"max_cost_usd":null}}
/// {"Agents":[{"terminal":4,…,"max_cost_usd":2.5,"rev":61}]}
/// ```
///
/// One of `target` and `group`; `max_cost_usd` null (or absent) takes the
/// limit away. An agent the limit stopped (`asking`, `state_source`
/// `budget`) goes `idle` once the new limit is above what it cost. The
/// answer is the records of the terminals it concerns. Client and lead
/// terminals only: an agent does not raise its own budget.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// The terminal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<u64>,
    /// The variant group (RunVariants).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The new limit in US dollars; null takes the limit away.
    #[serde(default)]
    pub max_cost_usd: Option<Dollars>,
}

impl Call for Budget {
    const KIND: RequestKind = RequestKind::Budget;
    const RIGHTS: Rights = Rights::ClientAndLeads;
    const AT_MOST_ONCE: bool = true;
    type Answer = Vec<AgentRecord>;

    fn validate(&self) -> Result<(), ApiError> {
        match (&self.target, &self.group) {
            (Some(_), None) | (None, Some(_)) => Ok(()),
            _ => Err(Self::KIND.invalid(
                "target",
                "give one of target (a terminal) and group (a variant group)",
            )),
        }
    }
}
