//! The queue: work sent with `"queue": true` that the app's `[limits]` leave
//! no room for yet — a Spawn (or a RunVariants' variant), whose terminal is on
//! record as `queued` with its place from the start, or a Send, typed when
//! its turn comes. Each is kept in the store (`Kind::Queued`) before it is
//! answered, so the queue survives a restart of the app ([`reload`]).
//!
//! One task ([`run`]) takes the work in order, the first first: it looks
//! whenever the agents' records move (the store's rev: exits, states) and
//! every [`limits::RETRY_AFTER_SECS`] (the free memory moves unseen), and
//! starts the first as soon as the limits leave room for it — the next one
//! only after. A request not sent with `queue` does not go before the queue
//! ([`limits::may_start`]). Close of a queued terminal takes it out.

use std::sync::{Arc, Weak};
use std::time::Duration;

use krad_bus::protocol::{AgentRecord, AgentState, ApiError, SentInfo, StateSource, TerminalRef};
use krad_bus::request::send::Send;
use krad_bus::server::CallContext;
use krad_bus::token::Principal;
use krad_store::Kind;
use krad_term::{ExitStatus, Snapshot, Terminal};
use tokio::sync::oneshot;

use crate::intents::{Plan, Underway};
use crate::limits::queue::{InLine, QueuedSpawn, Work, cannot_keep, forget, keep, kept};
use crate::profile::Profile;
use crate::records::no_terminal;
use crate::spawning::{self, Spawner};
use crate::store::{now_rfc3339, set_state};
use crate::{limits, sending};

/// How long the queue waits, after typing a queued Send into an idle agent,
/// for the agent to be seen working before it judges the next (an agent
/// that tells its state takes a moment to say so).
const SEND_SETTLES: Duration = Duration::from_secs(5);

/// Queues a Spawn that found no room ([`crate::spawning::Spawned::NoRoom`]):
/// its terminal is on record as `queued`, with its place, before the answer.
pub(crate) fn spawn_later(spawner: &Spawner, queued: QueuedSpawn) -> Result<AgentRecord, ApiError> {
    let id = queued.terminal;
    let (Some(environment), Some(profile)) = (
        queued.request.environment.clone(),
        queued
            .request
            .profile
            .as_deref()
            .and_then(|p| spawner.profiles.get(p)),
    ) else {
        return Err(ApiError::internal(
            "a queued Spawn without its environment or profile",
        ));
    };
    let me = TerminalRef {
        environment,
        terminal: id,
    };
    // On record first: the queue may start it the moment it is in line.
    // Its record exists since it was queued, after a restart too.
    let contained = profile.contained_for(queued.request.sandbox);
    let since = now_rfc3339();
    put_on_record(spawner, &me, &queued, profile, &since);
    let variant = queued.variant.clone();
    let pushed = spawner
        .limits
        .queue()
        .push(Work::Spawn(Box::new(queued)), since, |waiting| {
            let Some((group, n)) = &variant else {
                return kept(spawner.store.db().write(|tx| keep(tx, waiting)));
            };
            // The group knows its variant's terminal in the same transaction.
            let record_variant = |g: &mut Option<crate::records::GroupRecord>| {
                if let Some(g) = g {
                    let variant = crate::records::VariantRecord {
                        environment: me.environment.clone(),
                        terminal: Some(id),
                        contained,
                    };
                    g.variants.insert(*n, variant);
                }
            };
            spawner
                .store
                .update_group_with(group, record_variant, |tx| keep(tx, waiting))
                .map_err(|e| cannot_keep(&e))
        });
    if let Err(e) = pushed {
        spawner.store.remove(id);
        return Err(e);
    }
    spawner.limits.renumber();
    tracing::info!(terminal = id, "queued");
    crate::crash_point::here("spawn-queued");
    spawner.store.record(id).ok_or_else(|| no_terminal(id))
}

/// Queues a Send (see the Send handler): answered at once, typed when its
/// turn comes.
pub(crate) fn send_later(spawner: &Spawner, request: Send) -> Result<SentInfo, ApiError> {
    let id = request.target;
    let db = spawner.store.db();
    let place = spawner
        .limits
        .queue()
        .push(Work::Send { request }, now_rfc3339(), |waiting| {
            kept(db.write(|tx| keep(tx, waiting)))
        })?;
    spawner.limits.renumber();
    tracing::info!(terminal = id, place, "Send queued");
    let state = spawner
        .store
        .record(id)
        .map_or(AgentState::Exited, |r| r.state);
    Ok(SentInfo {
        terminal: id,
        delivered: false,
        state,
        queue_place: Some(place),
    })
}

