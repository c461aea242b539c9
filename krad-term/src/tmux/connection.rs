//! The control client's handle, [`Connection`]: what the reader thread, the
//! watchdog and the terminals' handles share of one `tmux -C` client — its
//! command side, its process, and the programs it follows. Started by `client`.

use std::collections::HashMap;
use std::process::Child;
use std::sync::Mutex;

use nix::unistd::Pid;

use super::common::lock;
use super::control::Control;
use super::later::Later;

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
