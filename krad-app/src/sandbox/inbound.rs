//! Inbound relays (issue 39): an environment's ports (`KRAD_PORT`,
//! `KRAD_PORTS`) reachable from the machine's 127.0.0.1 when its agents run
//! in sandboxes with a network of their own (`network = "none"` or
//! `"allow"`), where a dev server listens on the sandbox's own loopback.
//!
//! This module owns, per environment on this machine with a port block and
//! at least one such contained terminal, a listener on 127.0.0.1:PORT for
//! each port of the block, and the list of the environment's contained
//! terminals with their inbound sockets. Each accepted connection is passed
//! through a terminal's inbound socket (`<state dir>/sandbox/<id>.in/in.sock`,
//! in a 0700 folder bound into the sandbox, where `krad internal sandboxed
//! --inbound` listens): the app sends the port ([`header`]), the inner end
//! connects to it on the sandbox's loopback and answers one byte ([`OK`] or
//! [`REFUSED`]), and then the bytes are copied both ways. The terminals are
//! tried newest first until one answers [`OK`]; when none does, the client's
//! connection is closed at once (it reads EOF), never left hanging.
//!
//! A port the machine already uses is logged and skipped. The listeners stop
//! when the environment's last contained terminal is forgotten (its Close, or
//! a Spawn that failed). Terminals on SSH hosts are not served here.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixStream};

/// The inner end's answer: connected to the port inside.
pub const OK: u8 = 0;
/// The inner end's answer: nothing listens on the port inside.
pub const REFUSED: u8 = 1;

/// What the app sends first on an inbound socket: the port, big-endian.
pub fn header(port: u16) -> [u8; 2] {
    port.to_be_bytes()
}

/// How long a terminal's inbound socket may take to answer (it only connects
/// on its own loopback; the slack is for a loaded machine).
const ANSWER: Duration = Duration::from_secs(5);

/// The contained terminals of one environment, oldest first: their ids and
/// inbound sockets. Shared with the listeners' tasks.
type Terminals = Arc<Mutex<Vec<(u64, PathBuf)>>>;

/// One environment's relays.
struct Relays {
    terminals: Terminals,
    /// The ports tried, and the task of each listener bound (aborted with
    /// the last terminal, which drops its listener).
    listeners: Vec<(u16, Option<tokio::task::AbortHandle>)>,
}

/// The inbound relays of every environment that has them, by name.
#[derive(Default)]
pub struct Inbound(Mutex<HashMap<String, Relays>>);

impl Inbound {
    /// Terminal `id` of `environment` runs contained with its own network,
    /// its inner end listening (soon) on `socket`: the environment's `ports`
    /// are relayed to it, listened on from now if they were not. Needs the
    /// runtime (it is called from a Spawn).
    pub(crate) fn add(&self, environment: &str, ports: &[u16], id: u64, socket: PathBuf) {
        if ports.is_empty() {
            return;
        }
        let mut all = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let relays = all.entry(environment.to_owned()).or_insert_with(|| Relays {
            terminals: Terminals::default(),
            listeners: Vec::new(),
        });
        for &port in ports {
            if relays.listeners.iter().all(|(p, _)| *p != port) {
                let task = listen(environment, port, relays.terminals.clone());
                relays.listeners.push((port, task));
            }
        }
        relays
            .terminals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((id, socket));
    }

    /// Forgets terminal `id`; its environment's listeners stop with the last
    /// of its contained terminals.
    pub(crate) fn forget(&self, id: u64) {
        let mut all = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        all.retain(|environment, relays| {
            let mut terminals = relays
                .terminals
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            terminals.retain(|(t, _)| *t != id);
            if !terminals.is_empty() {
                return true;
            }
            tracing::debug!("environment {environment}: no contained terminal left, its ports are not relayed any more");
            for (_, task) in &relays.listeners {
                if let Some(task) = task {
                    task.abort();
                }
            }
            false
        });
    }
}

