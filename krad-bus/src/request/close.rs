//! `Close`: ends a terminal (or, later, an environment).

use serde::{Deserialize, Serialize};
use std::time::Duration;

use super::{Call, RequestKind, Rights, deadline};
use crate::protocol::{ApiError, ErrorCode};

/// The Close request.
///
/// # Format
///
/// ```json
/// {"Close":{"target":4}}
/// "Ok"
/// ```
///
/// A terminal gets SIGHUP, then SIGKILL after 5 s; the answer comes once it has
/// exited, and it is then removed from the app's records.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Close {
    /// A terminal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<u64>,
    /// An environment (never `main`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    /// Discard unmerged work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force: Option<bool>,
}

impl Call for Close {
    const KIND: RequestKind = RequestKind::Close;
    const RIGHTS: Rights = Rights::Scoped;
    const AT_MOST_ONCE: bool = true;
    type Answer = ();

    fn deadline(&self) -> Option<Duration> {
        Some(deadline::LONG)
    }

    fn validate(&self) -> Result<(), ApiError> {
        match (&self.target, &self.environment) {
            (Some(_), Some(_)) => {
                Err(Self::KIND.invalid("environment", "give target or environment, not both"))
            }
            (None, None) => Err(Self::KIND.field_error(
                ErrorCode::BadRequest,
                "target",
                "field \"target\" (or \"environment\") is missing",
            )),
            _ => Ok(()),
        }
    }
}
