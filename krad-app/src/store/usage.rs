//! What the sampler ([`crate::usage`]) reads from the store and writes into
//! it: the live local terminals' pids, and each one's usage, written into its
//! record and JSON in place — without a new rev, a stream line or a write to
//! disk, since a sample is not a change of the agent (docs/agents.md, "What
//! agents cost").

use krad_bus::protocol::{AgentRecord, AgentState, RecordJson, Usage};

use super::Store;

impl Store {
    /// The terminals whose processes run on this machine: id and pid.
    pub(crate) fn usage_targets(&self) -> Vec<(u64, u32)> {
        self.lock()
            .agents
            .values()
            .filter(|e| e.record.host.is_none() && e.record.state != AgentState::Exited)
            .filter_map(|e| Some((e.record.terminal, e.record.pid?)))
            .collect()
    }

    /// The terminals on SSH hosts that have not exited: host name and id.
    pub(crate) fn host_usage_targets(&self) -> Vec<(String, u64)> {
        self.lock()
            .agents
            .values()
            .filter(|e| e.record.state != AgentState::Exited)
            .filter_map(|e| Some((e.record.host.clone()?, e.record.terminal)))
            .collect()
    }

    /// Writes each sample into its terminal's record. Waiters are not woken,
    /// and List's kept answer is spliced again at its next call.
    pub(crate) fn set_usage(&self, samples: impl IntoIterator<Item = (u64, Usage)>) {
        self.write_in_place(
            samples,
            |record| &mut record.usage,
            |old, new| {
                // Only the time of the sample: no news for the streams.
                (old.cpu_percent, old.rss_bytes, old.processes)
                    != (new.cpu_percent, new.rss_bytes, new.processes)
            },
        );
    }

    /// Writes each value into its terminal's record at `field`, and into its
    /// JSON, without a new rev: waiters are not woken, and List's kept answer
    /// is spliced again at its next call. A value that `news` tells apart
    /// from the one before is noted for the streams' next `Sampled` line.
    pub(super) fn write_in_place<T: Clone + PartialEq>(
        &self,
        values: impl IntoIterator<Item = (u64, T)>,
        field: fn(&mut AgentRecord) -> &mut Option<T>,
        news: fn(&T, &T) -> bool,
    ) {
        let followed = self.samples_followed();
        let mut inner = self.lock();
        let mut changed = false;
        for (id, value) in values {
            let Some(entry) = inner.agents.get_mut(&id) else {
                continue;
            };
            let value = Some(value);
            let old = field(&mut entry.record);
            if *old == value {
                continue;
            }
            let noted = match (old.as_ref(), value.as_ref()) {
                (Some(old), Some(new)) => news(old, new),
                _ => true,
            };
            *field(&mut entry.record) = value.clone();
            entry.json = RecordJson::of(&entry.record);
            // The watched copy too, silently: waiters wait for changes.
            entry.watch.send_if_modified(|watched| {
                *field(watched) = value;
                false
            });
            changed = true;
            if followed && noted {
                inner.sampling.note(id);
            }
        }
        if changed {
            inner.list_answer = None;
        }
    }
}
