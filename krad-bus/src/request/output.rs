//! `Output`: what an agent's terminal shows.

use serde::{Deserialize, Serialize};

use super::{Call, RequestKind, Rights};
use crate::protocol::ApiError;
use crate::protocol::OutputInfo;

/// The most scrollback lines one Output returns.
pub const MAX_LINES: u64 = 10_000;

/// The Output request.
///
/// # Format
///
/// ```json
/// {"Output":{"target":4,"lines":100}}
/// {"Output":{"terminal":4,"screen":"$ make\n…","cursor":[3,2],"scrollback":["…"],"truncated":false}}
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Output {
    /// The terminal.
    pub target: u64,
    /// Lines of scrollback (default 100, at most 10,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines: Option<u64>,
}

impl Output {
    /// Lines of scrollback asked for.
    pub fn lines(&self) -> usize {
        self.lines.unwrap_or(100) as usize
    }
}

impl Call for Output {
    const KIND: RequestKind = RequestKind::Output;
    const RIGHTS: Rights = Rights::Anyone;
    const AT_MOST_ONCE: bool = false;
    type Answer = OutputInfo;

    fn validate(&self) -> Result<(), ApiError> {
        match self.lines {
            Some(n) if n > MAX_LINES => {
                Err(Self::KIND.invalid("lines", format!("at most {MAX_LINES}, not {n}")))
            }
            _ => Ok(()),
        }
    }
}
