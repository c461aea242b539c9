//! `MergeVariants`: lands several compatible variants of a group, one after
//! another, in the order that conflicts least.

use serde::{Deserialize, Serialize};
use std::time::Duration;

use super::create_worktree::check_name;
use super::{Call, RequestKind, Rights, deadline};
use crate::protocol::{ApiError, MergedInfo};

/// The MergeVariants request.
///
/// Merges the variants (default: every variant still there) into the target
/// (default: the group's base environment), in the order that conflicts
/// least: the fewest conflicts with the other variants and the base first,
/// then the ranking's order. Each lands whole or not at all (as PickVariant
/// with `close_others: false`); the first that would conflict stops the
/// merging with nothing of it applied, and is named in `stopped`. Nothing is
/// closed.
///
/// # Format
///
/// ```json
/// {"MergeVariants":{"group":"login"}}
/// {"MergeVariants":{"group":"login","variants":[1,3],"into":"main"}}
/// {"Merged":{"group":"login","into":"main","order":[1,3,2],
///            "landed":[{"variant":1,"commit":"9c1d…"},{"variant":3,"commit":"a0b2…"}],
///            "stopped":{"variant":2,"files":["src/login.rs"],"message":"…"}}}
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MergeVariants {
    /// The group.
    pub group: String,
    /// The variants to land (default: every variant still there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variants: Option<Vec<u32>>,
    /// The environment to merge into (default: the group's base environment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub into: Option<String>,
}

impl Call for MergeVariants {
    const KIND: RequestKind = RequestKind::MergeVariants;
    const RIGHTS: Rights = Rights::ClientAndLeads;
    const AT_MOST_ONCE: bool = true;
    type Answer = MergedInfo;

    fn deadline(&self) -> Option<Duration> {
        Some(deadline::LONGEST)
    }

    fn validate(&self) -> Result<(), ApiError> {
        check_name(Self::KIND, "group", &self.group)?;
        if let Some(variants) = &self.variants
            && (variants.is_empty() || variants.len() > 16 || variants.contains(&0))
        {
            return Err(Self::KIND.invalid(
                "variants",
                "name 1 to 16 variants, numbered from 1, or leave it out for all",
            ));
        }
        if let Some(into) = &self.into {
            check_name(Self::KIND, "into", into)?;
        }
        Ok(())
    }
}
