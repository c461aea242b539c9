//! [`Core`]: every domain's handle, made once by the composition root
//! (`app.rs`) and handed to the handlers in `requests/` and to the use cases
//! that still take it whole. It owns no state of its own and imports only the
//! domains' handle types, never a module that takes a `Core`.

use std::sync::Arc;

use krad_bus::server::request_log::RequestLog;
use krad_bus::token::Secret;
use krad_term::TerminalHost;

use crate::closing::Closer;
use crate::config::Settings;
use crate::profile::Profiles;
use crate::spawning::{Spawner, SpawnerParts};
use crate::store::Store;
use crate::watcher::Watching;
use crate::{asks, budget, environments, feed, hosts, launching, limits, sandbox};

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
}

/// What a [`Core`] is made of, each built once by the composition root.
pub(crate) struct Parts {
    pub(crate) settings: Arc<Settings>,
    pub(crate) profiles: Arc<Profiles>,
    pub(crate) store: Arc<Store>,
    pub(crate) host: Arc<dyn TerminalHost>,
    pub(crate) secret: Arc<Secret>,
    pub(crate) extensions: krad_ext::ExtensionManager,
    pub(crate) environments: Arc<environments::Environments>,
    pub(crate) request_log: RequestLog,
    pub(crate) hosts: Arc<hosts::HostLinks>,
    pub(crate) asks: Arc<asks::AskBoard>,
    pub(crate) sandbox: Arc<sandbox::Sandbox>,
    pub(crate) budgets: Arc<budget::Budgets>,
    pub(crate) limits: Arc<limits::Limits>,
}

impl Core {
    pub(crate) fn new(parts: Parts) -> Core {
        let Parts {
            settings,
            profiles,
            store,
            host,
            secret,
            extensions,
            environments,
            request_log,
            hosts,
            asks,
            sandbox,
            budgets,
            limits,
        } = parts;
        let launching = launching::Launching::default();
        let watching = Watching {
            store: store.clone(),
            asks: asks.clone(),
            hosts: hosts.clone(),
        };
        let spawner = Arc::new(Spawner::new(SpawnerParts {
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
        }));
        Core {
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
        }
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
