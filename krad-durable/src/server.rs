//! The accept loops: the private Unix socket and TLS, one hyper HTTP/1.1
//! connection task per caller, every request answered by the routes of `http`.

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::http::{self, Connection, Shared};
use crate::request_ids::RequestIds;
use crate::socket;
use crate::tls::Token;
use crate::wire::{Facet, Peer, Transport};

/// Connections served at once per transport; past it a caller waits for a slot.
const MAX_CONNECTIONS: usize = 256;
/// The read buffer of a connection, which a request's head must fit in.
const HEAD_BYTES: usize = 64 * 1024;
/// Time for a request's head to arrive, and for a TLS handshake.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// The durable facet's server; it serves one app on any number of listeners.
pub struct DurableServer {
    shared: Arc<Shared>,
}

impl DurableServer {
    /// A server for `facet`, with empty request-id logs (a new epoch), one per
    /// transport.
    pub fn new(facet: Arc<dyn Facet>) -> DurableServer {
        DurableServer {
            shared: Arc::new(Shared {
                facet,
                socket_ids: Arc::new(RequestIds::default()),
                tls_ids: Arc::new(RequestIds::default()),
                told: Mutex::new(HashSet::new()),
                callers: socket::Callers::default(),
            }),
        }
    }

    /// Serves the private socket until the task is aborted. A caller that is
    /// one of the app's own descendants (an agent in one of its terminals) gets
    /// 403 `caller-refused` on every request: an agent must never answer its
    /// own ask.
    pub fn serve_socket(&self, listener: UnixListener) -> JoinHandle<()> {
        let shared = self.shared.clone();
        tokio::spawn(accept_loop("socket", listener, move |stream| {
            let shared = shared.clone();
            // The caller is looked at in the connection's own task: the walk
            // up its parents reads /proc and must not hold up accepts.
            async move {
                let connection = Arc::new(Connection {
                    caller: Peer {
                        transport: Transport::Socket,
                    },
                    token: None,
                    refused: refusal(&shared.callers, &stream),
                });
                serve_connection(shared, connection, stream).await;
            }
        }))
    }

    /// Serves TLS until the task is aborted. Every request must carry
    /// `Authorization: Bearer <token>`, checked before anything else.
    pub fn serve_tls(
        &self,
        listener: TcpListener,
        acceptor: TlsAcceptor,
        token: Token,
    ) -> JoinHandle<()> {
        let shared = self.shared.clone();
        let token = Arc::new(token);
        tokio::spawn(accept_loop("TLS", listener, move |stream| {
            let connection = Arc::new(Connection {
                caller: Peer {
                    transport: Transport::Tls,
                },
                token: Some(token.clone()),
                refused: None,
            });
            let shared = shared.clone();
            let acceptor = acceptor.clone();
            async move {
                match tokio::time::timeout(HEAD_TIMEOUT, acceptor.accept(stream)).await {
                    Ok(Ok(tls)) => serve_connection(shared, connection, tls).await,
                    Ok(Err(e)) => tracing::debug!("durable TLS: handshake failed: {e}"),
                    Err(_) => tracing::debug!("durable TLS: handshake timed out"),
                }
            }
        }))
    }
}

/// What [`accept_loop`] accepts from.
trait Listener {
    type Stream;
    async fn accept_stream(&self) -> std::io::Result<Self::Stream>;
}

impl Listener for UnixListener {
    type Stream = tokio::net::UnixStream;
    async fn accept_stream(&self) -> std::io::Result<Self::Stream> {
        self.accept().await.map(|(stream, _)| stream)
    }
}

impl Listener for TcpListener {
    type Stream = tokio::net::TcpStream;
    async fn accept_stream(&self) -> std::io::Result<Self::Stream> {
        self.accept().await.map(|(stream, _)| stream)
    }
}

/// Accepts connections, at most [`MAX_CONNECTIONS`] served at once, each on a
/// task of its own running what `serve` makes of it.
async fn accept_loop<L, M, C>(transport: &'static str, listener: L, mut serve: M)
where
    L: Listener,
    M: FnMut(L::Stream) -> C,
    C: Future<Output = ()> + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        match listener.accept_stream().await {
            Ok(stream) => {
                let connection = serve(stream);
                tokio::spawn(async move {
                    connection.await;
                    drop(slot);
                });
            }
            Err(e) => {
                tracing::warn!("durable {transport}: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Why a socket caller is refused: it is one of the app's own agents (or its
/// process cannot be told).
fn refusal(callers: &socket::Callers, stream: &tokio::net::UnixStream) -> Option<String> {
    match stream.peer_cred().ok().and_then(|c| c.pid()) {
        Some(pid) if callers.is_own(pid) => Some(format!(
            "process {pid} runs inside this app (one of its terminals); \
                 an agent may not answer or steer through the facet"
        )),
        Some(_) => None,
        None => Some("the caller's process could not be told (no peer credentials)".to_owned()),
    }
}

async fn serve_connection<S>(shared: Arc<Shared>, connection: Arc<Connection>, stream: S)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |request| {
        let shared = shared.clone();
        let connection = connection.clone();
        async move { Ok::<_, std::convert::Infallible>(http::handle(shared, connection, request).await) }
    });
    let served = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .keep_alive(true)
        // A caller that shuts its write side after the request still gets it
        // carried out (and answered, if it still reads).
        .half_close(true)
        // Request heads are small; a huge one is refused (431), not buffered.
        .max_buf_size(HEAD_BYTES)
        .serve_connection(TokioIo::new(stream), service)
        .await;
    if let Err(e) = served {
        tracing::debug!("durable facet: connection ended: {e}");
    }
}
