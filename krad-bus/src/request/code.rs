//! `Code`: runs a program to completion in an environment, without a terminal.

use serde::{Deserialize, Serialize};
use std::time::Duration;

use super::{Call, RequestKind, Rights, deadline};
use crate::protocol::ApiError;
use crate::protocol::CodeResultInfo;

/// The longest a Code run may take, in seconds.
pub const MAX_TIMEOUT_SECS: u64 = 110;

/// The Code request.
///
/// # Format
///
/// ```json
/// {"Code":{"environment":"main","command":["cargo","test"],"stdin":"…","timeout_secs":60}}
/// {"CodeResult":{"exit_code":0,"signal":null,"stdout":"…","stderr":"…","duration_ms":5120,"truncated":false}}
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Code {
    /// Where to run it.
    pub environment: String,
    /// The argv.
    pub command: Vec<String>,
    /// Written to the program's standard input, which is then closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin: Option<String>,
    /// Kill it after this long (at most 110 s; default 110).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
}

impl Code {
    /// How long the program may run.
    pub fn timeout_secs(&self) -> u64 {
        self.timeout_secs.unwrap_or(MAX_TIMEOUT_SECS)
    }
}

impl Call for Code {
    const KIND: RequestKind = RequestKind::Code;
    const RIGHTS: Rights = Rights::Scoped;
    const AT_MOST_ONCE: bool = true;
    type Answer = CodeResultInfo;

    fn deadline(&self) -> Option<Duration> {
        Some(deadline::LONGEST)
    }

    fn cancels_when_client_leaves(&self) -> bool {
        true
    }

    fn validate(&self) -> Result<(), ApiError> {
        if self.command.first().is_none_or(|p| p.is_empty()) {
            return Err(Self::KIND.invalid("command", "the argv must start with a program"));
        }
        match self.timeout_secs {
            Some(0) => Err(Self::KIND.invalid("timeout_secs", "at least 1 second")),
            Some(secs) if secs > MAX_TIMEOUT_SECS => Err(Self::KIND.invalid(
                "timeout_secs",
                format!("at most {MAX_TIMEOUT_SECS} seconds, not {secs}"),
            )),
            _ => Ok(()),
        }
    }
}
