//! `CheckVariants`: runs a group's checks (`[checks]`) in its variants now.

use serde::{Deserialize, Serialize};
use std::time::Duration;

use super::create_worktree::check_name;
use super::{Call, RequestKind, Rights, deadline};
use crate::protocol::{ApiError, ScoresInfo};

/// The CheckVariants request.
///
/// Queues every check of `[checks]` in each variant of the group (or the one
/// named) whose work, as it is now, has not been checked yet; a check of a
/// commit already checked is not run again. Answers at once with the
/// scoreboard (the checks queued show `"outcome":"queued"`); `Wait` with
/// `group` and `scored: true` waits for their ends. A group without `[checks]`
/// is `invalid`.
///
/// # Format
///
/// ```json
/// {"CheckVariants":{"group":"login"}}
/// {"CheckVariants":{"group":"login","variant":2}}
/// {"Scores":{"group":"login",…}}
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckVariants {
    /// The group.
    pub group: String,
    /// Only this variant (default: every variant of the group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<u32>,
}

impl Call for CheckVariants {
    const KIND: RequestKind = RequestKind::CheckVariants;
    const RIGHTS: Rights = Rights::ClientAndLeads;
    const AT_MOST_ONCE: bool = true;
    type Answer = ScoresInfo;

    fn deadline(&self) -> Option<Duration> {
        Some(deadline::LONG)
    }

    fn validate(&self) -> Result<(), ApiError> {
        check_name(Self::KIND, "group", &self.group)?;
        if self.variant == Some(0) {
            return Err(Self::KIND.invalid("variant", "variants are numbered from 1"));
        }
        Ok(())
    }
}
