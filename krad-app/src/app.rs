//! The composition root: [`EmbeddedApp`] builds the app's [`Core`] (every
//! domain's handle, made once), restores what a restart left, serves, and
//! shuts down. Nothing below imports it but requests/ (its handlers) and the
//! durable facet's calls (which call those handlers).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use krad_bus::token::Secret;
use krad_term::{TerminalHost, TmuxHost};

use crate::config::{Settings, TerminalHostKind};
use crate::durable::{self, Durable};
use crate::profile::Profiles;
use crate::store::Store;
use crate::{
    Core, adopt, asks, budget, config, environments, extensions, hosts, launching, leftovers,
    limits, notify, queue, recovery, sampling, state_db, store, transcripts,
};

/// The app `krad serve` runs. Each request it answers is an
/// `impl Handle<TheRequest> for EmbeddedApp` in `requests/`.
pub struct EmbeddedApp {
    pub(crate) core: Arc<Core>,
}

/// Why the app could not start.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StartError(String);

impl EmbeddedApp {
    /// The app over its core, for the app's own calls of its handlers (the
    /// durable facet's).
    pub(crate) fn over(core: &Arc<Core>) -> EmbeddedApp {
        EmbeddedApp { core: core.clone() }
    }

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
        let profiles = Profiles::from_config(&settings.config)
            .map_err(|e| StartError(format!("the config is not usable: {e}")))?;
        private_dir(&settings.state_dir)?;
        private_dir(&settings.token_dir)?;
        let host: Arc<dyn TerminalHost> = match settings.config.terminals.host {
            TerminalHostKind::Pty => host,
            TerminalHostKind::Tmux => Arc::new(
                TmuxHost::new(
                    TmuxHost::socket_for(&settings.root),
                    settings.state_dir.join("tmux.conf"),
                )
                .map_err(|e| StartError(e.to_string()))?,
            ),
        };
        let db = state_db::open(&settings.state_dir).map_err(StartError)?;
        let store = Arc::new(Store::open(db.clone()).map_err(StartError)?);
        let limits = limits::Limits::new(settings.config.limits.clone(), store.clone());
        let budgets =
            budget::Budgets::new(store.clone(), settings.config.budget.max_group_cost_usd);
        let request_log = state_db::request_log(&db).map_err(StartError)?;
        // Every terminal of this machine is kept on record: a restart-safe
        // host's are taken back by the next app, the others shown lost.
        let keeping = if host.restart_safe() {
            store::Keeping::All
        } else {
            store::Keeping::Local
        };
        store.keep_terminals(&settings.endpoint.to_string(), keeping);
        let extensions = extensions::manager(&settings);
        let asks = asks::Asks::default();
        asks.keep_decided_in(db.clone(), &settings.state_dir.join("asks-decided.jsonl"));
        let hosts = hosts::Hosts::new(
            &settings.config.hosts,
            settings.endpoint.port(),
            &settings.state_dir,
            &settings.root,
        );
        Ok(EmbeddedApp {
            core: Arc::new(Core {
                settings,
                profiles,
                store: store.clone(),
                host,
                secret,
                extensions,
                environments_lock: tokio::sync::Mutex::new(()),
                launching: launching::Launching::default(),
                hosts,
                asks,
                feed: Arc::default(),
                host_ports: Default::default(),
                port_blocks: Default::default(),
                bus_socket: Default::default(),
                nets: Default::default(),
                inbound: Default::default(),
                request_log,
                environments_changed: tokio::sync::watch::channel(0).0,
                disk: Default::default(),
                budgets,
                limits,
            }),
        })
    }

    /// Starts the durable facet when the config has `[durable]`: binds its
    /// socket and TLS listener, answering `503 starting` until
    /// [`Durable::set_ready`] (call it after [`EmbeddedApp::restore`]).
    pub async fn start_durable(&self) -> Result<Option<Durable>, StartError> {
        durable::start(&self.core).await.map_err(StartError)
    }

    /// The repository the app serves (the `main` environment).
    pub fn root(&self) -> &Path {
        &self.core.settings.root
    }

    /// Brings the app's records and the worktrees on disk back in line after a
    /// start (or a crash); call once before serving. Returns the other bus
    /// endpoints that terminals taken back were given (by an earlier run on
    /// another port): serve the bus there too, so that their `krad` calls reach
    /// this app.
    pub async fn restore(&self) -> Vec<SocketAddr> {
        environments::restore(&self.core).await;
        environments::ports::restore(&self.core);
        let endpoints = adopt::restore(&self.core).await;
        // The queued terminals on record again before the intents are
        // settled: a queued Spawn's retry is answered with its record.
        queue::reload(&self.core);
        recovery::recover(&self.core).await;
        tokio::spawn(queue::run(Arc::downgrade(&self.core)));
        transcripts::prune_in_background(&self.core.settings, &self.core.store).await;
        leftovers::clean(&self.core).await;
        notify::start(self.core.settings.config.notify.as_ref(), &self.core.store);
        environments::disk::start(&self.core);
        tokio::spawn(sampling::run(Arc::downgrade(&self.core)));
        endpoints
    }

    /// Stops the app's work before the process exits: closes every terminal
    /// (unless asked not to) and removes the token files.
    pub async fn shutdown(&self, close_terminals: bool) {
        // Nothing starts from the queue as the terminals end: it is kept for
        // the next run.
        self.core.limits.queue().stop();
        let terminals = self.core.store.terminals();
        if close_terminals {
            for terminal in &terminals {
                terminal.close(config::CLOSE_GRACE);
            }
            let deadline =
                tokio::time::Instant::now() + config::CLOSE_GRACE + Duration::from_secs(1);
            while terminals.iter().any(|t| t.exit_status().is_none())
                && tokio::time::Instant::now() < deadline
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        self.core.extensions.shutdown().await;
        self.core.hosts.shutdown(close_terminals).await;
        self.core.store.release_terminal_ids();
        let restart_safe = self.core.host.restart_safe();
        if close_terminals && !restart_safe {
            // Closed by this stop, as Close would: not lost.
            self.core.store.forget_local_kept();
        }
        if close_terminals || !restart_safe {
            let _ = std::fs::remove_dir_all(&self.core.settings.token_dir);
        }
        // Otherwise the terminals kept running read their token files there
        // (a sandbox binds its file): the next app writes them again in
        // place, and cleans the folder once no terminal uses it.
        tracing::info!(terminals = terminals.len(), close_terminals, "app stopped");
    }
}

fn private_dir(dir: &Path) -> Result<(), StartError> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .and_then(|()| std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)))
        .map_err(|e| StartError(format!("cannot prepare {}: {e}", dir.display())))
}
