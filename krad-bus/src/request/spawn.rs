//! `Spawn`: starts an agent on a new terminal.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{Call, RequestKind, Rights, deadline};
use crate::protocol::AgentRecord;
use crate::protocol::ApiError;

/// The largest terminal side accepted, in cells.
pub const MAX_SIDE: u16 = 1000;

/// The Spawn request.
///
/// # Format
///
/// ```json
/// {"Spawn":{"profile":"claude","prompt":"fix the login bug","name":"fix-login"}}
/// {"Spawn":{"profile":"exec","command":["make","test"],"environment":"main","cols":120,"rows":40}}
/// {"Agent":{"terminal":5,"state":"starting",…}}
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Spawn {
    /// Where to run (default: the caller's environment, or main).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    /// How to start it (default: the config's default profile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// The argv, instead of the profile's command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// The task, delivered as the profile says (argument, typed, or not at all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// A name to show (as Rename's: not blank, at most 100 characters, no
    /// control characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Give the terminal a lead token (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lead: Option<bool>,
    /// Extra environment variables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
    /// Columns (default 120).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cols: Option<u16>,
    /// Rows (default 40).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u16>,
    /// `true`: run in a sandbox whatever the config says (`[sandbox]`; a
    /// request can only tighten it: `false` is the config's choice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<bool>,
    /// What its model calls may cost, in US dollars (over the config's
    /// `[budget] max_cost_usd`): reached, the agent is interrupted and shown
    /// `asking` until the limit is raised (Budget). A krad addition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<crate::protocol::Dollars>,
    /// `true`: when the app's `[limits]` leave no room now, wait in its queue
    /// (the answer is the record, `queued`, with its `queue_place`; started in
    /// order as room frees) instead of the answer `busy`. A krad addition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<bool>,
}

impl Call for Spawn {
    const KIND: RequestKind = RequestKind::Spawn;
    const RIGHTS: Rights = Rights::Scoped;
    const AT_MOST_ONCE: bool = true;
    type Answer = AgentRecord;

    fn deadline(&self) -> Option<Duration> {
        Some(deadline::LONG)
    }

    fn validate(&self) -> Result<(), ApiError> {
        if let Some(name) = &self.name {
            super::rename::check_terminal_name(Self::KIND, name, "leave it out for none")?;
        }
        if let Some(command) = &self.command
            && command.first().is_none_or(|p| p.is_empty())
        {
            return Err(Self::KIND.invalid("command", "the argv must start with a program"));
        }
        for (field, side) in [("cols", self.cols), ("rows", self.rows)] {
            if let Some(side) = side
                && !(1..=MAX_SIDE).contains(&side)
            {
                return Err(Self::KIND.invalid(field, format!("1 to {MAX_SIDE}, not {side}")));
            }
        }
        if let Some(env) = &self.env {
            for name in env.keys() {
                if name.is_empty() || name.contains(['=', '\0']) {
                    return Err(
                        Self::KIND.invalid("env", format!("{name:?} is not a variable name"))
                    );
                }
                if name.starts_with("KRAD_ADE_") {
                    return Err(Self::KIND.invalid("env", format!("{name} is set by the app")));
                }
            }
        }
        Ok(())
    }
}
