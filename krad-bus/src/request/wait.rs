//! `Wait`: until one agent, or all or any of several, stops or exits.

use serde::{Deserialize, Serialize};
use std::time::Duration;

use super::{Call, RequestKind, Rights, deadline};
use crate::protocol::Waited;
use crate::protocol::{ApiError, ErrorCode};

/// With several targets: wait for all of them, or for the first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Until {
    /// Every target meets the condition.
    #[default]
    All,
    /// At least one does.
    Any,
}

/// What to wait for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WaitFor {
    /// Not starting and not working (idle, asking or exited).
    #[default]
    Stop,
    /// Exited.
    Exit,
}

/// The Wait request.
///
/// # Format
///
/// ```json
/// {"Wait":{"target":4,"timeout_secs":600}}
/// {"Wait":{"targets":[4,5],"until":"any","for":"exit"}}
/// {"Agent":{…}}            (target)
/// {"Agents":[{…},{…}]}     (targets)
/// "TimedOut"
/// ```
///
/// Answers at once when the condition already holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Wait {
    /// One terminal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<u64>,
    /// Several terminals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets: Option<Vec<u64>>,
    /// All (default) or any of `targets`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Until>,
    /// Stop (default) or exit.
    #[serde(default, rename = "for", skip_serializing_if = "Option::is_none")]
    pub for_: Option<WaitFor>,
    /// At most 1800 (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
    /// A variant group instead of terminals: its variants' agents (with
    /// `scored`, every one stopped and every check of `[checks]` over on its
    /// work as it is now). Answers `{"Agents":[…]}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// With `group`: also wait until every variant is checked.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub scored: bool,
}

impl Wait {
    /// The terminals waited on, in the order given.
    pub fn terminals(&self) -> Vec<u64> {
        match (&self.target, &self.targets) {
            (Some(t), _) => vec![*t],
            (None, Some(ts)) => ts.clone(),
            (None, None) => Vec::new(),
        }
    }

    /// How long to wait.
    pub fn timeout_secs(&self) -> u64 {
        self.timeout_secs.unwrap_or(deadline::MAX_WAIT_SECS)
    }
}

impl Call for Wait {
    const KIND: RequestKind = RequestKind::Wait;
    const RIGHTS: Rights = Rights::Anyone;
    const AT_MOST_ONCE: bool = false;
    type Answer = Waited;

    fn deadline(&self) -> Option<Duration> {
        Some(deadline::waited(self.timeout_secs()))
    }

    fn cancels_when_client_leaves(&self) -> bool {
        true
    }

    fn is_wait(&self) -> bool {
        true
    }

    fn validate(&self) -> Result<(), ApiError> {
        if let Some(group) = &self.group {
            if self.target.is_some() || self.targets.is_some() {
                return Err(Self::KIND.invalid("group", "give a group or terminals, not both"));
            }
            super::create_worktree::check_name(Self::KIND, "group", group)?;
        } else if self.scored {
            return Err(Self::KIND.invalid("scored", "scored waits on a group: give group"));
        }
        match (&self.target, &self.targets) {
            (None, None) if self.group.is_some() => {}
            (Some(_), Some(_)) => {
                return Err(Self::KIND.invalid("targets", "give target or targets, not both"));
            }
            (None, None) => {
                return Err(Self::KIND.field_error(
                    ErrorCode::BadRequest,
                    "target",
                    "field \"target\" (or \"targets\") is missing",
                ));
            }
            (None, Some(ts)) if ts.is_empty() => {
                return Err(Self::KIND.invalid("targets", "name at least one terminal"));
            }
            _ => {}
        }
        match self.timeout_secs {
            Some(secs) if secs > deadline::MAX_WAIT_SECS => Err(Self::KIND.invalid(
                "timeout_secs",
                format!("at most {} seconds, not {secs}", deadline::MAX_WAIT_SECS),
            )),
            _ => Ok(()),
        }
    }
}
