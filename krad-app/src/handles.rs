//! [`Core`]: every domain's handle, made once ([`Core::build`]), for the
//! composition root (`app.rs`) and the handlers in `requests/`, which take
//! from it the handles they need. It owns no state of its own; it imports
//! the domains it builds, and nothing that takes a `Core`.

use std::path::Path;
use std::sync::Arc;

use krad_bus::server::request_log::RequestLog;
use krad_bus::token::Secret;
use krad_term::{TerminalHost, TmuxHost};

use crate::closing::Closer;
use crate::config::{Settings, TerminalHostKind};
use crate::profile::Profiles;
use crate::spawning::Spawner;
use crate::store::Store;
use crate::watcher::Watching;
use crate::{
    asks, budget, checks, environments, extensions, feed, hosts, launching, limits, sandbox,
    state_db, store,
};

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
    launching: launching::Launching,
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
        let launching = launching::Launching::default();
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
    pub(crate) fn launching(&self) -> &launching::Launching {
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
