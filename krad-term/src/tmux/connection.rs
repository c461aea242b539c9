//! The control client: one `tmux -C attach-session` process per host, started
//! with its reader thread and its watchdog, and what they share.

use std::collections::HashMap;
use std::process::{Child, Stdio};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};

use nix::unistd::Pid;

use crate::SpawnError;

use super::control::Control;
use super::reader::Reader;
use super::{REPLY_TIMEOUT, SESSION, TmuxHost, lock, watcher};

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
}

impl Connection {
    pub(super) fn start(host: &TmuxHost) -> Result<Arc<Connection>, SpawnError> {
        let mut client = host
            .command()
            .args(["-C", "attach-session", "-t", &format!("={SESSION}")])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| SpawnError::Host(format!("cannot start a tmux client: {e}")))?;
        let (Some(stdin), Some(stdout)) = (client.stdin.take(), client.stdout.take()) else {
            let _ = client.kill();
            let _ = client.wait();
            return Err(SpawnError::Host("the tmux client has no pipes".into()));
        };
        let server = host
            .run(&["display-message", "-p", "#{pid}"])
            .ok()
            .and_then(|pid| pid.trim().parse::<i32>().ok())
            .map(Pid::from_raw);
        let connection = Arc::new(Connection {
            socket: host.socket.clone(),
            control: Control::new(stdin),
            client: Mutex::new(Some(client)),
            server,
            followed: Mutex::new(HashMap::new()),
        });
        let (attached, attached_rx) = std_mpsc::channel();
        let reader = Reader::new(Arc::clone(&connection), attached);
        let thread = std::thread::Builder::new()
            .name("krad-tmux".into())
            .spawn(move || reader.run(stdout));
        if let Err(error) = thread {
            connection.end();
            return Err(SpawnError::Host(format!(
                "cannot start the tmux reader: {error}"
            )));
        }
        // Commands sent before the client is attached could run before it is:
        // the output they cause would not reach it.
        if attached_rx.recv_timeout(REPLY_TIMEOUT).is_err() {
            connection.end();
            return Err(SpawnError::Host(format!(
                "the tmux client did not attach to the session {SESSION}"
            )));
        }
        let watched = Arc::downgrade(&connection);
        if let Err(error) = std::thread::Builder::new()
            .name("krad-tmux-watch".into())
            .spawn(move || watcher::watch(&watched))
        {
            tracing::warn!(%error, "cannot watch the tmux terminals' programs");
        }
        Ok(connection)
    }

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
