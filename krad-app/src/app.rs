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
use crate::profile::Profiles;
use crate::store::Store;
use crate::{
    Core, EmbeddedApp, StartError, adopt, asks, budget, config, environments, extensions, hosts,
    launching, leftovers, limits, notify, queue, recovery, sampling, sandbox, state_db, store,
    transcripts,
};

/// Starts the app: reads its state, prepares its directories.
///
/// `host` runs the terminals — unless the config says `[terminals] host =
/// "tmux"`: then they live in a tmux server of the app's own, named after the
/// repository, and outlive the app (see [`EmbeddedApp::restore`]).
pub(crate) fn new(
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
    let budgets = budget::Budgets::new(store.clone(), settings.config.budget.max_group_cost_usd);
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
    Ok(EmbeddedApp {
        core: Arc::new(Core {
            settings,
            profiles,
            store: store.clone(),
            host,
            secret,
            extensions,
            environments,
            launching: launching::Launching::default(),
            hosts,
            asks,
            feed: Arc::default(),
            sandbox,
            request_log,
            budgets,
            limits,
        }),
    })
}

/// Brings the app's records and the worktrees on disk back in line after a
/// start (or a crash); call once before serving. Returns the other bus
/// endpoints that terminals taken back were given (by an earlier run on
/// another port): serve the bus there too, so that their `krad` calls reach
/// this app.
pub(crate) async fn restore(app: &EmbeddedApp) -> Vec<SocketAddr> {
    let core = &app.core;
    environments::restore(&core.environments).await;
    environments::ports::restore(&core.environments);
    let endpoints = adopt::restore(core).await;
    // The queued terminals on record again before the intents are
    // settled: a queued Spawn's retry is answered with its record.
    queue::reload(core);
    recovery::recover(core).await;
    tokio::spawn(queue::run(Arc::downgrade(core)));
    transcripts::prune_in_background(&core.settings, &core.store).await;
    leftovers::clean(core).await;
    notify::start(core.settings.config.notify.as_ref(), &core.store);
    environments::disk::start(&core.environments);
    tokio::spawn(sampling::run(Arc::downgrade(core)));
    endpoints
}

/// Stops the app's work before the process exits: closes every terminal
/// (unless asked not to) and removes the token files.
pub(crate) async fn shutdown(app: &EmbeddedApp, close_terminals: bool) {
    let core = &app.core;
    // Nothing starts from the queue as the terminals end: it is kept for
    // the next run.
    core.limits.queue().stop();
    let terminals = core.store.terminals();
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
    core.extensions.shutdown().await;
    core.hosts.shutdown(close_terminals).await;
    core.store.release_terminal_ids();
    let restart_safe = core.host.restart_safe();
    if close_terminals && !restart_safe {
        // Closed by this stop, as Close would: not lost.
        core.store.forget_local_kept();
    }
    if close_terminals || !restart_safe {
        let _ = std::fs::remove_dir_all(&core.settings.token_dir);
    }
    // Otherwise the terminals kept running read their token files there
    // (a sandbox binds its file): the next app writes them again in
    // place, and cleans the folder once no terminal uses it.
    tracing::info!(terminals = terminals.len(), close_terminals, "app stopped");
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
