//! The phone's side of the app: the durable facet, through which a phone
//! (Collie) watches the agents and answers their questions (see
//! docs/durable.md). What the phone is shown of each pane is the feed
//! ([`crate::feed`], below this module: it imports nothing of the core).
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

use krad_bus::protocol::StreamMessage;
use krad_durable::tls::{TlsMaterial, TlsSettings};
use krad_durable::wire::{Facet, Peer, Transport, WireCall, WireFuture, new_epoch};
use krad_durable::{DurableServer, socket};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::Core;
use crate::config::DurableConfig;
use crate::feed::events::ItemKind;

/// The environment variable Collie and the app read the socket path from.
pub const SOCKET_ENV: &str = "COLLIE_DURABLE_SOCKET";

/// The app behind the facet.
pub(crate) struct AppFacet {
    core: Arc<Core>,
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
        self.core.store.rev() + self.core.feed.rev()
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
pub(crate) async fn start(core: &Arc<Core>) -> Result<Option<Durable>, String> {
    let Some(config) = core.settings.config.durable.clone() else {
        return Ok(None);
    };
    let dir = core.settings.state_dir.join("durable");
    core.feed
        .enable(&dir)
        .map_err(|e| format!("cannot prepare {}: {e}", dir.display()))?;
    core.asks.tell(core.feed.clone());
    let facet = Arc::new(AppFacet {
        core: core.clone(),
        epoch: new_epoch(),
        ready: AtomicBool::new(false),
        name: config.name.clone().unwrap_or_else(|| {
            core.settings
                .root
                .file_name()
                .map_or_else(|| "krad".to_owned(), |n| n.to_string_lossy().into_owned())
        }),
    });
    let server = DurableServer::new(facet.clone());
    let mut tasks = vec![tokio::spawn(follow(core.clone()))];
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
async fn follow(core: Arc<Core>) {
    let mut revs = core.store.revs();
    let mut last = core.store.rev();
    for record in core.store.list(None) {
        observe(&core, &record).await;
    }
    loop {
        let (messages, rev) = core.store.changes_since(last, None);
        last = rev;
        for message in messages {
            match message {
                StreamMessage::Agent(record) => observe(&core, &record).await,
                StreamMessage::Removed(removed) => core.feed.removed(removed.terminal),
                StreamMessage::Snapshot(snapshot) => {
                    for record in &snapshot.agents {
                        observe(&core, record).await;
                    }
                }
                StreamMessage::Heartbeat(_) | StreamMessage::ShuttingDown => {}
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
async fn observe(core: &Arc<Core>, record: &krad_bus::protocol::AgentRecord) {
    let asking = core.asks.has_open(record.terminal);
    let observed = core.feed.observe(record, asking);
    if observed.turn_ended && !observed.replied {
        // An agent without hooks says nothing at the end of its turn: the
        // phone reads what its screen shows instead.
        let terminal = core.store.with(record.terminal, |e| e.terminal.clone());
        if let Some(screen) = terminal.map(|t| t.snapshot(0).screen) {
            let lines: Vec<&str> = screen.lines().map(str::trim_end).collect();
            let end = lines
                .iter()
                .rposition(|l| !l.is_empty())
                .map_or(0, |i| i + 1);
            let text = lines[end.saturating_sub(SCREEN_LINES)..end].join("\n");
            if !text.trim().is_empty() {
                core.feed.item(record.terminal, ItemKind::Code, &text);
            }
        }
    }
    for text in observed.queued {
        if let Err(e) = calls::type_text(core, record.terminal, &text).await {
            tracing::warn!(
                terminal = record.terminal,
                "a queued text was not typed: {}",
                e.message
            );
        }
    }
}
