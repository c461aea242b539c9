//! What the sampler ([`crate::usage`]) reads from the store and writes into
//! it: the live local terminals' pids, and each one's usage, written into its
//! record and JSON in place — without a new rev, a stream line or a write to
//! disk, since a sample is not a change of the agent (docs/agents.md, "What
//! agents cost").

use krad_bus::protocol::{AgentState, RecordJson, Usage};

use super::Store;

impl Store {
    /// The terminals whose processes run on this machine: id and pid.
    pub fn usage_targets(&self) -> Vec<(u64, u32)> {
        self.lock()
            .agents
            .values()
            .filter(|e| e.record.host.is_none() && e.record.state != AgentState::Exited)
            .filter_map(|e| Some((e.record.terminal, e.record.pid?)))
            .collect()
    }

    /// The terminals on SSH hosts that have not exited: host name and id.
    pub fn host_usage_targets(&self) -> Vec<(String, u64)> {
        self.lock()
            .agents
            .values()
            .filter(|e| e.record.state != AgentState::Exited)
            .filter_map(|e| Some((e.record.host.clone()?, e.record.terminal)))
            .collect()
    }

    /// Writes each sample into its terminal's record. Waiters are not woken,
    /// and List's kept answer is spliced again at its next call.
    pub fn set_usage(&self, samples: impl IntoIterator<Item = (u64, Usage)>) {
        let mut inner = self.lock();
        let mut changed = false;
        for (id, usage) in samples {
            let Some(entry) = inner.agents.get_mut(&id) else {
                continue;
            };
            let usage = Some(usage);
            if entry.record.usage == usage {
                continue;
            }
            entry.record.usage = usage.clone();
            entry.json = RecordJson::of(&entry.record);
            // The watched copy too, silently: waiters wait for changes.
            entry.watch.send_if_modified(|watched| {
                watched.usage = usage;
                false
            });
            changed = true;
        }
        if changed {
            inner.list_answer = None;
        }
    }
}
