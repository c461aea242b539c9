//! A terminal's bus token: minted for the terminal (a lead token or a plain one)
//! and written to a private token file. Shared by Spawn, which starts a
//! terminal, and adopt, which takes one back after a restart.

use crate::Core;
use krad_bus::protocol::{TerminalRef, Token};

/// The token a terminal is given: a lead token for a lead terminal.
pub(crate) fn mint(core: &Core, me: &TerminalRef, lead: bool) -> Token {
    let secret = &core.secret;
    if lead {
        secret.lead_token(me)
    } else {
        secret.bus_token(me)
    }
}
