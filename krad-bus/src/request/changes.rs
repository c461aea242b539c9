//! `Changes`: what an environment did since the commit it was created from.

use serde::{Deserialize, Serialize};
use std::time::Duration;

use super::{Call, RequestKind, Rights, deadline};
use crate::protocol::ChangesInfo;

/// The Changes request.
///
/// # Format
///
/// ```json
/// {"Changes":{"environment":"fix-login","patch":true}}
/// {"Changes":{"environment":"fix-login","base":"3f2a…","head":"9c1d…",
///             "files":[{"path":"src/login.rs","status":"modified","added":12,"removed":3}],
///             "patch":"diff --git …","truncated":false}}
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Changes {
    /// The environment.
    pub environment: String,
    /// Include the patch (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<bool>,
}

impl Call for Changes {
    const KIND: RequestKind = RequestKind::Changes;
    const RIGHTS: Rights = Rights::Anyone;
    const AT_MOST_ONCE: bool = false;
    type Answer = ChangesInfo;

    fn deadline(&self) -> Option<Duration> {
        Some(deadline::LONG)
    }
}
