//! Starting the control client: one `tmux -C attach-session` process per host
//! (through ssh for a server on an SSH host), with its reader thread and its
//! watchdog.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};

use nix::unistd::Pid;

use crate::SpawnError;

use super::common::{REPLY_TIMEOUT, SESSION};
use super::connection::Connection;
use super::control::Control;
use super::later::Later;
use super::reader::Reader;
use super::server::Server;
use super::watcher;

/// Starts a control client of `server`'s session (which must exist), its
/// reader and its watchdog; returns once the client is attached.
pub(super) fn start(server: &Server) -> Result<Arc<Connection>, SpawnError> {
    let later = Later::start()
        .map_err(|e| SpawnError::Host(format!("cannot start a thread for the tmux client: {e}")))?;
    let mut client = server
        .command(&["-C", "attach-session", "-t", &format!("={SESSION}")])
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
    let remote = server.place().remote().map(str::to_owned);
    // The server's pid means something here only.
    let server_pid = remote
        .is_none()
        .then(|| server.run(&["display-message", "-p", "#{pid}"]).ok())
        .flatten()
        .and_then(|pid| pid.trim().parse::<i32>().ok())
        .map(Pid::from_raw);
    let connection = Arc::new(Connection {
        socket: server.socket().to_owned(),
        control: Control::new(stdin),
        client: Mutex::new(Some(client)),
        server: server_pid,
        followed: Mutex::new(HashMap::new()),
        later,
        remote,
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
