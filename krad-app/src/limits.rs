//! `[limits]`: what keeps the machine alive when agents are started faster
//! than it can take — at most so many live terminals, at most so many agents
//! working at once, and a floor of free memory. A Spawn, RunVariants or Send
//! that would pass one is answered `busy` (retryable) at once, saying which
//! limit, the figure now, and when to try again (`detail.retry_after_secs`);
//! nothing is started or sent — unless it asks to wait in the queue
//! ([`crate::queue`]), which starts it in order once there is room.
//!
//! ```toml
//! [limits]
//! max_terminals = 20          # live terminals (not exited), hosts' included
//! max_working = 8             # agents working (or starting) at once
//! min_free_memory_mib = 2048  # MemAvailable below this: no new terminal
//! memory_max_mib = 4096       # each terminal here in a cgroup v2 of this size
//! ```
//!
//! `memory_max_mib` needs cgroup v2 delegated to the app (see [`crate::cgroup`]);
//! without it a Spawn here is answered `invalid`, saying why.

pub(crate) mod queue;

use std::sync::Arc;

use crate::config::LimitsConfig;
use crate::store::Store;
use krad_bus::protocol::{AgentState, ApiError, ErrorCode};
use serde_json::json;

/// How long a refused request is told to wait before trying again: the
/// period at which agents' states and the machine's memory are seen to move.
pub(crate) const RETRY_AFTER_SECS: u64 = 5;

/// The limits: the config's `[limits]`, the room taken by starts under way,
/// and the queue of work waiting for room (nothing goes before it).
pub(crate) struct Limits {
    config: LimitsConfig,
    /// The config sets no limit (judged once): every start has room.
    unlimited: bool,
    reserved: Reserved,
    queue: queue::Queue,
    store: Arc<Store>,
}

/// What is live now, as the limits count it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Load {
    /// Terminals that have not exited.
    pub live: usize,
    /// Agents working or starting.
    pub working: usize,
}

/// Room for terminals judged free and not yet on record as starting: each
/// counts as live and working until its [`Room`] goes (a Spawn drops it once
/// its record is in the store), so that two Spawns judged at once do not both
/// take the last place.
#[derive(Debug, Default)]
pub(crate) struct Reserved(std::sync::Mutex<usize>);

impl Reserved {
    fn lock(&self) -> std::sync::MutexGuard<'_, usize> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Places taken under the limits by starts under way; given back on drop.
#[must_use = "the room is given back when this is dropped"]
pub(crate) struct Room<'a> {
    reserved: &'a Reserved,
    count: usize,
}

impl Drop for Room<'_> {
    fn drop(&mut self) {
        if self.count > 0 {
            let mut reserved = self.reserved.lock();
            *reserved = reserved.saturating_sub(self.count);
        }
    }
}

impl Limits {
    pub(crate) fn new(config: LimitsConfig, store: Arc<Store>) -> Limits {
        Limits {
            unlimited: config == LimitsConfig::default(),
            config,
            reserved: Reserved::default(),
            queue: queue::Queue::default(),
            store,
        }
    }

    /// Takes terminal `id`'s work out of the queue (its Close): its Spawn and
    /// the Sends for it. Whether its Spawn was there (then it never starts).
    pub(crate) fn cancel(&self, id: u64) -> bool {
        let taken = self
            .queue
            .take(self.store.db(), |w| w.work.terminal() == id);
        if taken.is_empty() {
            return false;
        }
        self.renumber();
        taken
            .iter()
            .any(|w| matches!(w.work, queue::Work::Spawn(_)))
    }

    /// Writes each waiting terminal's place into its record (and clears it
    /// from those no longer waiting).
    pub(crate) fn renumber(&self) {
        let mut places: std::collections::BTreeMap<u64, u32> = Default::default();
        for (n, terminal) in self.queue.terminals_in_order().into_iter().enumerate() {
            let place = u32::try_from(n + 1).unwrap_or(u32::MAX);
            places.entry(terminal).or_insert(place);
        }
        for record in self.store.list(None) {
            let place = places.get(&record.terminal).copied();
            if record.queue_place != place {
                self.store.update(record.terminal, |e| {
                    e.record.queue_place = place;
                    true
                });
            }
        }
    }

    /// The queue of work waiting for room.
    pub(crate) fn queue(&self) -> &queue::Queue {
        &self.queue
    }

