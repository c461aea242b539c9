//! The embedded app that `krad serve` runs behind the bus: it hosts terminals
//! and tells the truth about the agents in them.
//!
//! * [`config`] and [`profile`] — the config file and the profiles it defines.
//! * [`store`] — the one state store (records, revs, the change index), with
//!   [`records`] for what survives a restart.
//! * [`watcher`] — one task per terminal turning its events into agent states.
//! * `app` — the composition root: `EmbeddedApp` builds the `Core` (lib.rs),
//!   restores, serves and shuts down.
//! * `requests` — how the bus reaches the app: one adapter per request (check
//!   the caller's scope, call the domain, answer), and the `App` impl.
//! * `spawning` — starting an agent on a new terminal (Spawn, each variant).
//! * `environments` — worktrees, their setup, archives, variant groups
//!   (running and picking them), garbage collection.
//! * `attacher` — one client attached to a terminal; `subscription` — the
//!   SubscribeAgents stream.
//! * `adopt` — taking back, after a restart, the terminals a restart-safe
//!   host (tmux) kept running.

mod adopt;
mod announced;
mod app;
mod asking;
mod asks;
mod attacher;
mod budget;
pub mod cgroup;
mod closing;
pub mod config;
mod crash_point;
mod environments;
mod extensions;
mod feed;
mod git;
mod hosts;
mod input;
mod intents;
mod launching;
mod leftovers;
mod limits;
mod notify;
mod phone;
pub mod port_registry;
mod prices;
mod profile;
mod program;
mod queue;
mod records;
mod recovery;
mod remote_tmux;
mod reports;
mod requests;
mod run_variants;
pub mod sampling;
pub mod sandbox;
mod screen_questions;
mod sending;
mod spawning;
mod spend;
mod state_db;
mod store;
mod subscription;
mod transcripts;
pub mod usage;
mod waiting;
mod watcher;

pub use config::Settings;
pub use phone::{Durable, Readiness, SOCKET_ENV as DURABLE_SOCKET_ENV, TlsListening};
pub use subscription::AgentStream;

use std::sync::Arc;

use krad_bus::protocol::{ApiError, ErrorCode};
use krad_bus::server::request_log::RequestLog;

use krad_bus::token::Secret;
use krad_term::TerminalHost;

use crate::profile::Profiles;
use crate::store::Store;

/// The app `krad serve` runs: built, restored and shut down by [`app`] (the
/// composition root); each request it answers is an
/// `impl Handle<TheRequest> for EmbeddedApp` in `requests/`.
pub struct EmbeddedApp {
    core: Arc<Core>,
}

impl EmbeddedApp {
    /// Starts the app: reads its state, prepares its directories.
    ///
    /// `host` runs the terminals — unless the config says `[terminals] host =
    /// "tmux"`: then they live in a tmux server of the app's own, named after the
    /// repository, and outlive the app (see [`EmbeddedApp::restore`]).
    pub fn new(
        settings: Settings,
        host: Arc<dyn TerminalHost>,
        secret: Arc<Secret>,
    ) -> Result<EmbeddedApp, StartError> {
        app::new(settings, host, secret)
    }

    /// Starts the durable facet when the config has `[durable]`: binds its
    /// socket and TLS listener, answering `503 starting` until
    /// [`Durable::set_ready`] (call it after [`EmbeddedApp::restore`]).
    pub async fn start_durable(&self) -> Result<Option<Durable>, StartError> {
        phone::start(&self.core).await.map_err(StartError)
    }

    /// The repository the app serves (the `main` environment).
    pub fn root(&self) -> &std::path::Path {
        &self.core.settings.root
    }

    /// Brings the app's records and the worktrees on disk back in line after a
    /// start (or a crash); call once before serving. Returns the other bus
    /// endpoints that terminals taken back were given (by an earlier run on
    /// another port): serve the bus there too, so that their `krad` calls reach
    /// this app.
    pub async fn restore(&self) -> Vec<std::net::SocketAddr> {
        app::restore(self).await
    }

    /// Stops the app's work before the process exits: closes every terminal
    /// (unless asked not to) and removes the token files.
    pub async fn shutdown(&self, close_terminals: bool) {
        app::shutdown(self, close_terminals).await;
    }

    /// The app over its core, for the app's own calls of its handlers (the
    /// durable facet's).
    pub(crate) fn over(core: &Arc<Core>) -> EmbeddedApp {
        EmbeddedApp { core: core.clone() }
    }
}

/// Why the app could not start.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StartError(String);

/// The shared core of the app; handlers and watchers hold it.
pub(crate) struct Core {
    pub settings: Arc<Settings>,
    pub profiles: Profiles,
    pub store: Arc<Store>,
    pub host: Arc<dyn TerminalHost>,
    /// The bus's secret, to mint the terminals' tokens.
    pub secret: Arc<Secret>,
    /// The extensions (MCP servers) the config names.
    pub extensions: krad_ext::ExtensionManager,
    /// Terminals being started (their tokens work before they are recorded).
    pub launching: launching::Launching,
    /// The environments: worktrees, their setup, disk use and ports.
    pub environments: Arc<environments::Environments>,
    /// The answers of at-most-once requests, kept with the state.
    pub request_log: RequestLog,
    /// The SSH hosts of the config.
    pub hosts: Arc<hosts::HostLinks>,
    /// The open and recently decided asks.
    pub asks: asks::AskBoard,
    /// What the durable facet shows of each pane (idle unless `[durable]` is on).
    pub feed: Arc<feed::Feed>,
    /// The sandboxes: the bus's socket, their networks, their inbound ports.
    pub sandbox: Arc<sandbox::Sandbox>,
    /// The variant groups' cost limits.
    pub budgets: budget::Budgets,
    /// `[limits]`, the room taken by starts under way, and the queue.
    pub limits: limits::Limits,
}

impl Core {
    /// `not_found` for a terminal.
    pub(crate) fn no_terminal(id: u64) -> ApiError {
        ApiError::new(ErrorCode::NotFound, format!("no terminal {id}"))
            .with_detail(serde_json::json!({ "terminal": id }))
    }
}
