//! The phone's side of the app: the durable facet, through which a phone
//! (Collie) watches the agents and answers their questions (see
//! docs/durable.md). What the phone is shown of each pane is the feed
//! ([`crate::feed`], below this module: it imports nothing of the phone).
//!
//! * `snapshot` — the layout: workspaces, tabs, panes, starters.
//! * `calls` — what each call of the wire does to the app.
//! * this module — the [`Facet`] the `krad-durable` server calls, starting
//!   the listeners, and following the store into the feed.

mod calls;
mod snapshot;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use krad_bus::protocol::{AgentRecord, ApiError, SentInfo, StreamMessage};
use krad_bus::request::close::Close;
use krad_bus::request::rename::Rename;
use krad_bus::request::send::Send as SendText;
use krad_bus::request::spawn::Spawn;
use krad_durable::tls::{TlsMaterial, TlsSettings};
use krad_durable::wire::{Facet, Peer, Transport, WireCall, WireFuture, new_epoch};
use krad_durable::{DurableServer, socket};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::asks::AskBoard;
use crate::config::DurableConfig;
use crate::config::Settings;
use crate::feed::Feed;
use crate::feed::events::ItemKind;
use crate::profile::Profiles;
use crate::store::Store;

/// The environment variable Collie and the app read the socket path from.
pub const SOCKET_ENV: &str = "COLLIE_DURABLE_SOCKET";

/// What the phone's side reaches of the app: the records, what the phone is
/// shown of each pane, the asks, the settings and profiles, and the bus
/// requests it makes. A bundle of handles, built by the composition root;
/// everything under `phone/` takes it.
pub(crate) struct Phone {
    pub(crate) requests: Arc<dyn Requests>,
    pub(crate) settings: Arc<Settings>,
    pub(crate) store: Arc<Store>,
    pub(crate) feed: Arc<Feed>,
    pub(crate) asks: Arc<AskBoard>,
    pub(crate) profiles: Arc<Profiles>,
}

/// A bus request's answer, on its way.
pub(crate) type Answering<'a, T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, ApiError>> + Send + 'a>>;

/// The bus requests the phone makes, answered by the app's own typed
/// handlers as the durable facet ([`krad_bus::token::Principal::Durable`],
/// with Client's rights). The composition root gives them, so that the
/// phone imports nothing above it.
pub(crate) trait Requests: Send + Sync {
    fn spawn(&self, request: Spawn) -> Answering<'_, AgentRecord>;
    fn send(&self, request: SendText) -> Answering<'_, SentInfo>;
    fn rename(&self, request: Rename) -> Answering<'_, AgentRecord>;
    fn close(&self, request: Close) -> Answering<'_, ()>;
}

/// The app behind the facet.
pub(crate) struct AppFacet {
    phone: Arc<Phone>,
    epoch: String,
    ready: AtomicBool,
    name: String,
}

impl Facet for AppFacet {
    fn epoch(&self) -> &str {
        &self.epoch
    }

    fn ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    fn rev(&self) -> u64 {
        self.phone.store.rev() + self.phone.feed.rev()
    }

    fn host_name(&self) -> String {
        self.name.clone()
    }

    fn caps(&self, caller: &Peer) -> Value {
        json!({
            "asks": true,
            "answer": true,
            "send": true,
            "abort": true,
            "actions": true,
            "rename": true,
            "close": true,
            "starters": true,
            "conversations": true,
            "reopen": true,
            "resume": true,
            "allowAlways": caller.transport == Transport::Socket,
        })
    }

    fn call(self: Arc<Self>, call: WireCall, caller: Peer) -> WireFuture {
        Box::pin(async move { calls::run(&self, call, caller).await })
    }
}

/// The facet, started: what `krad serve` announces, and stops.
pub struct Durable {
    facet: Arc<AppFacet>,
    tasks: Vec<JoinHandle<()>>,
    bound: Option<socket::BoundSocket>,
    /// The socket it serves, if any.
    pub socket: Option<PathBuf>,
    /// The TLS listener, if any.
    pub tls: Option<TlsListening>,
}

/// Sets the facet ready (see [`Durable::readiness`]).
pub struct Readiness(Arc<AppFacet>);

impl Readiness {
    /// Calls other than hello are served from now.
    pub fn set(&self) {
        self.0.ready.store(true, Ordering::SeqCst);
    }
}

/// What the TLS listener is.
pub struct TlsListening {
    /// Where it listens.
    pub address: std::net::SocketAddr,
    /// The certificate's SHA-256 fingerprint (pin it in Collie).
    pub fingerprint: String,
    /// The certificate file.
    pub cert: PathBuf,
    /// The file holding the bearer token (never printed).
    pub token_file: PathBuf,
}

impl Durable {
    /// Says the panes are laid out: calls other than hello are served from now.
    pub fn set_ready(&self) {
        self.readiness().set();
    }

    /// A handle that says the panes are laid out, for later.
    pub fn readiness(&self) -> Readiness {
        Readiness(self.facet.clone())
    }

    /// Stops the listeners and removes the socket file.
    pub fn stop(self) {
        for task in &self.tasks {
            task.abort();
        }
        if let Some(bound) = &self.bound {
            bound.remove_if_ours();
        }
    }
}

