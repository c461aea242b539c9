//! `Send`: types text into an agent's terminal.

use serde::{Deserialize, Serialize};

use super::{Call, RequestKind, Rights};
use crate::protocol::ApiError;
use crate::protocol::SentInfo;
use crate::protocol::keys::Key;

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

/// The most keys one Send may carry.
pub const MAX_KEYS: usize = 64;

/// The Send request.
///
/// # Format
///
/// ```json
/// {"Send":{"target":4,"text":"run the tests again","enter":true,"when":"idle"}}
/// {"Send":{"target":4,"keys":["Down","Enter"]}}
/// {"Sent":{"terminal":4,"delivered":true,"state":"working"}}
/// ```
///
/// The text is written as a bracketed paste when the program turned bracketed
/// paste on, so that several lines arrive as one; `enter` presses Enter once the
/// text is taken, as a write of its own. `keys` are written after the text, one
/// at a time and unbracketed (see [`crate::protocol::keys`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Send {
    /// The terminal.
    pub target: u64,
    /// What to type (at most 32 KiB).
    #[serde(default)]
    pub text: String,
    /// Named keys to press after the text (at most 64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<Vec<String>>,
    /// Press Enter after the text (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enter: Option<bool>,
    /// Now (default) or once idle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<When>,
    /// `true`: when the app's `[limits]` leave no room for the agent to work
    /// now (or it is itself queued), wait in the queue and be typed when its
    /// turn comes (the answer says `delivered: false` and its `queue_place`)
    /// instead of the answer `busy`. A krad addition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<bool>,
}

impl Call for Send {
    const KIND: RequestKind = RequestKind::Send;
    const RIGHTS: Rights = Rights::Scoped;
    const AT_MOST_ONCE: bool = true;
    type Answer = SentInfo;

    fn cancels_when_client_leaves(&self) -> bool {
        self.when == Some(When::Idle)
    }

    fn validate(&self) -> Result<(), ApiError> {
        if self.text.len() > MAX_TEXT {
            return Err(Self::KIND.invalid(
                "text",
                format!("at most {MAX_TEXT} bytes, not {}", self.text.len()),
            ));
        }
        let keys = self.keys.as_deref().unwrap_or_default();
        if keys.len() > MAX_KEYS {
            return Err(Self::KIND.invalid(
                "keys",
                format!("at most {MAX_KEYS} keys, not {}", keys.len()),
            ));
        }
        if let Some(e) = keys.iter().find_map(|k| Key::parse(k).err()) {
            return Err(Self::KIND.invalid("keys", e));
        }
        Ok(())
    }
}