/// After a restart: the queued terminals on record again, as `queued`, in
/// their places (call after the intents are recovered); work for terminals
/// that are gone is dropped.
pub(crate) fn reload(spawner: &Spawner) {
    let kept = spawner.store.db().read(|tx| tx.all::<InLine>(Kind::Queued));
    let kept = match kept {
        Ok(kept) => kept,
        Err(e) => {
            tracing::error!("cannot read the queue from the store: {e}");
            return;
        }
    };
    let mut waiting: Vec<InLine> = kept.into_iter().map(|(_, w)| w).collect();
    waiting.sort_by_key(|w| w.seq);
    let mut gone = Vec::new();
    for w in &waiting {
        match &w.work {
            Work::Spawn(queued) => {
                if spawner.store.record(queued.terminal).is_some() {
                    // Started as the last app died, and taken back.
                    gone.push(w.seq);
                    continue;
                }
                let Some(environment) = queued.request.environment.clone() else {
                    gone.push(w.seq);
                    continue;
                };
                let profile_name = queued.request.profile.clone().unwrap_or_default();
                let (Some(profile), true) = (
                    spawner.profiles.get(&profile_name),
                    spawner.environments.check(&environment).is_ok(),
                ) else {
                    tracing::warn!(
                        terminal = queued.terminal,
                        "a queued Spawn's environment or profile is gone: dropped from the queue"
                    );
                    gone.push(w.seq);
                    continue;
                };
                let me = TerminalRef {
                    environment,
                    terminal: queued.terminal,
                };
                put_on_record(spawner, &me, queued, profile, &w.since);
            }
            Work::Send { request } => {
                if spawner.store.record(request.target).is_none() {
                    gone.push(w.seq);
                }
            }
        }
    }
    let mut line = spawner.limits.queue().lock();
    line.next_seq = waiting.last().map_or(1, |w| w.seq + 1);
    line.waiting = waiting;
    drop(line);
    spawner
        .limits
        .queue()
        .take(spawner.store.db(), |w| gone.contains(&w.seq));
    let count = spawner.limits.queue().len();
    if count > 0 {
        tracing::info!(count, "the queue is back");
    }
    spawner.limits.renumber();
}

/// Starts the queue's work in order as room frees, for as long as the app runs.
pub(crate) async fn run(spawner: Weak<Spawner>) {
    let Some(strong) = spawner.upgrade() else {
        return;
    };
    let mut revs = strong.store.revs();
    drop(strong);
    let period = Duration::from_secs(limits::RETRY_AFTER_SECS);
    loop {
        let Some(spawner) = spawner.upgrade() else {
            return;
        };
        while let Some((next, _room, underway)) = first_with_room(&spawner) {
            start(&spawner, next).await;
            // Typed (or not, and said so): the queued Send's intent goes.
            drop(underway);
        }
        let wake = spawner.limits.queue().wake.clone();
        drop(spawner);
        tokio::select! {
            changed = revs.changed() => if changed.is_err() { return },
            () = wake.notified() => {}
            () = tokio::time::sleep(period) => {}
        }
    }
}

/// The first work in line, taken out, if the limits leave room for it now,
/// with the room it takes (a Spawn's); work for a terminal that is gone is
/// dropped on the way.
fn first_with_room(
    spawner: &Spawner,
) -> Option<(InLine, Option<limits::Room<'_>>, Option<Underway>)> {
    loop {
        if spawner.limits.queue().stopped() {
            return None;
        }
        let first = spawner.limits.queue().lock().waiting.first().cloned()?;
        let room = match &first.work {
            Work::Spawn(_) => Some(spawner.limits.room_to_start(1).ok()?),
            Work::Send { request } => {
                if let Some(record) = spawner.store.record(request.target) {
                    // A Send for a queued agent waits for its Spawn (ahead of it).
                    if record.state == AgentState::Queued {
                        return None;
                    }
                    spawner.limits.room_to_work(record.state).ok()?;
                }
                None
            }
        };
        // A Spawn stays in the store until its start is over: an app that
        // dies meanwhile starts it again (or finds it taken back: [`reload`]).
        // A Send goes now, with an intent that says so in the same write:
        // typed at most once, and an app that dies before it is typed tells.
        let (taken, underway) = match &first.work {
            Work::Spawn(queued) => {
                let taken = spawner.limits.queue().take_out(|w| w.seq == first.seq);
                if !taken.is_empty() {
                    // First in line, `queued`, until its program starts.
                    spawner.limits.queue().set_starting(Some(queued.terminal));
                }
                (taken, None)
            }
            Work::Send { request } => {
                let plan = Plan::QueuedSend {
                    terminal: request.target,
                };
                let underway = Underway::new(spawner.store.db(), &queue_context(), plan);
                let taken = spawner.limits.queue().take_with(
                    spawner.store.db(),
                    |w| w.seq == first.seq,
                    |tx| underway.write(tx),
                );
                (taken, Some(underway))
            }
        };
        spawner.limits.renumber();
        if let Some(next) = taken.into_iter().next() {
            return Some((next, room, underway));
        }
    }
}

