//! `PickVariant`: keeps one variant of a group and archives the others.

use serde::{Deserialize, Serialize};
use std::time::Duration;

use super::{Call, RequestKind, Rights, deadline};
use crate::protocol::{ApiError, ErrorCode, PickedInfo};

/// How the picked variant's work lands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum How {
    /// A merge commit (or a fast-forward) into the target.
    #[default]
    Merge,
    /// One commit on the target with the variant's changes.
    Squash,
    /// Keep the branch only; nothing is merged.
    Branch,
}

/// The PickVariant request.
///
/// # Format
///
/// ```json
/// {"PickVariant":{"group":"login","variant":2,"how":"squash"}}
/// {"Picked":{"group":"login","variant":2,"branch":"krad/login-2","into":"main","commit":"9c1d…"}}
/// {"PickVariant":{"group":"login","variant":2,"dry_run":true}}
/// {"Picked":{"group":"login","variant":2,"branch":"krad/login-2","into":"main","commit":"3f2a…",
///            "dry_run":{"tree":"4b82…","message":"krad: merge …","files":["src/login.rs"],"uncommitted":[],"conflicts":[]}}}
/// {"PickVariant":{"group":"login","best":true,"dry_run":true}}
/// {"Picked":{"group":"login","variant":1,…,"dry_run":{…},"scores":{"ranking":[1,3,2],"best":1,…}}}
/// ```
///
/// With `best: true` (and no `variant`) the app picks by rule: the ranking of
/// the group's scoreboard (Scores) — every gating check passed, then fewest
/// conflicts with the base, then least cost, then shortest time. No variant
/// that passed every gating check, or a tie between the first two, is
/// `conflict` with the scoreboard in `detail.scores`, nothing changed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PickVariant {
    /// The group.
    pub group: String,
    /// The variant's number (absent or 0 with `best`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub variant: u32,
    /// Pick by rule: the best of the group's ranking (default false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub best: bool,
    /// The environment to merge into (default: the group's base environment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub into: Option<String>,
    /// merge (default), squash or branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub how: Option<How>,
    /// Archive and close the other variants (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub close_others: Option<bool>,
    /// Answer what would land — the commit it would make, the files, the
    /// conflicts — and change nothing (default false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
}

impl Call for PickVariant {
    const KIND: RequestKind = RequestKind::PickVariant;
    const RIGHTS: Rights = Rights::ClientAndLeads;
    const AT_MOST_ONCE: bool = true;
    type Answer = PickedInfo;

    fn deadline(&self) -> Option<Duration> {
        Some(deadline::LONG)
    }

    fn validate(&self) -> Result<(), ApiError> {
        match (self.variant, self.best) {
            (0, false) => Err(Self::KIND.field_error(
                ErrorCode::BadRequest,
                "variant",
                "field \"variant\" is missing (or ask for the best with \"best\": true)",
            )),
            (n, true) if n != 0 => {
                Err(Self::KIND.invalid("best", "give variant or best, not both"))
            }
            _ => Ok(()),
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}
