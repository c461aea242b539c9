//! `CollectEnvironments` (`krad gc`): archives and removes the worktree
//! environments that match its selectors — merged, older than an age — unless
//! something still uses them.

use serde::{Deserialize, Serialize};
use std::time::Duration;

use super::{Call, RequestKind, Rights, deadline};
use crate::protocol::{ApiError, CollectedInfo, ErrorCode};

/// The CollectEnvironments request.
///
/// Selects the worktree environments (never `main`) that match **every**
/// selector given — `merged`: its work is in its target already (as Close
/// judges it, merged by content included); `older_than_secs`: created more than
/// that many seconds ago — then archives each under `refs/krad/archive/` and
/// removes it. An environment with a live terminal, or (on this machine) with
/// another program's working directory inside it, is kept and the reason
/// answered. With `dry_run`, nothing changes.
///
/// # Format
///
/// ```json
/// {"CollectEnvironments":{"merged":true,"older_than_secs":604800,"dry_run":true}}
/// {"Collected":{"dry_run":true,"environments":[{"name":"done","action":"would_remove","reason":"…","bytes":4096}],"freed_bytes":4096}}
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CollectEnvironments {
    /// Select environments whose work is merged into their target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<bool>,
    /// Select environments created more than this many seconds ago.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub older_than_secs: Option<u64>,
    /// Change nothing; answer what would be done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
}

impl Call for CollectEnvironments {
    const KIND: RequestKind = RequestKind::CollectEnvironments;
    const RIGHTS: Rights = Rights::ClientAndLeads;
    const AT_MOST_ONCE: bool = true;
    type Answer = CollectedInfo;

    fn deadline(&self) -> Option<Duration> {
        Some(deadline::COLLECTION)
    }

    fn validate(&self) -> Result<(), ApiError> {
        if self.merged != Some(true) && self.older_than_secs.is_none() {
            return Err(Self::KIND.field_error(
                ErrorCode::Invalid,
                "merged",
                "no selector: pass \"merged\": true and/or \
                 \"older_than_secs\" (krad gc --merged, krad gc --older-than 7d)",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selector_is_required() {
        let none: CollectEnvironments = serde_json::from_str(r#"{"dry_run":true}"#).unwrap();
        let e = none.validate().unwrap_err();
        assert_eq!(e.code, ErrorCode::Invalid);
        assert!(e.message.contains("--older-than"), "{}", e.message);
        let not_merged = CollectEnvironments {
            merged: Some(false),
            ..CollectEnvironments::default()
        };
        assert!(not_merged.validate().is_err());
        for ok in [r#"{"merged":true}"#, r#"{"older_than_secs":0}"#] {
            let r: CollectEnvironments = serde_json::from_str(ok).unwrap();
            assert!(r.validate().is_ok(), "{ok}");
        }
    }
}
