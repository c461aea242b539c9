//! `PickVariant`: keeps one variant of a group and archives the others.

use serde::{Deserialize, Serialize};
use std::time::Duration;

use super::{Call, RequestKind, Rights, deadline};
use crate::protocol::PickedInfo;

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
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PickVariant {
    /// The group.
    pub group: String,
    /// The variant's number.
    pub variant: u32,
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
}
