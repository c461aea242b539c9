//! The composition root: [`EmbeddedApp`] starts the app — its [`Core`] makes
//! every domain's handle once ([`Core::build`]) and owns no state of its
//! own —, restores what a restart left, wires the phone to the app's own
//! handlers, and shuts down. Nothing imports it but requests/ (its handlers,
//! which take the handles they need from the `Core`); the domains below never
//! do.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use krad_bus::protocol::{AgentRecord, SentInfo};
use krad_bus::request::close::Close;
use krad_bus::request::rename::Rename;
use krad_bus::request::send::Send as SendText;
use krad_bus::request::spawn::Spawn;
use krad_bus::server::request_log::RequestLog;
use krad_bus::server::{CallContext, Handle};
use krad_bus::token::{Principal, Secret};
use krad_term::{TerminalHost, TmuxHost};

use crate::closing::Closer;
use crate::config::{Settings, TerminalHostKind};
use crate::phone::{self, Answering, Durable, Phone};
use crate::profile::Profiles;
use crate::spawning::{Launching, Spawner};
use crate::store::Store;
use crate::watcher::Watching;
use crate::{
    adopt, asks, budget, checks, config, environments, extensions, feed, hosts, leftovers, limits,
    notify, queue, recovery, sampling, sandbox, state_db, store, transcripts,
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

/// Every domain's handle, made once: what the handlers in `requests/` take
/// their handles from. Its fields are private; each has an accessor.
pub(crate) struct Core {
    settings: Arc<Settings>,
    profiles: Arc<Profiles>,
    store: Arc<Store>,
    host: Arc<dyn TerminalHost>,
    /// The extensions (MCP servers) the config names.
    extensions: krad_ext::ExtensionManager,
    /// Terminals being started (their tokens work before they are recorded).
    launching: Launching,
    /// The environments: worktrees, their setup, disk use and ports.
    environments: Arc<environments::Environments>,
    /// The answers of at-most-once requests, kept with the state.
    request_log: RequestLog,
    /// The SSH hosts of the config.
    hosts: Arc<hosts::HostLinks>,
    /// The open and recently decided asks.
    asks: Arc<asks::AskBoard>,
    /// What the durable facet shows of each pane (idle unless `[durable]` is on).
    feed: Arc<feed::Feed>,
    /// The sandboxes: the bus's socket, their networks, their inbound ports.
    sandbox: Arc<sandbox::Sandbox>,
    /// The variant groups' cost limits.
    budgets: Arc<budget::Budgets>,
    /// `[limits]`, the room taken by starts under way, and the queue.
    limits: Arc<limits::Limits>,
    /// Starting terminals.
    spawner: Arc<Spawner>,
    /// The variants' checks (`[checks]`) and their results.
    checks: checks::Checks,
}

impl Core {
    /// Makes every domain's handle once: reads the app's state, prepares its
    /// directories. `host` runs the terminals — unless the config says
    /// `[terminals] host = "tmux"`: then they live in a tmux server of the
    /// app's own, named after the repository, and outlive the app.
    pub(crate) fn build(
        settings: Settings,
        host: Arc<dyn TerminalHost>,
        secret: Arc<Secret>,
    ) -> Result<Core, String> {
        let profiles = Profiles::from_config(&settings.config)
            .map_err(|e| format!("the config is not usable: {e}"))?;
        private_dir(&settings.state_dir)?;
        private_dir(&settings.token_dir)?;
        crate::leftovers::mark_token_folder(&settings)?;
        let host: Arc<dyn TerminalHost> = match settings.config.terminals.host {
            TerminalHostKind::Pty => host,
            TerminalHostKind::Tmux => Arc::new(
                TmuxHost::new(
                    TmuxHost::socket_for(&settings.root),
                    settings.state_dir.join("tmux.conf"),
                )
                .map_err(|e| e.to_string())?,
            ),
        };
        let db = state_db::open(&settings.state_dir)?;
        let store = Arc::new(Store::open(db.clone())?);
        let limits = limits::Limits::new(settings.config.limits.clone(), store.clone());
        let budgets =
            budget::Budgets::new(store.clone(), settings.config.budget.max_group_cost_usd);
        let request_log = state_db::request_log(&db)?;
        // Every terminal of this machine is kept on record: a restart-safe
        // host's are taken back by the next app, the others shown lost.
        let keeping = if host.restart_safe() {
            store::Keeping::All
        } else {
            store::Keeping::Local
        };
        store.keep_terminals(&settings.endpoint.to_string(), keeping);
        let extensions = extensions::manager(&settings);
        let asks = asks::AskBoard::default();
        asks.keep_decided_in(db.clone(), &settings.state_dir.join("asks-decided.jsonl"));
        let hosts = Arc::new(hosts::HostLinks::new(
            &settings.config.hosts,
            settings.endpoint.port(),
            &settings.state_dir,
            &settings.root,
        ));
        let settings = Arc::new(settings);
        let environments = Arc::new(environments::Environments::new(
            settings.clone(),
            store.clone(),
            hosts.clone(),
        ));
        let sandbox = Arc::new(sandbox::Sandbox::new(
            settings.clone(),
            environments.clone(),
        ));
        let profiles = Arc::new(profiles);
        let asks = Arc::new(asks);
        let budgets = Arc::new(budgets);
        let limits = Arc::new(limits);
        let checks = checks::Checks::new(
            &settings.config,
            store.clone(),
            environments.clone(),
            limits.clone(),
            sandbox.clone(),
        );
        let launching = Launching::default();
        let watching = Watching {
            store: store.clone(),
            asks: asks.clone(),
            hosts: hosts.clone(),
        };
        let spawner = Arc::new(Spawner {
            settings: settings.clone(),
            profiles: profiles.clone(),
            store: store.clone(),
            host: host.clone(),
            secret,
            launching: launching.clone(),
            environments: environments.clone(),
            sandbox: sandbox.clone(),
            hosts: hosts.clone(),
            limits: limits.clone(),
            budgets: budgets.clone(),
            watching,
        });
        Ok(Core {
            settings,
            profiles,
            store,
            host,
            extensions,
            launching,
            environments,
            request_log,
            hosts,
            asks,
            feed: Arc::default(),
            sandbox,
            budgets,
            limits,
            spawner,
            checks,
        })
    }

    pub(crate) fn settings(&self) -> &Arc<Settings> {
        &self.settings
    }
    pub(crate) fn profiles(&self) -> &Arc<Profiles> {
        &self.profiles
    }
    pub(crate) fn store(&self) -> &Arc<Store> {
        &self.store
    }
    pub(crate) fn host(&self) -> &Arc<dyn TerminalHost> {
        &self.host
    }
    pub(crate) fn extensions(&self) -> &krad_ext::ExtensionManager {
        &self.extensions
    }
    pub(crate) fn launching(&self) -> &Launching {
        &self.launching
    }
    pub(crate) fn environments(&self) -> &Arc<environments::Environments> {
        &self.environments
    }
    pub(crate) fn request_log(&self) -> &RequestLog {
        &self.request_log
    }
    pub(crate) fn hosts(&self) -> &Arc<hosts::HostLinks> {
        &self.hosts
    }
    pub(crate) fn asks(&self) -> &Arc<asks::AskBoard> {
        &self.asks
    }
    pub(crate) fn feed(&self) -> &Arc<feed::Feed> {
        &self.feed
    }
    pub(crate) fn sandbox(&self) -> &Arc<sandbox::Sandbox> {
        &self.sandbox
    }
    pub(crate) fn budgets(&self) -> &Arc<budget::Budgets> {
        &self.budgets
    }
    pub(crate) fn limits(&self) -> &Arc<limits::Limits> {
        &self.limits
    }

    /// The variants' checks.
    pub(crate) fn checks(&self) -> &checks::Checks {
        &self.checks
    }

    /// Starting terminals.
    pub(crate) fn spawner(&self) -> &Arc<Spawner> {
        &self.spawner
    }

    /// What closing a terminal reaches.
    pub(crate) fn closer(&self) -> Closer<'_> {
        Closer {
            settings: &self.settings,
            store: &self.store,
            limits: &self.limits,
            request_log: &self.request_log,
            sandbox: &self.sandbox,
            hosts: &self.hosts,
        }
    }
}

fn private_dir(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .and_then(|()| std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)))
        .map_err(|e| format!("cannot prepare {}: {e}", dir.display()))
}
