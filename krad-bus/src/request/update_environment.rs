//! `UpdateEnvironment`: brings a worktree environment up to its base
//! environment's current tip.

use serde::{Deserialize, Serialize};
use std::time::Duration;

use super::create_worktree::check_name;
use super::{Call, RequestKind, Rights, deadline};
use crate::protocol::{ApiError, UpdatedInfo};

/// How an environment is brought up to its base.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UpdateHow {
    /// A merge commit of the base's tip (a fast-forward when it has no commits
    /// of its own).
    #[default]
    Merge,
    /// Its commits replayed on the base's tip.
    Rebase,
}

/// The UpdateEnvironment request.
///
/// Uncommitted changes are refused with `conflict` (the files in `detail`); a
/// conflict is `conflict` with the files, and nothing is changed: the merge or
/// rebase is worked out on objects first, and the worktree moves only once it
/// is known to succeed.
///
/// # Format
///
/// ```json
/// {"UpdateEnvironment":{"environment":"fix-login","how":"rebase"}}
/// {"Updated":{"environment":"fix-login","base_environment":"main","base":"3f2a…","before":"77b0…","head":"e51c…"}}
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UpdateEnvironment {
    /// The worktree environment.
    pub environment: String,
    /// merge (default) or rebase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub how: Option<UpdateHow>,
}

impl Call for UpdateEnvironment {
    const KIND: RequestKind = RequestKind::UpdateEnvironment;
    const RIGHTS: Rights = Rights::Scoped;
    const AT_MOST_ONCE: bool = true;
    type Answer = UpdatedInfo;

    fn deadline(&self) -> Option<Duration> {
        Some(deadline::LONG)
    }

    fn validate(&self) -> Result<(), ApiError> {
        check_name(Self::KIND, "environment", &self.environment)
    }
}
