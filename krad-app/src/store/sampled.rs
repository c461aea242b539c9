//! What subscribers learn of the sampler's writes in place (CPU, memory,
//! tokens: [`super::usage`], [`super::spend`]): the terminals each sample
//! changed, published once per sample as one shared JSON array, so that a
//! SubscribeAgents stream can say so in one `Sampled` line without a new rev.
//! Nothing is kept or serialized while nobody subscribes. Never imports the
//! subscription; the subscription reads [`Store::sampled_since`].

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;

use krad_bus::protocol::SampledAgent;
use tokio::sync::watch;

use super::{Entry, Store};

/// Samples kept for subscribers a little behind; further behind, a stream
/// gets every agent's values as they are now.
const RECENT_SAMPLES: usize = 8;

/// One published sample: the terminals it changed, each with its
/// environment and its JSON, and the whole array.
struct Sample {
    seq: u64,
    agents: Vec<(u64, String, Arc<str>)>,
    all: Arc<str>,
}

/// What the store keeps of samples for its subscribers.
#[derive(Default)]
pub(super) struct Sampling {
    /// Terminals written in place since the last publication (only while
    /// someone subscribes).
    pending: BTreeSet<u64>,
    recent: VecDeque<Sample>,
    seq: u64,
}

impl Sampling {
    /// Notes that a sample changed `terminal`'s values.
    pub(super) fn note(&mut self, terminal: u64) {
        self.pending.insert(terminal);
    }
}

fn sampled_json(entry: &Entry) -> Arc<str> {
    let sampled = SampledAgent {
        terminal: entry.record.terminal,
        usage: entry.record.usage.clone(),
        tokens: entry.record.tokens.clone(),
    };
    // Plain strings and numbers always serialize.
    serde_json::to_string(&sampled)
        .unwrap_or_else(|_| "null".to_owned())
        .into()
}

fn array<'a>(items: impl IntoIterator<Item = &'a Arc<str>>) -> Arc<str> {
    let mut out = String::from("[");
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(item);
    }
    out.push(']');
    out.into()
}

impl Store {
    /// Whether a stream follows the samples (so they are worth noting).
    pub(super) fn samples_followed(&self) -> bool {
        self.sampled.receiver_count() > 0
    }

    /// A receiver of the samples' sequence number, for a new stream; its
    /// current value is the sample its snapshot already holds.
    pub(crate) fn sampled(&self) -> watch::Receiver<u64> {
        self.sampled.subscribe()
    }

    /// Ends a sample: the terminals it changed become one published sample,
    /// and the streams are woken. Nothing when it changed nothing, or when
    /// nobody follows.
    pub(crate) fn publish_samples(&self) {
        let followed = self.samples_followed();
        let seq = {
            let mut inner = self.lock();
            let pending = std::mem::take(&mut inner.sampling.pending);
            if pending.is_empty() || !followed {
                return;
            }
            let agents: Vec<(u64, String, Arc<str>)> = pending
                .iter()
                .filter_map(|id| inner.agents.get(id))
                .map(|e| {
                    let env = e.record.environment.clone();
                    (e.record.terminal, env, sampled_json(e))
                })
                .collect();
            let all = array(agents.iter().map(|(_, _, json)| json));
            let sampling = &mut inner.sampling;
            sampling.seq += 1;
            if sampling.recent.len() == RECENT_SAMPLES {
                sampling.recent.pop_front();
            }
            let seq = sampling.seq;
            sampling.recent.push_back(Sample { seq, agents, all });
            seq
        };
        self.sampled.send_replace(seq);
    }

    /// What the samples after `seq` changed, for a stream of `environment`
    /// (all when `None`): the JSON array of [`SampledAgent`]s, or `None` when
    /// they changed nothing of it; and the sample it is now at. One sample
    /// behind and unfiltered, the published array itself (no work per
    /// stream); further behind, each terminal once, as it is now.
    pub(crate) fn sampled_since(
        &self,
        seq: u64,
        environment: Option<&str>,
    ) -> (Option<Arc<str>>, u64) {
        let inner = self.lock();
        let sampling = &inner.sampling;
        let now = sampling.seq;
        if seq >= now {
            return (None, now);
        }
        let matches = |env: &str| environment.is_none_or(|e| e == env);
        let json = match sampling.recent.front() {
            Some(oldest) if oldest.seq <= seq + 1 => {
                let after: Vec<&Sample> = sampling.recent.iter().filter(|s| s.seq > seq).collect();
                match after.as_slice() {
                    [one] if environment.is_none() => Some(one.all.clone()),
                    [one] => {
                        let mine: Vec<&Arc<str>> = one
                            .agents
                            .iter()
                            .filter(|(_, env, _)| matches(env))
                            .map(|(_, _, json)| json)
                            .collect();
                        (!mine.is_empty()).then(|| array(mine))
                    }
                    _ => {
                        let ids: BTreeSet<u64> = after
                            .iter()
                            .flat_map(|s| s.agents.iter())
                            .filter(|(_, env, _)| matches(env))
                            .map(|(id, _, _)| *id)
                            .collect();
                        let jsons: Vec<Arc<str>> = ids
                            .iter()
                            .filter_map(|id| inner.agents.get(id))
                            .map(sampled_json)
                            .collect();
                        (!jsons.is_empty()).then(|| array(&jsons))
                    }
                }
            }
            // Too far behind: every agent that has values, as it is now.
            _ => {
                let jsons: Vec<Arc<str>> = inner
                    .agents
                    .values()
                    .filter(|e| matches(&e.record.environment))
                    .filter(|e| e.record.usage.is_some() || e.record.tokens.is_some())
                    .map(sampled_json)
                    .collect();
                (!jsons.is_empty()).then(|| array(&jsons))
            }
        };
        (json, now)
    }
}
