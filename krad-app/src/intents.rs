//! Intents: a mutation with effects outside the store (git, terminals) records
//! what it is about to do before it starts, and each step it reaches, in the
//! same transaction as that step's changes to the store. A mutation that ends
//! normally drops its intent — together with its request id's answer when it
//! has one (the request log settles both in one transaction).
//!
//! After a crash, the app's recovery (recovery.rs) takes every intent left over forward to its end
//! or back to its start (see recovery.rs for each kind), and keeps the outcome
//! as its request id's answer, so a retry with the same id gets it instead of
//! running again — or runs afresh, when the mutation was undone.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use krad_bus::protocol::{ApiError, ErrorCode};
use krad_bus::request::pick_variant::How;
use krad_bus::request::run_variants::RunVariants;
use krad_bus::request::update_environment::UpdateHow;
use krad_bus::server::CallContext;
use krad_bus::server::request_log::OnceKey;
use krad_store::{Db, Kind, StoreError, Tx};
use serde::{Deserialize, Serialize};

use crate::state_db::intent_key;

/// A mutation under way, as recorded in the store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Intent {
    /// The request id it runs under, if any.
    pub once: Option<OnceKey>,
    /// What it does, and how far it got.
    pub plan: Plan,
    /// When it began (RFC 3339).
    pub since: String,
}

/// What a mutation does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Plan {
    /// Spawn: terminal `terminal` is being started (or queued). Its record
    /// is kept before its program starts (and a queued one's with the queue),
    /// so the record is the answer: a terminal on record after a crash is
    /// the Spawn's, one that is not never ran.
    Spawn {
        /// Its id, given out in the same transaction.
        terminal: u64,
    },
    /// Send: text is being written to terminal `terminal`.
    Send {
        /// The terminal.
        terminal: u64,
    },
    /// Answer of ask `ask`.
    Answer {
        /// The ask.
        ask: String,
        /// Written in the transaction that keeps the decision: the ask was
        /// decided by this Answer.
        #[serde(default)]
        decided: bool,
    },
    /// CreateWorktree of `name`.
    CreateWorktree {
        /// The environment.
        name: String,
    },
    /// A queued Send for terminal `terminal`, taken out of the queue to be
    /// typed (in the same write): one on record after a crash was perhaps
    /// not typed, and is never typed again (at most once) — its terminal's
    /// record says so.
    QueuedSend {
        /// The terminal.
        terminal: u64,
    },
    /// Close of terminal `terminal` (with a request id): its record goes
    /// before the answer is kept, so one on record nowhere was closed by it.
    CloseTerminal {
        /// The terminal.
        terminal: u64,
    },
    /// Close of environment `name`.
    CloseEnvironment {
        /// The environment.
        name: String,
        /// Close even with unique work (archived first).
        force: bool,
    },
    /// RunVariants making group `group`.
    RunVariants {
        /// The group.
        group: String,
        /// The request, to start the variants it had not reached.
        request: RunVariants,
    },
    /// PickVariant.
    PickVariant(PickPlan),
    /// UpdateEnvironment of `name`.
    UpdateEnvironment {
        /// The environment.
        name: String,
        /// By a merge or a rebase.
        how: UpdateHow,
    },
}

/// A PickVariant's plan and the step it reached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PickPlan {
    /// The group.
    pub group: String,
    /// The variant kept.
    pub variant: u32,
    /// Merge, squash or branch.
    pub how: How,
    /// The environment merged into (none for `branch`).
    pub into: Option<String>,
    /// Close the other variants once picked.
    pub close_others: bool,
    /// Set just before git touches the target: its branch's tip then, and the
    /// variant's commit being merged.
    pub merging: Option<Merging>,
    /// Set once the target's new tip is known (in the same transaction as the
    /// group's `picked`): the pick landed.
    pub landed: Option<String>,
}

/// A merge into the target about to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Merging {
    /// The target's tip before.
    pub before: String,
    /// The variant's commit.
    pub tip: String,
    /// The commit message a squash uses (to recognise a squash that landed).
    pub message: String,
}

/// A recorded intent, dropped from the store when the mutation ends (unless its
/// request id's answer does that, see the module's doc).
pub(crate) struct Underway {
    key: String,
    intent: Intent,
    db: Arc<Db>,
    settled_by_answer: bool,
}

static LOCAL: AtomicU64 = AtomicU64::new(0);

impl Underway {
    /// An intent for `plan`, not yet written.
    pub(crate) fn new(db: &Arc<Db>, ctx: &CallContext, plan: Plan) -> Underway {
        let key = match &ctx.once {
            Some(once) => intent_key(&once.caller, &once.id),
            None => format!(
                "local:{}:{}:{}",
                std::process::id(),
                crate::store::now_rfc3339(),
                LOCAL.fetch_add(1, Ordering::Relaxed)
            ),
        };
        Underway {
            key,
            intent: Intent {
                once: ctx.once.clone(),
                plan,
                since: crate::store::now_rfc3339(),
            },
            db: db.clone(),
            settled_by_answer: ctx.once.is_some(),
        }
    }

    /// Records `plan` in its own transaction.
    pub(crate) fn begin(db: &Arc<Db>, ctx: &CallContext, plan: Plan) -> Result<Underway, ApiError> {
        let underway = Underway::new(db, ctx, plan);
        db.write(|tx| underway.write(tx)).map_err(cannot_record)?;
        Ok(underway)
    }

    /// Writes the intent as it stands, inside `tx`.
    pub(crate) fn write(&self, tx: &Tx<'_>) -> Result<(), StoreError> {
        tx.put(Kind::Intent, &self.key, &self.intent)
    }

    /// Moves the plan on; write it with [`Underway::write`] or [`Underway::save`].
    pub(crate) fn plan_mut(&mut self) -> &mut Plan {
        &mut self.intent.plan
    }

    /// Writes the intent as it stands, in its own transaction.
    pub(crate) fn save(&self) -> Result<(), ApiError> {
        self.db.write(|tx| self.write(tx)).map_err(cannot_record)
    }
}

impl Drop for Underway {
    fn drop(&mut self) {
        if self.settled_by_answer {
            return;
        }
        if let Err(e) = self.db.write(|tx| tx.remove(Kind::Intent, &self.key)) {
            tracing::error!("cannot drop a finished mutation's intent: {e}");
        }
    }
}

/// A context for work done inside another request (a variant's Spawn inside
/// RunVariants): its intents are its own, not keyed by the outer request id.
pub(crate) fn inner(ctx: &CallContext) -> CallContext {
    CallContext {
        once: None,
        ..ctx.clone()
    }
}

fn cannot_record(e: StoreError) -> ApiError {
    ApiError::new(
        ErrorCode::Failed,
        format!("cannot record the mutation before running it: {e}"),
    )
}
