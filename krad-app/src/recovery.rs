//! Recovery: taking the intents a crash left over to their end, or back to their start.
//!
//! Runs once at start, after the environments and the terminals were brought
//! back (so what survived is known):
//!
//! | intent | forward, when | back, otherwise |
//! |---|---|---|
//! | Spawn | its terminal is on record (kept before its program started, or queued; one that ran and was lost with the app is on record `exited`) | nothing ran: a retry spawns |
//! | CreateWorktree | its environment is on record | — |
//! | Close of an environment | always: the close is run again | — |
//! | Send | — (the text may have reached the terminal, in part: it is not sent again; the answer says so) | — |
//! | RunVariants | always: the variants it had not reached are started (none twice) | — |
//! | PickVariant | the pick landed (recorded, or found in git) | the target reset to its tip before the pick |
//! | UpdateEnvironment | always: run again once a git the dead app left is done (up to date already: its base is recorded) | — |
//!
//! An intent that cannot be settled now (a host out of reach) stays for the
//! next start.

use std::collections::BTreeSet;

use krad_bus::protocol::{ApiError, ErrorCode, Response, TypedAnswer};
use krad_bus::server::request_log::RequestLog;
use krad_store::Kind;

use crate::closing::Closer;
use crate::environments;
use crate::intents::{Intent, Plan};
use crate::spawning::Spawner;
use crate::store::Store;

/// What recovery made of an intent.
enum Outcome {
    /// Taken to its end: the answer its request would have had.
    Done(Response),
    /// Taken back to its start: nothing of it remains.
    Undone,
    /// Cannot be settled now; kept for the next start.
    Left(String),
}

/// Settles every intent left over by a crash; see the module's doc.
pub(crate) async fn recover(spawner: &Spawner, closer: &Closer<'_>, request_log: &RequestLog) {
    let intents = match spawner.store.db().read(|tx| tx.all::<Intent>(Kind::Intent)) {
        Ok(intents) => intents,
        Err(e) => {
            tracing::error!("cannot read the mutations a crash interrupted: {e}");
            return;
        }
    };
    // Terminals given an id whose program never started (on record nowhere).
    let never_started: BTreeSet<u64> = intents
        .iter()
        .filter_map(|(_, intent)| match &intent.plan {
            Plan::Spawn { terminal } if spawner.store.record(*terminal).is_none() => {
                Some(*terminal)
            }
            _ => None,
        })
        .collect();
    for (key, intent) in intents {
        let outcome = match &intent.plan {
            // The answer is the record as it is: the same everywhere.
            Plan::Spawn { terminal } => match spawner.store.record(*terminal) {
                Some(record) => Outcome::Done(record.into_response()),
                None => Outcome::Undone,
            },
            Plan::Send { terminal } => Outcome::Done(
                ApiError::new(
                    ErrorCode::Failed,
                    format!(
                        "the app stopped while it wrote to terminal {terminal}: the text may have \
                         reached it, in part or whole; it is not sent again (look at its screen \
                         with Output)"
                    ),
                )
                .with_detail(serde_json::json!({ "terminal": terminal }))
                .into(),
            ),
            // Its decision was kept (with this step): its answer was "Ok".
            Plan::Answer { decided: true, .. } => Outcome::Done(().into_response()),
            Plan::Answer { decided: false, .. } => Outcome::Undone,
            Plan::CreateWorktree { name } => match spawner.store.environment(name) {
                Some(record) => Outcome::Done(
                    environments::info(&spawner.environments, &record).into_response(),
                ),
                None => Outcome::Undone,
            },
            Plan::QueuedSend { terminal } => {
                told_of_an_untyped_send(spawner, *terminal);
                Outcome::Undone
            }
            // Its record gone, the Close did it; still there, the retry closes it.
            Plan::CloseTerminal { terminal } => match spawner.store.record(*terminal) {
                None => Outcome::Done(().into_response()),
                Some(_) => Outcome::Undone,
            },
            Plan::CloseEnvironment { name, force } => {
                match environments::close(&spawner.environments, closer, name, *force).await {
                    Ok(_) => Outcome::Done(().into_response()),
                    // Closed by the first run before it could answer.
                    Err(_) if spawner.store.environment(name).is_none() => {
                        Outcome::Done(().into_response())
                    }
                    Err(e) => Outcome::Done(e.into()),
                }
            }
            Plan::RunVariants { group, request } => {
                let resumed = crate::run_variants::resume(spawner, group, request, &never_started);
                match resumed.await {
                    Ok(info) => Outcome::Done(info.into_response()),
                    Err(e) if spawner.store.group(group).is_none() => {
                        tracing::debug!("group {group} is gone: {e}");
                        Outcome::Undone
                    }
                    Err(e) => Outcome::Done(e.into()),
                }
            }
            Plan::UpdateEnvironment { name, how } => {
                match environments::update::recover(&spawner.environments, name, *how).await {
                    Ok(updated) => Outcome::Done(updated.into_response()),
                    Err(_) if spawner.store.environment(name).is_none() => Outcome::Undone,
                    Err(e) => Outcome::Done(e.into()),
                }
            }
            Plan::PickVariant(plan) => {
                match environments::recover_pick(&spawner.environments, closer, plan).await {
                    Ok(Some(picked)) => Outcome::Done(picked.into_response()),
                    Ok(None) => Outcome::Undone,
                    Err(reason) => Outcome::Left(reason),
                }
            }
        };
        settle(&spawner.store, request_log, &key, &intent, outcome);
    }
}

/// What a terminal's record says when a queued Send for it was taken out of
/// the queue as the app died: perhaps typed, perhaps not; never again.
pub(crate) const UNTYPED_SEND: &str = "the app stopped as a queued Send for this agent was \
     being typed: it may not have reached it, and is not typed again (look at its screen, \
     and send it again if it did not)";

/// Tells, on terminal `terminal`'s record, of a queued Send the app died typing.
fn told_of_an_untyped_send(spawner: &Spawner, terminal: u64) {
    tracing::warn!(terminal, "a queued Send was being typed as the app stopped");
    spawner.store.update(terminal, |e| {
        if e.record.state == krad_bus::protocol::AgentState::Exited {
            return false;
        }
        e.record.message = Some(UNTYPED_SEND.to_owned());
        true
    });
}

/// Keeps the outcome as the request id's answer, and drops the intent.
fn settle(store: &Store, request_log: &RequestLog, key: &str, intent: &Intent, outcome: Outcome) {
    let what = format!("{:?}", intent.plan);
    let answer = match outcome {
        Outcome::Left(reason) => {
            tracing::warn!(intent = %what, "an interrupted mutation stays pending: {reason}");
            return;
        }
        Outcome::Done(response) => {
            tracing::warn!(intent = %what, "finished a mutation the app's stop interrupted");
            serde_json::to_value(&response).ok()
        }
        Outcome::Undone => {
            tracing::warn!(intent = %what, "undid a mutation the app's stop interrupted");
            None
        }
    };
    let settled = match &intent.once {
        Some(once) => request_log.recovered(once, answer),
        None => store
            .db()
            .write(|tx| tx.remove(Kind::Intent, key).map(drop))
            .map_err(|e| e.to_string()),
    };
    if let Err(e) = settled {
        tracing::error!(intent = %what, "cannot settle an interrupted mutation: {e}");
    }
}
