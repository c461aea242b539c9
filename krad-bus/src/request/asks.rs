//! `Asks`: the agents' open asks ([`super::ask::Ask`]).

use serde::{Deserialize, Serialize};

use super::{Call, RequestKind, Rights};
use crate::protocol::AskInfo;

/// The Asks request: the open asks, oldest first.
///
/// # Format
///
/// ```json
/// {"Asks":{"terminal":4}}
/// {"Asks":[{"ask":"a-3f2a…","terminal":4,"kind":"permission","title":"Bash: rm -rf build","options":[…],…}]}
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Asks {
    /// Only this terminal's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal: Option<u64>,
}

impl Call for Asks {
    const KIND: RequestKind = RequestKind::Asks;
    const RIGHTS: Rights = Rights::Anyone;
    const AT_MOST_ONCE: bool = false;
    type Answer = Vec<AskInfo>;
}
