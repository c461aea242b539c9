//! What the sampler ([`crate::usage`]) reads from the store and writes into
//! it: the live local terminals' pids, and each one's usage, written into its
//! record and JSON in place — without a new rev, a stream line or a write to
//! disk, since a sample is not a change of the agent (docs/agents.md, "What
//! agents cost").

use krad_bus::protocol::{AgentRecord, AgentState, RecordJson, Usage};

use super::Store;

impl Store {
    /// The terminals whose processes run on this machine: id and pid —
    /// and for a terminal with processes sampled as its own besides
    /// ([`Store::sample_also`]), id and each of those.
    pub(crate) fn usage_targets(&self) -> Vec<(u64, u32)> {
        let inner = self.lock();
        let mut targets: Vec<(u64, u32)> = inner
            .agents
            .values()
            .filter(|e| e.record.host.is_none() && e.record.state != AgentState::Exited)
            .filter_map(|e| Some((e.record.terminal, e.record.pid?)))
            .collect();
        let more: Vec<(u64, u32)> = targets
            .iter()
            .flat_map(|&(id, _)| {
                inner
                    .also_sampled
                    .get(&id)
                    .into_iter()
                    .flatten()
                    .map(move |&pid| (id, pid))
            })
            .collect();
        targets.extend(more);
        targets
    }

    /// Counts the process tree under `pid` in terminal `id`'s usage from the
    /// next sample on (a check running in its variant), until
    /// [`Store::stop_sampling_also`].
    pub(crate) fn sample_also(&self, id: u64, pid: u32) {
        self.lock().also_sampled.entry(id).or_default().push(pid);
    }

    /// No longer counts `pid`'s tree in terminal `id`'s usage.
    pub(crate) fn stop_sampling_also(&self, id: u64, pid: u32) {
        let mut inner = self.lock();
        if let Some(pids) = inner.also_sampled.get_mut(&id) {
            pids.retain(|&p| p != pid);
            if pids.is_empty() {
                inner.also_sampled.remove(&id);
            }
        }
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
