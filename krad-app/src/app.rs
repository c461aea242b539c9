//! The composition root, with handles.rs: [`EmbeddedApp`] starts the app
//! (its [`Core`] makes every domain's handle once), restores what a restart
//! left, wires the phone to the app's own handlers, and shuts down. Nothing imports it but requests/ (its handlers, which take
//! the handles they need from the `Core`); the domains below never do.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use krad_bus::protocol::{AgentRecord, SentInfo};
use krad_bus::request::close::Close;
use krad_bus::request::rename::Rename;
use krad_bus::request::send::Send as SendText;
use krad_bus::request::spawn::Spawn;
use krad_bus::server::{CallContext, Handle};
use krad_bus::token::{Principal, Secret};
use krad_term::TerminalHost;

use crate::config::Settings;
use crate::handles::Core;
use crate::phone::{self, Answering, Durable, Phone};
use crate::{
    adopt, checks, config, environments, leftovers, notify, queue, recovery, sampling, transcripts,
};

/// The app `krad serve` runs: built, restored and shut down here; each
/// request it answers is an `impl Handle<TheRequest> for EmbeddedApp` in
/// `requests/`.
#[derive(Clone)]
pub struct EmbeddedApp {
    core: Arc<Core>,
}

/// Why the app could not start.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StartError(String);

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
        let core = Core::build(settings, host, secret).map_err(StartError)?;
        Ok(EmbeddedApp {
            core: Arc::new(core),
        })
    }

    /// Starts the durable facet when the config has `[durable]`: binds its
    /// socket and TLS listener, answering `503 starting` until
    /// [`Durable::set_ready`] (call it after [`EmbeddedApp::restore`]).
    pub async fn start_durable(&self) -> Result<Option<Durable>, StartError> {
        let core = &self.core;
        let phone = Arc::new(Phone {
            requests: Arc::new(self.clone()),
            settings: core.settings().clone(),
            store: core.store().clone(),
            feed: core.feed().clone(),
            asks: core.asks().clone(),
            profiles: core.profiles().clone(),
        });
        phone::start(&phone).await.map_err(StartError)
    }

    /// The repository the app serves (the `main` environment).
    pub fn root(&self) -> &Path {
        &self.core.settings().root
    }

    /// Brings the app's records and the worktrees on disk back in line after a
    /// start (or a crash); call once before serving. Returns the other bus
    /// endpoints that terminals taken back were given (by an earlier run on
    /// another port): serve the bus there too, so that their `krad` calls reach
    /// this app.
    pub async fn restore(&self) -> Vec<SocketAddr> {
        restore(self).await
    }

    /// Stops the app's work before the process exits: closes every terminal
    /// (unless asked not to) and removes the token files.
    pub async fn shutdown(&self, close_terminals: bool) {
        shutdown(self, close_terminals).await;
    }

    /// The app's core, for its handlers in `requests/`.
    pub(crate) fn core(&self) -> &Arc<Core> {
        &self.core
    }
}

/// The phone's requests, answered by the app's own handlers as the durable
/// facet, with Client's rights.
impl phone::Requests for EmbeddedApp {
    fn spawn(&self, request: Spawn) -> Answering<'_, AgentRecord> {
        Box::pin(async move { self.handle(&as_phone(), request).await })
    }
    fn send(&self, request: SendText) -> Answering<'_, SentInfo> {
        Box::pin(async move { self.handle(&as_phone(), request).await })
    }
    fn rename(&self, request: Rename) -> Answering<'_, AgentRecord> {
        Box::pin(async move { self.handle(&as_phone(), request).await })
    }
    fn close(&self, request: Close) -> Answering<'_, ()> {
        Box::pin(async move { self.handle(&as_phone(), request).await })
    }
}

/// The phone's calls: as [`Principal::Durable`], never at most once by id.
fn as_phone() -> CallContext {
    CallContext {
        principal: Principal::Durable,
        request_id: None,
        once: None,
    }
}

/// Brings the app's records and the worktrees on disk back in line after a
/// start (or a crash); call once before serving. Returns the other bus
/// endpoints that terminals taken back were given (by an earlier run on
/// another port): serve the bus there too, so that their `krad` calls reach
/// this app.
async fn restore(app: &EmbeddedApp) -> Vec<SocketAddr> {
    let core = &app.core;
    environments::restore(core.environments()).await;
    environments::ports::restore(core.environments());
    let endpoints = adopt::restore(core.spawner()).await;
    // The queued terminals on record again before the intents are
    // settled: a queued Spawn's retry is answered with its record.
    queue::reload(core.spawner());
    recovery::recover(core.spawner(), &core.closer(), core.request_log()).await;
    tokio::spawn(queue::run(Arc::downgrade(core.spawner())));
    core.checks().restore();
    tokio::spawn(checks::watch_agents(core.checks().weak()));
    transcripts::prune_in_background(core.settings(), core.store()).await;
    leftovers::clean(core.settings(), core.store()).await;
    notify::start(core.settings().config.notify.as_ref(), core.store());
    environments::disk::start(core.environments());
    tokio::spawn(sampling::run(
        sampling::Sampled::new(core.store(), core.hosts(), core.budgets()),
        core.settings().config.prices.clone(),
    ));
    endpoints
}

/// Stops the app's work before the process exits: closes every terminal
/// (unless asked not to) and removes the token files.
async fn shutdown(app: &EmbeddedApp, close_terminals: bool) {
    let core = &app.core;
    // Nothing starts from the queue as the terminals end: it is kept for
    // the next run.
    core.limits().queue().stop();
    let terminals = core.store().terminals();
    if close_terminals {
        for terminal in &terminals {
            terminal.close(config::CLOSE_GRACE);
        }
        let deadline = tokio::time::Instant::now() + config::CLOSE_GRACE + Duration::from_secs(1);
        while terminals.iter().any(|t| t.exit_status().is_none())
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    core.extensions().shutdown().await;
    core.hosts().shutdown(close_terminals).await;
    core.store().release_terminal_ids();
    let restart_safe = core.host().restart_safe();
    if close_terminals && !restart_safe {
        // Closed by this stop, as Close would: not lost.
        core.store().forget_local_kept();
    }
    if close_terminals || !restart_safe {
        let _ = std::fs::remove_dir_all(&core.settings().token_dir);
        // Those of the terminals taken back from an app before this one.
        leftovers::token_folders_at_stop(core.settings());
    }
    // Otherwise the terminals kept running read their token files there
    // (a sandbox binds its file): the next app writes them again in
    // place, and cleans the folder once no terminal uses it.
    tracing::info!(terminals = terminals.len(), close_terminals, "app stopped");
}