    /// Whether `count` new terminals may start now; `busy` if not — also while
    /// work waits in the queue ([`crate::queue`]): nothing goes before it.
    pub(crate) fn may_start(&self, count: usize) -> Result<Room<'_>, ApiError> {
        if let Some(ahead) = self.queued_ahead() {
            return Err(ahead);
        }
        self.room_to_start(count)
    }

    /// Whether `count` new terminals may start now under the limits alone (the
    /// queue's own start of its first waiting agent); the room is taken.
    pub(crate) fn room_to_start(&self, count: usize) -> Result<Room<'_>, ApiError> {
        let limits = &self.config;
        let reserved = &self.reserved;
        if self.unlimited {
            return Ok(Room { reserved, count: 0 });
        }
        let mut taken = reserved.lock();
        let (live, working) = self.store.live_and_working();
        let load = Load {
            live: live + *taken,
            working: working + *taken,
        };
        if let Some(refusal) = refusal_to_start(limits, load, free_memory_mib(), count) {
            return Err(refusal);
        }
        *taken += count;
        Ok(Room { reserved, count })
    }

    /// Whether a Send may make an agent in `state` work now; `busy` if not —
    /// also while work waits in the queue ahead of it.
    pub(crate) fn may_send(&self, state: AgentState) -> Result<(), ApiError> {
        if counted(state) {
            return Ok(());
        }
        if let Some(ahead) = self.queued_ahead() {
            return Err(ahead);
        }
        self.room_to_work(state)
    }

    /// Whether an agent in `state` may be made to work now under the limits
    /// alone (the queue's own delivery of a Send).
    pub(crate) fn room_to_work(&self, state: AgentState) -> Result<(), ApiError> {
        let Some(max) = self.config.max_working else {
            return Ok(());
        };
        if counted(state) {
            return Ok(());
        }
        let working = self.store.live_and_working().1 + *self.reserved.lock();
        if working < max {
            return Ok(());
        }
        Err(busy(
            format!(
                "{working} agents are working, the limit ([limits] max_working = {max}): \
                 this Send would start one more; try again once one is done, or send it \
                 with queue (krad send --queue) to wait in line"
            ),
            json!({"limit": "max_working", "max": max, "working": working}),
        ))
    }

    /// Whether a check ([`crate::checks`]) may start now: not while the
    /// machine's memory is below `min_free_memory_mib`, nor while the agents
    /// working (and the starts under way) fill `max_working` — a check takes
    /// a working agent's share of the machine. `busy`, saying which, if not.
    pub(crate) fn room_for_check(&self) -> Result<(), ApiError> {
        let limits = &self.config;
        if limits.max_working.is_none() && limits.min_free_memory_mib.is_none() {
            return Ok(());
        }
        let working = self.store.live_and_working().1 + *self.reserved.lock();
        let load = Load { live: 0, working };
        let checks_only = LimitsConfig {
            max_terminals: None,
            ..limits.clone()
        };
        match refusal_to_start(&checks_only, load, free_memory_mib(), 1) {
            Some(refusal) => Err(refusal),
            None => Ok(()),
        }
    }

    /// `busy` while work waits in the queue: a request not sent with `queue`
    /// may not go before it.
    fn queued_ahead(&self) -> Option<ApiError> {
        let waiting = self.queue.len();
        (waiting > 0).then(|| {
            busy(
                format!(
                    "{} in the queue for room under [limits]: this one may not go before {}; \
                     send it with queue (--queue) to wait in line, or try again later",
                    if waiting == 1 {
                        "1 request waits".to_string()
                    } else {
                        format!("{waiting} requests wait")
                    },
                    if waiting == 1 { "it" } else { "them" },
                ),
                json!({"limit": "queue", "queued": waiting}),
            )
        })
    }

    /// Whether a terminal on this machine whose profile asks for `profile_mib`
    /// may start under its memory limit (the profile's, else `[limits]`'s):
    /// `invalid`, saying why, where cgroup v2 is not delegated.
    pub(crate) fn may_limit_memory(&self, profile_mib: Option<u64>) -> Result<(), ApiError> {
        match profile_mib.or(self.config.memory_max_mib) {
            None => Ok(()),
            limit => crate::cgroup::here().check(limit),
        }
    }

    /// Puts terminal `id`'s first process `pid` in its memory-limited cgroup,
    /// if its profile (`profile_mib`) or `[limits]` asks; a failure is logged,
    /// the terminal runs.
    pub(crate) fn limit_memory(&self, profile_mib: Option<u64>, id: u64, pid: Option<u32>) {
        let limit = profile_mib.or(self.config.memory_max_mib);
        let (Some(mib), Some(pid)) = (limit, pid) else {
            return;
        };
        if let Err(e) = crate::cgroup::here().confine(id, pid, mib) {
            tracing::warn!("terminal {id} runs without its memory limit: {e}");
        }
    }
}