/// Starts the facet the config asks for; `None` when `[durable]` is absent.
/// WireCall before `restore`, and [`Durable::set_ready`] after it.
pub(crate) async fn start(phone: &Arc<Phone>) -> Result<Option<Durable>, String> {
    let Some(config) = phone.settings.config.durable.clone() else {
        return Ok(None);
    };
    let dir = phone.settings.state_dir.join("durable");
    phone
        .feed
        .enable(&dir)
        .map_err(|e| format!("cannot prepare {}: {e}", dir.display()))?;
    phone.asks.tell(phone.feed.clone());
    let facet = Arc::new(AppFacet {
        phone: phone.clone(),
        epoch: new_epoch(),
        ready: AtomicBool::new(false),
        name: config.name.clone().unwrap_or_else(|| {
            phone
                .settings
                .root
                .file_name()
                .map_or_else(|| "krad".to_owned(), |n| n.to_string_lossy().into_owned())
        }),
    });
    let server = DurableServer::new(facet.clone());
    let mut tasks = vec![tokio::spawn(follow(phone.clone()))];
    let mut bound = None;
    let socket = match socket_path(&config)? {
        Some(path) => {
            let (listener, socket) =
                socket::bind_private_tracked(&path).map_err(|e| e.to_string())?;
            tasks.push(server.serve_socket(listener));
            bound = Some(socket);
            Some(path)
        }
        None => None,
    };
    let tls = match &config.tls {
        Some(tls) => {
            let TlsMaterial {
                acceptor,
                fingerprint,
                cert_path,
                token,
                token_path,
                ..
            } = krad_durable::tls::prepare(&TlsSettings {
                listen: tls.listen,
                token_file: tls.token_file.clone(),
                cert: tls.cert.clone(),
                key: tls.key.clone(),
                state_dir: dir.clone(),
            })
            .map_err(|e| e.to_string())?;
            let listener = tokio::net::TcpListener::bind(tls.listen)
                .await
                .map_err(|e| format!("cannot listen for TLS on {}: {e}", tls.listen))?;
            let address = listener
                .local_addr()
                .map_err(|e| format!("cannot read the TLS address: {e}"))?;
            tasks.push(server.serve_tls(listener, acceptor, token));
            Some(TlsListening {
                address,
                fingerprint,
                cert: cert_path,
                token_file: token_path,
            })
        }
        None => None,
    };
    Ok(Some(Durable {
        facet,
        tasks,
        bound,
        socket,
        tls,
    }))
}

/// `$COLLIE_DURABLE_SOCKET`, else the config's, else one under `~/.krad-ade/durable`.
fn socket_path(config: &DurableConfig) -> Result<Option<PathBuf>, String> {
    if config.serve_socket == Some(false) {
        return Ok(None);
    }
    let path = match std::env::var_os(SOCKET_ENV).filter(|v| !v.is_empty()) {
        Some(path) => PathBuf::from(path),
        None => match &config.socket {
            Some(path) => path.clone(),
            None => {
                let home = std::env::var_os("HOME")
                    .filter(|h| !h.is_empty())
                    .ok_or("HOME is not set: give [durable] socket in the config")?;
                PathBuf::from(home).join(".krad-ade/durable/durable.sock")
            }
        },
    };
    socket::check_path(&path).map_err(|e| e.to_string())?;
    Ok(Some(path))
}

/// Follows the store into the feed: every agent change, every removal.
async fn follow(phone: Arc<Phone>) {
    let mut revs = phone.store.revs();
    let mut last = phone.store.rev();
    for record in phone.store.list(None) {
        observe(&phone, &record).await;
    }
    loop {
        let (messages, rev) = phone.store.changes_since(last, None);
        last = rev;
        for message in messages {
            match message {
                StreamMessage::Agent(record) => observe(&phone, &record).await,
                StreamMessage::Removed(removed) => phone.feed.removed(removed.terminal),
                StreamMessage::Snapshot(snapshot) => {
                    for record in &snapshot.agents {
                        observe(&phone, record).await;
                    }
                }
                StreamMessage::Heartbeat(_)
                | StreamMessage::Sampled(_)
                | StreamMessage::ShuttingDown => {}
            }
        }
        if revs.changed().await.is_err() {
            return;
        }
    }
}

/// Lines of the screen a turn's end shows when the agent gave no reply.
const SCREEN_LINES: usize = 40;

/// One agent's change into the feed; types what was queued for its next turn.
async fn observe(phone: &Arc<Phone>, record: &krad_bus::protocol::AgentRecord) {
    let asking = phone.asks.has_open(record.terminal);
    let observed = phone.feed.observe(record, asking);
    if observed.turn_ended && !observed.replied {
        // An agent without hooks says nothing at the end of its turn: the
        // phone reads what its screen shows instead.
        let terminal = phone.store.with(record.terminal, |e| e.terminal.clone());
        if let Some(screen) = terminal.map(|t| t.snapshot(0).screen) {
            let lines: Vec<&str> = screen.lines().map(str::trim_end).collect();
            let end = lines
                .iter()
                .rposition(|l| !l.is_empty())
                .map_or(0, |i| i + 1);
            let text = lines[end.saturating_sub(SCREEN_LINES)..end].join("\n");
            if !text.trim().is_empty() {
                phone.feed.item(record.terminal, ItemKind::Code, &text);
            }
        }
    }
    for text in observed.queued {
        if let Err(e) = calls::type_text(phone, record.terminal, &text).await {
            tracing::warn!(
                terminal = record.terminal,
                "a queued text was not typed: {}",
                e.message
            );
        }
    }
}
