//! `Hosts` and `CheckHost`: the SSH hosts of the config and their links.
//! (Additions of krad's to the contract, for `krad hosts`.)

use serde::{Deserialize, Serialize};
use std::time::Duration;

use super::{Call, RequestKind, Rights, deadline};
use crate::protocol::HostStatus;

/// The Hosts request (no fields).
///
/// # Format
///
/// ```json
/// "Hosts"
/// {"Hosts":[{"name":"gpu","ssh":"me@gpu-box","root":"/srv/repo","state":"up","tmux":true,"remote_port":40211,
///            "error":null,"since":"…","reconnects":0}]}
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Hosts {}

impl Call for Hosts {
    const KIND: RequestKind = RequestKind::Hosts;
    const RIGHTS: Rights = Rights::Anyone;
    const AT_MOST_ONCE: bool = false;
    type Answer = Vec<HostStatus>;
}

/// The CheckHost request: connects (if needed) and answers the host's state.
///
/// # Format
///
/// ```json
/// {"CheckHost":{"name":"gpu"}}
/// {"Hosts":[{"name":"gpu","state":"up",…}]}
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckHost {
    /// The host's name in the config.
    pub name: String,
}

impl Call for CheckHost {
    const KIND: RequestKind = RequestKind::CheckHost;
    const RIGHTS: Rights = Rights::Anyone;
    const AT_MOST_ONCE: bool = false;
    type Answer = Vec<HostStatus>;

    fn deadline(&self) -> Option<Duration> {
        Some(deadline::LONG)
    }
}
