//! The one periodic sampler: every [`PERIOD`], off the request path, one task
//! samples what the agents use — their processes' CPU and memory
//! ([`crate::usage`]) and their model spend ([`crate::spend`]) — and writes it
//! into their records without a new rev. It owns the period and the loop; each
//! sampler owns what it saw between two samples. It never imports requests/.

use std::sync::Weak;
use std::time::Duration;

use crate::handles::Core;
use crate::spend::Reader;
use crate::usage::Usages;

/// How often the agents are sampled.
pub const PERIOD: Duration = Duration::from_secs(2);

/// Samples every [`PERIOD`] until the app's core is gone; both samplers run
/// side by side, so a slow SSH host never holds the spend (and its budgets)
/// back.
pub(crate) async fn run(core: Weak<Core>) {
    let Some(live) = core.upgrade() else {
        return;
    };
    let mut spend = Reader::new(&live);
    drop(live);
    let mut usage = Usages::new();
    let mut every = tokio::time::interval(PERIOD);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let (used, spent) = tokio::join!(usage.sample(&core, PERIOD), spend.sample(&core));
        if used.is_none() || spent.is_none() {
            return;
        }
    }
}
