//! `Check`: one agent's record, now or as soon as it changes.

use serde::{Deserialize, Serialize};
use std::time::Duration;

use super::{Call, RequestKind, Rights, deadline};
use crate::protocol::AgentRecord;
use crate::protocol::ApiError;

/// The Check request.
///
/// # Format
///
/// ```json
/// {"Check":{"target":4}}
/// {"Check":{"target":4,"wait_secs":60,"since_rev":57}}
/// {"Agent":{"terminal":4,…,"rev":58}}
/// ```
///
/// With `wait_secs`, answers as soon as the agent's `rev` exceeds `since_rev`
/// (default: its rev when the request arrived), or after `wait_secs` with the
/// unchanged record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// The terminal.
    pub target: u64,
    /// How long to wait for a change (at most 1800 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_secs: Option<u64>,
    /// Answer once the agent's rev is past this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_rev: Option<u64>,
}

impl Call for Check {
    const KIND: RequestKind = RequestKind::Check;
    const RIGHTS: Rights = Rights::Anyone;
    const AT_MOST_ONCE: bool = false;
    type Answer = AgentRecord;

    fn deadline(&self) -> Option<Duration> {
        match self.wait_secs {
            Some(secs) => Some(deadline::waited(secs)),
            None => Some(deadline::STANDARD),
        }
    }

    fn cancels_when_client_leaves(&self) -> bool {
        self.wait_secs.is_some()
    }

    fn is_wait(&self) -> bool {
        self.wait_secs.is_some()
    }

    fn validate(&self) -> Result<(), ApiError> {
        match self.wait_secs {
            Some(secs) if secs > deadline::MAX_WAIT_SECS => Err(Self::KIND.invalid(
                "wait_secs",
                format!("at most {} seconds, not {secs}", deadline::MAX_WAIT_SECS),
            )),
            _ => Ok(()),
        }
    }
}
