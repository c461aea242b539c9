//! `Send`: types text into an agent's terminal.

use serde::{Deserialize, Serialize};

use super::{Fields, invalid};
use crate::protocol::ApiError;

/// The longest text one Send may carry.
pub const MAX_TEXT: usize = 32 * 1024;

/// When to write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum When {
    /// Right away.
    #[default]
    Now,
    /// Once the agent is idle or asking (within the deadline).
    Idle,
}

/// The Send request.
///
/// # Format
///
/// ```json
/// {"Send":{"target":4,"text":"run the tests again","enter":true,"when":"idle"}}
/// {"Sent":{"terminal":4,"delivered":true,"state":"working"}}
/// ```
///
/// The text is written as a bracketed paste when the program turned bracketed
/// paste on, so that several lines arrive as one; `enter` adds a carriage return.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Send {
    /// The terminal.
    pub target: u64,
    /// What to type (at most 32 KiB).
    pub text: String,
    /// Press Enter after the text (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enter: Option<bool>,
    /// Now (default) or once idle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<When>,
}

impl Fields for Send {
    fn validate(&self) -> Result<(), ApiError> {
        if self.text.len() > MAX_TEXT {
            return Err(invalid(
                "Send",
                "text",
                format!("at most {MAX_TEXT} bytes, not {}", self.text.len()),
            ));
        }
        Ok(())
    }
}
