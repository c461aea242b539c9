//! A terminal's bus token: minted for the terminal (a lead token or a plain one)
//! and written to a private token file. Shared by Spawn, which starts a
//! terminal, and adopt, which takes one back after a restart.

use std::path::Path;

use krad_bus::protocol::{TerminalRef, Token};

use crate::Core;

/// The token a terminal is given: a lead token for a lead terminal.
pub(crate) fn mint(core: &Core, me: &TerminalRef, lead: bool) -> Token {
    let secret = &core.secret;
    if lead {
        secret.lead_token(me)
    } else {
        secret.bus_token(me)
    }
}

/// Writes `bytes` to a new 0600 file at `path`, replacing whatever was there
/// (its directory must exist).
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)
}
