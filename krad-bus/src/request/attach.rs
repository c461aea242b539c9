//! `Attach`: a terminal's screen and output, live, with the client's keystrokes
//! and size going back — the second streaming request (section 5).

use serde::{Deserialize, Serialize};

use super::{Call, RequestKind, Rights};
use crate::protocol::Streamed;

/// The Attach request. Rights as Send: Client and lead terminals on any
/// terminal, a plain terminal only on the terminals it spawned in its
/// environment.
///
/// # Format
///
/// ```json
/// {"Attach":{"target":4}}
/// {"Screen":{"terminal":4,"cols":120,"rows":40,"data":"<base64>"}}
/// ```
///
/// Then JSON lines both ways until the program exits (`{"Exited":{…}}`), the
/// client closes, or the app stops: the client sends `{"Input":{"data":…}}` and
/// `{"Resize":{"cols":…,"rows":…}}`, the app `{"Output":{"data":…}}`. See
/// [`AttachMessage`](crate::protocol::AttachMessage) and
/// [`AttachInput`](crate::protocol::AttachInput). The client waits for the first
/// message before it sends anything (the app reads nothing before it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Attach {
    /// The terminal.
    pub target: u64,
}

impl Call for Attach {
    const KIND: RequestKind = RequestKind::Attach;
    const RIGHTS: Rights = Rights::Scoped;
    const AT_MOST_ONCE: bool = false;
    type Answer = Streamed;
}
