//! The SubscribeAgents stream: a snapshot, then every change in rev order,
//! pulled from the store: each change as it was made while the reader is
//! less than the store's last 1,024 changes behind, and past that from its
//! change index (so a slow reader is conflated, not buffered without bound),
//! with a heartbeat every 15 s without a change. Agents go out as
//! the JSON the store keeps for each record: one serialization per change,
//! whatever the number of subscribers.
//!
//! Each stream keeps one heartbeat timer for its whole life, pushed back each
//! time it goes to wait: a new timer per wait would cost every subscriber a
//! timer-wheel insertion and removal per change (1,000 subscribers: 1,000 of
//! each per change).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use krad_bus::protocol::{HeartbeatInfo, SnapshotLine, StreamLine, StreamMessage};
use krad_bus::server::Subscription;
use tokio::sync::watch;
use tokio::time::{Instant, Sleep};

use crate::store::Store;

/// How long a quiet stream waits before it says it is still there.
pub(crate) const HEARTBEAT: Duration = Duration::from_secs(15);

/// One subscriber's stream.
pub struct AgentStream {
    store: Arc<Store>,
    environment: Option<String>,
    snapshot: Option<SnapshotLine>,
    sent_rev: u64,
    queue: VecDeque<StreamLine>,
    revs: watch::Receiver<u64>,
    /// When to send a heartbeat; made at the first wait (inside the runtime).
    heartbeat: Option<Pin<Box<Sleep>>>,
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
            heartbeat: None,
        }
    }
}

impl Subscription for AgentStream {
    async fn next(&mut self) -> Option<StreamLine> {
        if let Some(snapshot) = self.snapshot.take() {
            return Some(StreamLine::Snapshot(snapshot));
        }
        loop {
            if let Some(message) = self.queue.pop_front() {
                return Some(message);
            }
            // Mark the rev seen before reading, so no change slips between.
            self.revs.borrow_and_update();
            self.sent_rev =
                self.store
                    .lines_since(self.sent_rev, self.environment.as_deref(), &mut self.queue);
            if !self.queue.is_empty() {
                continue;
            }
            // Pushing a pending timer later is a store to it, not a trip
            // through the timer wheel.
            let quiet_until = Instant::now() + HEARTBEAT;
            let heartbeat = match &mut self.heartbeat {
                Some(heartbeat) => {
                    heartbeat.as_mut().reset(quiet_until);
                    heartbeat
                }
                None => self
                    .heartbeat
                    .insert(Box::pin(tokio::time::sleep_until(quiet_until))),
            };
            tokio::select! {
                changed = self.revs.changed() => {
                    if changed.is_err() {
                        return None;
                    }
                }
                () = heartbeat.as_mut() => {
                    let heartbeat = HeartbeatInfo { rev: self.store.rev() };
                    return Some(StreamLine::Message(StreamMessage::Heartbeat(heartbeat)));
                }
            }
        }
    }
}
