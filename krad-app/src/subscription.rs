//! The SubscribeAgents stream: a snapshot, then every change in rev order,
//! pulled from the store: each change as it was made while the reader is
//! less than the store's last 1,024 changes behind, and past that from its
//! change index (so a slow reader is conflated, not buffered without bound),
//! with a heartbeat every 15 s without a change, and — once caught up with
//! the changes — one `Sampled` line per sample the sampler published (CPU,
//! memory, tokens written in place: not changes, so the line's rev is the
//! stream's last, never a new one). Agents go out as
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
    /// The samples published, and the last one this stream has told.
    sampled: watch::Receiver<u64>,
    sample_seq: u64,
    /// When to send a heartbeat; made at the first wait (inside the runtime).
    heartbeat: Option<Pin<Box<Sleep>>>,
    /// Whether the timer counts from the last line sent already.
    timer_set: bool,
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
        // The snapshot holds every value sampled up to here.
        let mut sampled = store.sampled();
        let sample_seq = *sampled.borrow_and_update();
        let snapshot = store.snapshot(environment.as_deref(), since_rev);
        AgentStream {
            sent_rev: snapshot.rev,
            snapshot: Some(snapshot),
            store,
            environment,
            queue: VecDeque::new(),
            revs,
            sampled,
            sample_seq,
            heartbeat: None,
            timer_set: false,
        }
    }
}

impl Subscription for AgentStream {
    async fn next(&mut self) -> Option<StreamLine> {
        let line = self.next_line().await;
        // The next wait counts the quiet from this line.
        self.timer_set = false;
        line
    }
}

impl AgentStream {
    async fn next_line(&mut self) -> Option<StreamLine> {
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
            // The number, not whether the receiver saw it: a wake below marks
            // it seen before this reads it.
            if *self.sampled.borrow_and_update() != self.sample_seq {
                let (agents, seq) = self
                    .store
                    .sampled_since(self.sample_seq, self.environment.as_deref());
                self.sample_seq = seq;
                if let Some(agents) = agents {
                    let rev = self.sent_rev;
                    return Some(StreamLine::Sampled { rev, agents });
                }
            }
            // Pushing a pending timer later is a store to it, not a trip
            // through the timer wheel. Only a line sent pushes it: a wake
            // that sent nothing (a sample or a change of another
            // environment) leaves the stream as quiet as it was.
            let quiet_until = Instant::now() + HEARTBEAT;
            let heartbeat = match &mut self.heartbeat {
                Some(heartbeat) => {
                    if !self.timer_set {
                        heartbeat.as_mut().reset(quiet_until);
                    }
                    heartbeat
                }
                None => self
                    .heartbeat
                    .insert(Box::pin(tokio::time::sleep_until(quiet_until))),
            };
            self.timer_set = true;
            tokio::select! {
                changed = self.revs.changed() => {
                    if changed.is_err() {
                        return None;
                    }
                }
                changed = self.sampled.changed() => {
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
