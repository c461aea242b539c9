//! `Shutdown`: stops the app cleanly. Only `Client` may ask.

use super::{Call, RequestKind, Rights};
use serde::{Deserialize, Serialize};

/// The Shutdown request.
///
/// # Format
///
/// ```json
/// {"Shutdown":{"close_terminals":true}}
/// "Ok"
/// ```
///
/// After answering, the app closes its terminals (unless `close_terminals` is
/// false), removes api.json and exits.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Shutdown {
    /// Close every terminal before exiting (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub close_terminals: Option<bool>,
}

impl Shutdown {
    /// Whether the app should close its terminals on the way out.
    pub fn closes_terminals(&self) -> bool {
        self.close_terminals.unwrap_or(true)
    }
}

impl Call for Shutdown {
    const KIND: RequestKind = RequestKind::Shutdown;
    const RIGHTS: Rights = Rights::ClientOnly;
    const AT_MOST_ONCE: bool = true;
    type Answer = ();
}