/// Listens on 127.0.0.1:`port` for `environment`'s sandboxes; None (logged)
/// when the port cannot be bound on the machine.
fn listen(environment: &str, port: u16, terminals: Terminals) -> Option<tokio::task::AbortHandle> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let bound = std::net::TcpListener::bind(addr)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .and_then(TcpListener::from_std);
    let listener = match bound {
        Ok(listener) => listener,
        Err(e) => {
            tracing::warn!(
                "environment {environment}: cannot listen on {addr} for its sandboxes \
                 (something on the machine uses it?): {e}; that port is not relayed in"
            );
            return None;
        }
    };
    let environment = environment.to_owned();
    let task = tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((client, _)) => {
                    tokio::spawn(relay(client, port, terminals.clone()));
                }
                Err(e) => {
                    // Out of descriptors and the like: try again shortly.
                    tracing::warn!("environment {environment}: accepting on {addr}: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    });
    Some(task.abort_handle())
}

/// Passes `client` to the newest terminal that has something on `port`;
/// closes it at once when none has.
async fn relay(mut client: TcpStream, port: u16, terminals: Terminals) {
    let newest_first: Vec<(u64, PathBuf)> = terminals
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .rev()
        .cloned()
        .collect();
    for (id, socket) in newest_first {
        match tokio::time::timeout(ANSWER, open(&socket, port)).await {
            Ok(Ok(mut inside)) => {
                let _ = tokio::io::copy_bidirectional(&mut client, &mut inside).await;
                return;
            }
            Ok(Err(e)) => tracing::debug!("terminal {id}: port {port} inside: {e}"),
            Err(_) => tracing::debug!("terminal {id}: its inbound socket did not answer"),
        }
    }
    tracing::debug!("port {port}: nothing listens on it in the environment's sandboxes");
}

/// Asks the inner end at `socket` for `port`: the stream, once it connected.
async fn open(socket: &std::path::Path, port: u16) -> std::io::Result<UnixStream> {
    let mut inside = UnixStream::connect(socket).await?;
    inside.write_all(&header(port)).await?;
    let mut status = [0u8];
    inside.read_exact(&mut status).await?;
    if status[0] == OK {
        Ok(inside)
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "nothing listens there",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::UnixListener;

    /// An inner end that answers `status` and, when OK, echoes.
    fn inner(dir: &std::path::Path, name: &str, status: u8) -> PathBuf {
        let path = dir.join(name);
        let listener = UnixListener::bind(&path).unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut port = [0u8; 2];
                    if stream.read_exact(&mut port).await.is_err() {
                        return;
                    }
                    let _ = stream.write_all(&[status]).await;
                    if status == OK {
                        let (mut r, mut w) = stream.split();
                        let _ = tokio::io::copy(&mut r, &mut w).await;
                    }
                });
            }
        });
        path
    }

    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    #[tokio::test]
    async fn the_newest_terminal_that_answers_gets_the_connection_and_none_closes_it() {
        let dir = tempfile::tempdir().unwrap();
        let echo = inner(dir.path(), "old.sock", OK);
        let refuses = inner(dir.path(), "new.sock", REFUSED);
        let port = free_port();
        let inbound = Inbound::default();
        inbound.add("web", &[port], 1, echo);
        inbound.add("web", &[port], 2, refuses);
        inbound.add("web", &[port], 3, dir.path().join("gone.sock"));
        let mut client = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        client.write_all(b"ping").await.unwrap();
        let mut echoed = [0u8; 4];
        client.read_exact(&mut echoed).await.unwrap();
        assert_eq!(&echoed, b"ping");
        drop(client);
        inbound.forget(1);
        let mut client = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(10), client.read_to_end(&mut rest))
            .await
            .expect("closed at once");
        assert!(read.map_or(true, |n| n == 0), "{rest:?}");
        inbound.forget(2);
        inbound.forget(3);
        // The listener goes with the last terminal.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            assert!(std::time::Instant::now() < deadline, "still listening");
            tokio::task::yield_now().await;
        }
    }
}
