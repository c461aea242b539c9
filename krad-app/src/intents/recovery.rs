//! Taking the intents a crash left over to their end, or back to their start.
//!
//! Runs once at start, after the environments and the terminals were brought
//! back (so what survived is known):
//!
//! | intent | forward, when | back, otherwise |
//! |---|---|---|
//! | Spawn | its terminal is on record (taken back, or recorded as exited) | nothing to undo: a retry spawns |
//! | CreateWorktree | its environment is on record | — |
//! | Close of an environment | always: the close is run again | — |
//! | RunVariants | every variant has its worktree and a terminal on record | each variant archived and closed, the group forgotten |
//! | PickVariant | the pick landed (recorded, or found in git) | the target reset to its tip before the pick |
//!
//! An intent that cannot be settled now (a host out of reach) stays for the
//! next start.

use std::sync::Arc;

use krad_bus::protocol::{Answer, Response, VariantInfo, VariantsInfo};
use krad_store::Kind;

use super::{Intent, Plan};
use crate::{Core, closing, environments};

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
pub(crate) async fn recover(core: &Arc<Core>) {
    let intents = match core.store.db().read(|tx| tx.all::<Intent>(Kind::Intent)) {
        Ok(intents) => intents,
        Err(e) => {
            tracing::error!("cannot read the mutations a crash interrupted: {e}");
            return;
        }
    };
    for (key, intent) in intents {
        let outcome = match &intent.plan {
            Plan::Spawn { terminal } => match core.store.record(*terminal) {
                Some(record) => Outcome::Done(record.into_response()),
                None => Outcome::Undone,
            },
            Plan::CreateWorktree { name } => match core.store.environment(name) {
                Some(record) => Outcome::Done(environments::info(core, &record).into_response()),
                None => Outcome::Undone,
            },
            Plan::CloseEnvironment { name, force } => {
                match environments::close(core, name, *force).await {
                    Ok(_) => Outcome::Done(().into_response()),
                    // Closed by the first run before it could answer.
                    Err(_) if core.store.environment(name).is_none() => {
                        Outcome::Done(().into_response())
                    }
                    Err(e) => Outcome::Done(e.into()),
                }
            }
            Plan::RunVariants { group } => run_variants(core, group).await,
            Plan::PickVariant(plan) => match environments::recover_pick(core, plan).await {
                Ok(Some(picked)) => Outcome::Done(picked.into_response()),
                Ok(None) => Outcome::Undone,
                Err(reason) => Outcome::Left(reason),
            },
        };
        settle(core, &key, &intent, outcome);
    }
}

/// Keeps the outcome as the request id's answer, and drops the intent.
fn settle(core: &Core, key: &str, intent: &Intent, outcome: Outcome) {
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
        Some(once) => core.request_log.recovered(once, answer),
        None => core
            .store
            .db()
            .write(|tx| tx.remove(Kind::Intent, key).map(drop))
            .map_err(|e| e.to_string()),
    };
    if let Err(e) = settled {
        tracing::error!(intent = %what, "cannot settle an interrupted mutation: {e}");
    }
}

/// A group whose every variant started is answered; any other is undone: its
/// worktrees archived (nothing is lost) and closed, the group forgotten.
async fn run_variants(core: &Arc<Core>, name: &str) -> Outcome {
    let Some(group) = core.store.group(name) else {
        return Outcome::Undone;
    };
    let started: Vec<VariantInfo> = group
        .variants
        .iter()
        .filter_map(|(n, v)| {
            let terminal = v.terminal.filter(|t| core.store.record(*t).is_some())?;
            core.store.environment(&v.environment)?;
            Some(VariantInfo {
                variant: *n,
                environment: v.environment.clone(),
                terminal,
            })
        })
        .collect();
    if started.len() == group.count as usize {
        return Outcome::Done(
            VariantsInfo {
                group: group.name,
                variants: started,
            }
            .into_response(),
        );
    }
    for n in 1..=group.count {
        let environment = format!("{name}-{n}");
        let ours = core
            .store
            .environment(&environment)
            .is_some_and(|e| e.group.as_deref() == Some(name));
        if !ours {
            continue;
        }
        if let Err(e) = closing::close_terminals_of(core, &environment).await {
            return Outcome::Left(format!("cannot close the terminals of {environment}: {e}"));
        }
        if let Err(e) = environments::close(core, &environment, true).await {
            return Outcome::Left(format!("cannot close {environment}: {e}"));
        }
    }
    match core.store.update_group(name, |g| *g = None) {
        Ok(()) => Outcome::Undone,
        Err(e) => Outcome::Left(format!("cannot forget the group: {e}")),
    }
}
