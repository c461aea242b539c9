//! The one periodic sampler: every [`PERIOD`], off the request path, one task
//! samples what the agents use — their processes' CPU and memory
//! ([`crate::usage`]) and their model spend ([`crate::spend`]) — and writes it
//! into their records without a new rev, then tells the SubscribeAgents
//! streams what changed in one `Sampled` line (at most once a period, and
//! nothing while nobody subscribes). It owns the period and the loop; each
//! sampler owns what it saw between two samples. It never imports requests/.

use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::budget::Budgets;
use crate::hosts::HostLinks;
use crate::spend::{PriceList, Reader};
use crate::store::Store;
use crate::usage::Usages;

/// How often the agents are sampled.
pub const PERIOD: Duration = Duration::from_secs(2);

/// What the samplers write to, held weakly: sampling ends with the app.
pub(crate) struct Sampled {
    pub(crate) store: Weak<Store>,
    pub(crate) hosts: Weak<HostLinks>,
    pub(crate) budgets: Weak<Budgets>,
}

impl Sampled {
    pub(crate) fn new(store: &Arc<Store>, hosts: &Arc<HostLinks>, budgets: &Arc<Budgets>) -> Self {
        Sampled {
            store: Arc::downgrade(store),
            hosts: Arc::downgrade(hosts),
            budgets: Arc::downgrade(budgets),
        }
    }
}

/// Samples every [`PERIOD`] until the app is gone; both samplers run side
/// by side, so a slow SSH host never holds the spend (and its budgets) back.
/// `prices` is the config's `[prices]`.
pub(crate) async fn run(app: Sampled, prices: PriceList) {
    let mut spend = Reader::new(&prices);
    let mut usage = Usages::new();
    let mut every = tokio::time::interval(PERIOD);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let (used, spent) = tokio::join!(
            usage.sample(&app.store, &app.hosts, PERIOD),
            spend.sample(&app.store, &app.budgets)
        );
        if used.is_none() || spent.is_none() {
            return;
        }
        // One line to the streams for the whole sample, if it changed anything.
        if let Some(store) = app.store.upgrade() {
            store.publish_samples();
        }
    }
}
