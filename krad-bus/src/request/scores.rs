//! `Scores`: a variant group's scoreboard and the ranking a pick by rule follows.

use serde::{Deserialize, Serialize};
use std::time::Duration;

use super::create_worktree::check_name;
use super::{Call, RequestKind, Rights, deadline};
use crate::protocol::{ApiError, ScoresInfo};

/// The Scores request.
///
/// Each variant of the group still there: its agent's state, its checks
/// (`[checks]`, their latest runs), its cost and tokens, its time from spawn
/// to its last idle, its diff against the base, the variants and the base it
/// would conflict with; and the ranking (docs/environments.md, "Scored
/// variants").
///
/// # Format
///
/// ```json
/// {"Scores":{"group":"login"}}
/// {"Scores":{"group":"login","base":"3f2a…","base_environment":"main","checks":["test"],
///            "variants":[{"variant":1,"environment":"login-1","checks":[…],"checked":true,…}],
///            "ranking":[1,3,2],"best":1}}
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Scores {
    /// The group.
    pub group: String,
}

impl Call for Scores {
    const KIND: RequestKind = RequestKind::Scores;
    const RIGHTS: Rights = Rights::Anyone;
    const AT_MOST_ONCE: bool = false;
    type Answer = ScoresInfo;

    fn deadline(&self) -> Option<Duration> {
        Some(deadline::LONG)
    }

    fn validate(&self) -> Result<(), ApiError> {
        check_name(Self::KIND, "group", &self.group)
    }
}