/// An agent already counted as working (or starting), or one that will
/// never work again: a Send to it takes no room.
fn counted(state: AgentState) -> bool {
    matches!(
        state,
        AgentState::Working | AgentState::Starting | AgentState::Exited
    )
}

/// Why `count` new terminals may not start under `limits`, given the load
/// and the free memory (`None`: unknown, not judged).
fn refusal_to_start(
    limits: &LimitsConfig,
    load: Load,
    free_mib: Option<u64>,
    count: usize,
) -> Option<ApiError> {
    let more = |n: usize| match count {
        1 => "one more".to_owned(),
        n_new => format!("{n_new} more ({} in all)", n + n_new),
    };
    if let Some(max) = limits.max_terminals
        && load.live + count > max
    {
        return Some(busy(
            format!(
                "{} terminals are live, the limit ([limits] max_terminals = {max}) leaves no \
                 room for {}: close one (krad close), try again later, or ask with queue \
                 (--queue) to wait in line",
                load.live,
                more(load.live)
            ),
            json!({"limit": "max_terminals", "max": max, "live": load.live, "asked": count}),
        ));
    }
    if let Some(max) = limits.max_working
        && load.working + count > max
    {
        return Some(busy(
            format!(
                "{} agents are working, the limit ([limits] max_working = {max}) leaves no \
                 room for {}: try again once one is done, or ask with queue (--queue) to \
                 wait in line",
                load.working,
                more(load.working)
            ),
            json!({"limit": "max_working", "max": max, "working": load.working, "asked": count}),
        ));
    }
    if let (Some(min), Some(free)) = (limits.min_free_memory_mib, free_mib)
        && free < min
    {
        return Some(busy(
            format!(
                "the machine has {free} MiB of memory available, below [limits] \
                 min_free_memory_mib = {min}: no new terminal until more is free"
            ),
            json!({"limit": "min_free_memory_mib", "min_mib": min, "free_mib": free}),
        ));
    }
    None
}

/// `busy`, retryable, with `detail` and when to try again.
fn busy(message: String, mut detail: serde_json::Value) -> ApiError {
    if let Some(fields) = detail.as_object_mut() {
        fields.insert("retry_after_secs".to_owned(), json!(RETRY_AFTER_SECS));
    }
    ApiError::new(ErrorCode::Busy, message).with_detail(detail)
}

/// The machine's available memory (`MemAvailable` in /proc/meminfo), MiB.
fn free_memory_mib() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    mem_available_mib(&text)
}

fn mem_available_mib(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(terminals: Option<usize>, working: Option<usize>, free: Option<u64>) -> LimitsConfig {
        LimitsConfig {
            max_terminals: terminals,
            max_working: working,
            min_free_memory_mib: free,
            memory_max_mib: None,
        }
    }

    #[test]
    fn each_limit_refuses_what_would_pass_it_and_says_which() {
        let load = Load {
            live: 3,
            working: 2,
        };
        let none = LimitsConfig::default();
        assert!(refusal_to_start(&none, load, Some(1), 100).is_none());
        let at_four = limits(Some(4), None, None);
        assert!(refusal_to_start(&at_four, load, None, 1).is_none());
        let refused = refusal_to_start(&at_four, load, None, 2).unwrap();
        assert_eq!(refused.code, ErrorCode::Busy);
        assert!(refused.retryable);
        let detail = refused.detail.unwrap();
        assert_eq!(detail["limit"], "max_terminals");
        assert_eq!(detail["retry_after_secs"], RETRY_AFTER_SECS);
        assert!(
            refused.message.contains("2 more (5 in all)"),
            "{}",
            refused.message
        );
        let working = refusal_to_start(&limits(None, Some(2), None), load, None, 1).unwrap();
        assert_eq!(working.detail.unwrap()["limit"], "max_working");
        let memory =
            refusal_to_start(&limits(None, None, Some(2048)), load, Some(1000), 1).unwrap();
        assert!(memory.message.contains("1000 MiB"), "{}", memory.message);
        assert!(refusal_to_start(&limits(None, None, Some(2048)), load, None, 1).is_none());
    }

    #[test]
    fn available_memory_is_read_from_meminfo() {
        let meminfo = "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   2097152 kB\n";
        assert_eq!(mem_available_mib(meminfo), Some(2048));
        assert_eq!(mem_available_mib("MemTotal: 1 kB\n"), None);
        assert!(limits(Some(0), None, None).validate().is_err());
        assert!(limits(Some(1), Some(1), Some(0)).validate().is_ok());
        let no_memory = LimitsConfig {
            memory_max_mib: Some(0),
            ..LimitsConfig::default()
        };
        assert!(no_memory.validate().is_err());
    }
}
