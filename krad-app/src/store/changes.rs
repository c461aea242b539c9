//! What subscribers read from the store: the snapshot a stream starts with,
//! and the changes after a rev — each as it was made while the store's recent
//! changes hold them all, else each changed agent once, as it is now, and each
//! removal (from the change index and its tombstones).

use krad_bus::protocol::{RemovedInfo, SnapshotLine, StreamLine, StreamMessage};

use super::{Change, Entry, Inner, Store};

impl Store {
    /// The first message of a subscription, and the rev it covers.
    /// Taken under the lock, so no change falls between it and what follows.
    pub(crate) fn snapshot(
        &self,
        environment: Option<&str>,
        since_rev: Option<u64>,
    ) -> SnapshotLine {
        let inner = self.lock();
        let matches = |env: &str| environment.is_none_or(|e| e == env);
        let resumable = since_rev.filter(|&since| {
            since <= inner.rev
                && since >= inner.resume_floor
                && !(inner.start_rev > 0 && since <= inner.start_rev)
        });
        match resumable {
            None => SnapshotLine {
                rev: inner.rev,
                agents: inner
                    .agents
                    .values()
                    .filter(|e| matches(&e.record.environment))
                    .map(|e| e.json.clone())
                    .collect(),
                removed: Vec::new(),
                fresh: true,
            },
            Some(since) => {
                let mut agents = Vec::new();
                let mut removed = Vec::new();
                for_changes_after(&inner, since, environment, |change| match change {
                    Changed::Agent(entry) => agents.push(entry.json.clone()),
                    Changed::Removed(gone) => removed.push(gone),
                });
                SnapshotLine {
                    rev: inner.rev,
                    agents,
                    removed,
                    fresh: false,
                }
            }
        }
    }

    /// Every change after `rev`, as stream messages in rev order, and the rev now.
    pub(crate) fn changes_since(
        &self,
        rev: u64,
        environment: Option<&str>,
    ) -> (Vec<StreamMessage>, u64) {
        let inner = self.lock();
        let mut messages = Vec::new();
        for_changes_after(&inner, rev, environment, |change| {
            messages.push(match change {
                Changed::Agent(entry) => StreamMessage::Agent(Box::new(entry.record.clone())),
                Changed::Removed(gone) => StreamMessage::Removed(gone),
            })
        });
        (messages, inner.rev)
    }

    /// The same as stream lines, agents as their kept JSON (a subscriber's):
    /// every change, as it was made, while the last [`RECENT_CHANGES`] hold
    /// all of those since `rev`; further behind, each changed agent once, as
    /// it is now (conflated: the reader still ends at every current state).
    pub(crate) fn lines_since(
        &self,
        rev: u64,
        environment: Option<&str>,
        out: &mut impl Extend<StreamLine>,
    ) -> u64 {
        let inner = self.lock();
        if rev >= inner.recent_floor {
            // Every change since is kept as it was made: each of them, in order.
            let wanted = |env: &str| environment.is_none_or(|e| e == env);
            let start = inner.recent.partition_point(|(r, _, _)| *r <= rev);
            out.extend(
                inner
                    .recent
                    .range(start..)
                    .filter(|(_, env, _)| wanted(env))
                    .map(|(_, _, line)| line.clone()),
            );
            return inner.rev;
        }
        for_changes_after(&inner, rev, environment, |change| {
            out.extend(Some(match change {
                Changed::Agent(entry) => StreamLine::Agent(entry.json.clone()),
                Changed::Removed(gone) => StreamLine::Message(StreamMessage::Removed(gone)),
            }))
        });
        inner.rev
    }
}

/// One change after a rev.
enum Changed<'a> {
    Agent(&'a Entry),
    Removed(RemovedInfo),
}

/// The changes after `since`, in rev order: each changed agent once (its entry
/// now) and each removal.
fn for_changes_after<'a>(
    inner: &'a Inner,
    since: u64,
    environment: Option<&str>,
    mut each: impl FnMut(Changed<'a>),
) {
    let wanted = |env: &str| environment.is_none_or(|e| e == env);
    for (rev, change) in inner.changes.range(since + 1..) {
        match change {
            Change::Agent(id) => {
                if let Some(entry) = inner.agents.get(id)
                    && wanted(&entry.record.environment)
                {
                    each(Changed::Agent(entry));
                }
            }
            Change::Removed {
                terminal,
                environment: env,
            } => {
                if wanted(env) {
                    each(Changed::Removed(RemovedInfo {
                        terminal: *terminal,
                        rev: *rev,
                    }));
                }
            }
        }
    }
}
