//! The control client's handle, [`Connection`]: what the reader thread, the
//! watchdog and the terminals' handles share of one `tmux -C` client — its
//! command side, its process, and the programs it follows. Started by `client`.
//! Also [`Slot`], where the host keeps its current client (the terminals reach
//! the client through it: on an SSH host, a new one replaces the one the link
//! took).

use std::collections::HashMap;
use std::io;
use std::process::Child;
use std::sync::{Arc, Mutex};

use nix::unistd::Pid;

use super::common::lock;
use super::control::Control;
use super::later::Later;

/// The host's current control client, if one was started.
pub(super) type Slot = Mutex<Option<Arc<Connection>>>;

/// The live client in `slot`, or why there is none.
pub(super) fn current(slot: &Slot) -> io::Result<Arc<Connection>> {
    lock(slot)
        .as_ref()
        .filter(|c| !c.ended())
        .cloned()
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotConnected,
                "the terminal's tmux client is not running (is the link to its host down?)",
            )
        })
}

/// The control client and what it owes: one per host at a time.
#[derive(Debug)]
pub(super) struct Connection {
    pub(super) socket: String,
    pub(super) control: Control,
    /// The client process, until the reader reaps it.
    pub(super) client: Mutex<Option<Child>>,
    /// The tmux server's process.
    pub(super) server: Option<Pid>,
    /// The programs followed and not yet ended: pane → pid (for the watchdog).
    pub(super) followed: Mutex<HashMap<String, u32>>,
    /// Work for later, off the reader (exit queries, ends).
    pub(super) later: Later,
    /// On an SSH host: the host's name. When the client ends, its terminals
    /// are not ended there (their programs run on) but wait for the next one.
    pub(super) remote: Option<String>,
}

impl Connection {
    pub(super) fn ended(&self) -> bool {
        self.control.closed()
    }

    /// Ends the client (the programs run on in tmux).
    pub(super) fn end(&self) {
        self.control.close();
        if let Some(client) = lock(&self.client).as_mut() {
            let _ = client.kill();
        }
    }
}
