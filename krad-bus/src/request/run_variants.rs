//! `RunVariants`: the same task in N fresh worktrees, one agent each.

use serde::{Deserialize, Serialize};
use std::time::Duration;

use super::{Call, RequestKind, Rights, create_worktree::check_name, deadline};
use crate::protocol::ApiError;
use crate::protocol::VariantsInfo;

/// The most variants one group may have.
pub const MAX_COUNT: u32 = 16;

/// The RunVariants request.
///
/// # Format
///
/// ```json
/// {"RunVariants":{"count":3,"prompt":"fix the login bug","profile":"claude","name":"login"}}
/// {"Variants":{"group":"login","variants":[{"variant":1,"environment":"login-1","terminal":7},…]}}
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunVariants {
    /// How many (1–16).
    pub count: u32,
    /// The task, the same for each; not blank.
    pub prompt: String,
    /// The profile (default: the config's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// The argv, instead of the profile's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// An environment or git ref to start from (default: main's HEAD).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// The group's name (default: generated); variants are `<name>-<n>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// An SSH host of the config: the variants live in the host's repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// `true`: every variant runs in a sandbox (see Spawn's `sandbox`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<bool>,
    /// What each variant's model calls may cost, in US dollars (Spawn's
    /// `max_cost_usd`). A krad addition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<crate::protocol::Dollars>,
    /// What the whole group's may cost, in US dollars (over the config's
    /// `[budget] max_group_cost_usd`): reached, every variant still running
    /// is interrupted and shown `asking` (Budget raises it). A krad addition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_group_cost_usd: Option<crate::protocol::Dollars>,
    /// `true`: when the app's `[limits]` leave no room for all the variants
    /// now, their worktrees are made and their agents wait in the queue (see
    /// Spawn's `queue`) instead of the answer `busy`. A krad addition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<bool>,
}

impl Call for RunVariants {
    const KIND: RequestKind = RequestKind::RunVariants;
    const RIGHTS: Rights = Rights::ClientAndLeads;
    const AT_MOST_ONCE: bool = true;
    type Answer = VariantsInfo;

    fn deadline(&self) -> Option<Duration> {
        Some(deadline::LONG)
    }

    fn validate(&self) -> Result<(), ApiError> {
        if !(1..=MAX_COUNT).contains(&self.count) {
            return Err(
                Self::KIND.invalid("count", format!("1 to {MAX_COUNT}, not {}", self.count))
            );
        }
        if self.prompt.trim().is_empty() {
            return Err(
                Self::KIND.invalid("prompt", "the task for every variant: it must not be blank")
            );
        }
        if let Some(name) = &self.name {
            check_name(Self::KIND, "name", name)?;
            if name.len() > 60 {
                return Err(Self::KIND.invalid("name", "at most 60 characters (variants add -N)"));
            }
        }
        if let Some(command) = &self.command
            && command.first().is_none_or(|p| p.is_empty())
        {
            return Err(Self::KIND.invalid("command", "the argv must start with a program"));
        }
        Ok(())
    }
}
