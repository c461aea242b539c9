//! The baselines: minimal loopback servers on the same tokio runtime as krad,
//! started by the harness as a process of their own (`krad-bench baseline-server`)
//! so that they compete with the load generator exactly as the app does.
//!
//! * `line`: accept, read a line, write a fixed line, close — the physical limit
//!   of one request per connection.
//! * `hold`: like `line`, but each connection waits until a `RELEASE` line arrives
//!   on another connection — the cost of a held waiter.
//! * `fanout`: a `SUB` connection gets every line that a `PUB <line>` connection
//!   publishes (a tokio broadcast channel) — the cost of a stream.

use std::net::SocketAddr;
use std::process::{Child, Command};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{broadcast, watch};

/// The kinds of baseline server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Mode {
    /// One line in, a fixed line out, close.
    Line,
    /// Hold each connection until released.
    Hold,
    /// Publish/subscribe.
    Fanout,
}

/// A baseline server process.
pub(crate) struct Baseline {
    child: Child,
    /// Its address.
    pub endpoint: SocketAddr,
    /// Its pid.
    pub pid: u32,
}

impl Baseline {
    /// Starts `krad-bench baseline-server` answering `reply_bytes`-long lines.
    pub(crate) fn start(mode: Mode, reply_bytes: usize) -> anyhow::Result<Baseline> {
        let exe = std::env::current_exe()?;
        let mode = match mode {
            Mode::Line => "line",
            Mode::Hold => "hold",
            Mode::Fanout => "fanout",
        };
        let (child, first) = crate::util::start_server(
            Command::new(exe)
                .args(["baseline-server", "--mode", mode, "--reply-bytes"])
                .arg(reply_bytes.to_string()),
        )?;
        let endpoint = first
            .trim()
            .parse()
            .with_context(|| format!("baseline server printed {first:?}"))?;
        let pid = child.id();
        Ok(Baseline {
            child,
            endpoint,
            pid,
        })
    }
}

impl Drop for Baseline {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A reply of `bytes` bytes, `\n` included, shaped like a JSON answer.
pub(crate) fn reply_of(bytes: usize) -> Vec<u8> {
    let head = br#"{"Hello":{"pad":""#;
    let tail = b"\"}}\n";
    let pad = bytes.saturating_sub(head.len() + tail.len()).max(1);
    let mut line = head.to_vec();
    line.extend(std::iter::repeat_n(b'x', pad));
    line.extend_from_slice(tail);
    line
}

/// Runs a baseline server until killed: prints its address, then serves.
pub(crate) fn serve(mode: Mode, reply_bytes: usize) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    // The accept loop runs on a worker, as krad's does: a connection's task
    // then starts on the worker that accepted it, with no thread to wake.
    runtime.block_on(async move { tokio::spawn(accept_loop(mode, reply_bytes)).await? })
}

async fn accept_loop(mode: Mode, reply_bytes: usize) -> anyhow::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    println!("{}", listener.local_addr()?);
    let reply: Arc<[u8]> = reply_of(reply_bytes).into();
    let (release, released) = watch::channel(false);
    let release = Arc::new(release);
    let (publish, _) = broadcast::channel::<Arc<[u8]>>(1024);
    let held = Arc::new(AtomicU64::new(0));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let reply = reply.clone();
        match mode {
            Mode::Line => {
                tokio::spawn(line_conn(stream, reply));
            }
            Mode::Hold => {
                tokio::spawn(hold_conn(
                    stream,
                    reply,
                    release.clone(),
                    released.clone(),
                    held.clone(),
                ));
            }
            Mode::Fanout => {
                tokio::spawn(fanout_conn(stream, publish.clone(), held.clone()));
            }
        }
    }
}

async fn read_line(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::with_capacity(256);
    loop {
        if buf.len() > 64 * 1024 {
            return None;
        }
        let n = stream.read_buf(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        if let Some(i) = memchr::memchr(b'\n', &buf) {
            buf.truncate(i);
            return Some(buf);
        }
    }
}

async fn line_conn(mut stream: TcpStream, reply: Arc<[u8]>) {
    if read_line(&mut stream).await.is_some() {
        let _ = stream.write_all(&reply).await;
    }
}

async fn hold_conn(
    mut stream: TcpStream,
    reply: Arc<[u8]>,
    release: Arc<watch::Sender<bool>>,
    mut released: watch::Receiver<bool>,
    held: Arc<AtomicU64>,
) {
    let Some(line) = read_line(&mut stream).await else {
        return;
    };
    if line.starts_with(b"RELEASE") {
        release.send_replace(true);
        let _ = stream.write_all(b"\"Ok\"\n").await;
    } else if line.starts_with(b"RESET") {
        release.send_replace(false);
        let _ = stream.write_all(b"\"Ok\"\n").await;
    } else if line.starts_with(b"COUNT") {
        let n = held.load(Ordering::Relaxed);
        let _ = stream.write_all(format!("{n}\n").as_bytes()).await;
    } else {
        held.fetch_add(1, Ordering::Relaxed);
        let _ = released.wait_for(|r| *r).await;
        held.fetch_sub(1, Ordering::Relaxed);
        let _ = stream.write_all(&reply).await;
    }
}

async fn fanout_conn(
    mut stream: TcpStream,
    publish: broadcast::Sender<Arc<[u8]>>,
    subscribers: Arc<AtomicU64>,
) {
    let Some(line) = read_line(&mut stream).await else {
        return;
    };
    if let Some(payload) = line.strip_prefix(b"PUB ") {
        let mut message = payload.to_vec();
        message.push(b'\n');
        let _ = publish.send(message.into());
        let _ = stream.write_all(b"\"Ok\"\n").await;
    } else if line.starts_with(b"COUNT") {
        let n = subscribers.load(Ordering::Relaxed);
        let _ = stream.write_all(format!("{n}\n").as_bytes()).await;
    } else {
        let mut messages = publish.subscribe();
        subscribers.fetch_add(1, Ordering::Relaxed);
        let _ = stream.write_all(b"{\"Snapshot\":{}}\n").await;
        loop {
            let message = match messages.recv().await {
                Ok(m) => m,
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => break,
            };
            if stream.write_all(&message).await.is_err() {
                break;
            }
        }
        subscribers.fetch_sub(1, Ordering::Relaxed);
    }
}