/// Work from the queue is done as the Client, never at most once by an id
/// of its own (the queued request's was answered when it was queued).
fn queue_context() -> CallContext {
    CallContext {
        principal: Principal::Client,
        request_id: None,
        once: None,
    }
}

/// Starts (or types) one piece of work whose turn came.
async fn start(spawner: &Spawner, waiting: InLine) {
    let done = [waiting.clone()];
    let ctx = queue_context();
    match waiting.work {
        Work::Spawn(queued) => {
            let id = queued.terminal;
            tracing::info!(terminal = id, "starting from the queue");
            let started = spawning::start_queued(spawner, *queued).await;
            crate::crash_point::here("queue-started");
            forget(spawner.store.db(), &done);
            spawner.limits.queue().set_starting(None);
            spawner.limits.renumber();
            if let Err(e) = started {
                tracing::warn!(terminal = id, "a queued Spawn did not start: {}", e.message);
                spawner.store.update(id, |entry| {
                    entry.record.queue_place = None;
                    let message = format!("did not start from the queue: {}", e.message);
                    entry.record.state != AgentState::Exited
                        && set_state(
                            &mut entry.record,
                            AgentState::Exited,
                            StateSource::Process,
                            Some(message),
                        )
                });
            }
        }
        Work::Send { request } => {
            let id = request.target;
            let Some(mut watch) = spawner.store.watch(id) else {
                return;
            };
            let before = watch.borrow_and_update().state;
            crate::crash_point::here("queue-send-taken");
            match sending::send(&spawner.store, &ctx, request, watch.clone()).await {
                Ok(_) => tracing::info!(terminal = id, "a queued Send was typed"),
                Err(e) => {
                    tracing::warn!(terminal = id, "a queued Send was not typed: {}", e.message);
                    return;
                }
            }
            let counted_already = !matches!(before, AgentState::Idle | AgentState::Asking);
            if counted_already || spawner.settings.config.limits.max_working.is_none() {
                return;
            }
            // Give the agent the moment it takes to say it works, so that
            // the next in line is judged with it counted.
            let settled = async {
                while matches!(
                    watch.borrow_and_update().state,
                    AgentState::Idle | AgentState::Asking
                ) {
                    if watch.changed().await.is_err() {
                        return;
                    }
                }
            };
            let _ = tokio::time::timeout(SEND_SETTLES, settled).await;
        }
    }
}

/// Puts a queued terminal on record: `queued` since `since` (when it was
/// queued, also after a restart), no program.
fn put_on_record(
    spawner: &Spawner,
    me: &TerminalRef,
    queued: &QueuedSpawn,
    profile: Arc<Profile>,
    since: &str,
) {
    let mut command = queued
        .request
        .command
        .clone()
        .unwrap_or_else(|| profile.command.clone());
    command.extend(crate::profile::prompt_args(
        &profile,
        queued.request.prompt.as_deref(),
    ));
    let host = spawner
        .store
        .environment(&me.environment)
        .and_then(|e| e.host);
    let mut record = spawning::new_record(
        me,
        host,
        &queued.request,
        &profile,
        command,
        queued.lead,
        queued.parent,
        queued.variant.as_ref(),
    );
    record.state = AgentState::Queued;
    record.state_source = StateSource::Process;
    record.started_at = since.to_owned();
    record.state_since = since.to_owned();
    record.message = Some("waiting in the queue for room under [limits]".to_owned());
    spawner
        .store
        .insert(record, Arc::new(Unstarted(me.terminal)), profile, None);
}

/// The terminal of a queued agent: no program yet, nothing to read or type
/// into. Its record is replaced by the started terminal's.
struct Unstarted(u64);

impl Terminal for Unstarted {
    fn id(&self) -> u64 {
        self.0
    }

    fn pid(&self) -> Option<u32> {
        None
    }

    fn write(&self, _bytes: Vec<u8>) -> oneshot::Receiver<std::io::Result<()>> {
        let (tx, rx) = oneshot::channel();
        let _ = tx.send(Err(std::io::Error::new(
            std::io::ErrorKind::NotConnected,
            "the agent waits in the queue: no program runs yet",
        )));
        rx
    }

    fn resize(&self, _cols: u16, _rows: u16) -> std::io::Result<()> {
        Ok(())
    }

    fn snapshot(&self, _scrollback_lines: usize) -> Snapshot {
        Snapshot::blank((0, 0))
    }

    fn bracketed_paste(&self) -> bool {
        false
    }

    fn close(&self, _grace: Duration) {}

    fn exit_status(&self) -> Option<ExitStatus> {
        None
    }
}
