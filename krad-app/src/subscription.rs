//! The SubscribeAgents stream: a snapshot, then every change in rev order,
//! pulled from the store's change index (so a slow reader is conflated, not
//! buffered), with a heartbeat every 15 s without a change.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use krad_bus::protocol::{HeartbeatInfo, SnapshotInfo, StreamMessage};
use krad_bus::server::Subscription;
use tokio::sync::watch;

use crate::store::Store;

/// How long a quiet stream waits before it says it is still there.
pub const HEARTBEAT: Duration = Duration::from_secs(15);

/// One subscriber's stream.
pub struct AgentStream {
    store: Arc<Store>,
    environment: Option<String>,
    snapshot: Option<SnapshotInfo>,
    sent_rev: u64,
    queue: VecDeque<StreamMessage>,
    revs: watch::Receiver<u64>,
}

impl AgentStream {
    /// Takes the snapshot and registers the subscriber in one step.
    pub(crate) fn new(
        store: Arc<Store>,
        environment: Option<String>,
        since_rev: Option<u64>,
    ) -> Self {
        let mut revs = store.revs();
        revs.borrow_and_update();
        let snapshot = store.snapshot(environment.as_deref(), since_rev);
        AgentStream {
            sent_rev: snapshot.rev,
            snapshot: Some(snapshot),
            store,
            environment,
            queue: VecDeque::new(),
            revs,
        }
    }
}

impl Subscription for AgentStream {
    async fn next(&mut self) -> Option<StreamMessage> {
        if let Some(snapshot) = self.snapshot.take() {
            return Some(StreamMessage::Snapshot(snapshot));
        }
        loop {
            if let Some(message) = self.queue.pop_front() {
                return Some(message);
            }
            // Mark the rev seen before reading, so no change slips between.
            self.revs.borrow_and_update();
            let (messages, rev) = self
                .store
                .changes_since(self.sent_rev, self.environment.as_deref());
            self.sent_rev = rev;
            if !messages.is_empty() {
                self.queue.extend(messages);
                continue;
            }
            tokio::select! {
                changed = self.revs.changed() => {
                    if changed.is_err() {
                        return None;
                    }
                }
                () = tokio::time::sleep(HEARTBEAT) => {
                    return Some(StreamMessage::Heartbeat(HeartbeatInfo { rev: self.store.rev() }));
                }
            }
        }
    }
}
