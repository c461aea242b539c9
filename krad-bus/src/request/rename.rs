//! `Rename`: gives a terminal a new name (or takes its name away). An addition
//! of krad's to the contract, for `krad rename`.

use serde::{Deserialize, Serialize};

use super::{Call, RequestKind, Rights};
use crate::protocol::{AgentRecord, ApiError};

/// The longest name, in characters.
pub const MAX_NAME_CHARS: usize = 100;

/// The Rename request.
///
/// # Format
///
/// ```json
/// {"Rename":{"target":4,"name":"fix-login"}}
/// {"Rename":{"target":4,"name":null}}
/// {"Agent":{"terminal":4,…,"name":"fix-login","rev":61}}
/// ```
///
/// The agent's record changes (its `rev` goes up), so subscribers and waiters
/// see the new name; the durable facet shows it as the pane's title. Client
/// and lead terminals may rename any terminal; a plain terminal itself and the
/// terminals it spawned.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Rename {
    /// The terminal.
    pub target: u64,
    /// The new name; `null` (or absent) takes the name away.
    #[serde(default)]
    pub name: Option<String>,
}

impl Call for Rename {
    const KIND: RequestKind = RequestKind::Rename;
    const RIGHTS: Rights = Rights::Scoped;
    const AT_MOST_ONCE: bool = true;
    type Answer = AgentRecord;

    fn validate(&self) -> Result<(), ApiError> {
        match &self.name {
            Some(name) => check_terminal_name(Self::KIND, name, "null takes the name away"),
            None => Ok(()),
        }
    }
}

/// Whether `name` may name a terminal (Rename's, and Spawn's `name`): not
/// blank, at most [`MAX_NAME_CHARS`] characters, no control characters. A
/// blank one is refused with `blank_hint` (what to send instead).
pub fn check_terminal_name(
    request: RequestKind,
    name: &str,
    blank_hint: &str,
) -> Result<(), ApiError> {
    if name.trim().is_empty() {
        return Err(request.invalid("name", format!("a name cannot be blank ({blank_hint})")));
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(request.invalid("name", format!("at most {MAX_NAME_CHARS} characters")));
    }
    if name.chars().any(char::is_control) {
        return Err(request.invalid("name", "no control characters"));
    }
    Ok(())
}
