//! Checks: the commands of `[checks]` run in each variant's worktree to score
//! it ([`Checks`], a handle), their line, their results kept in the store, and
//! what sets them going; how one runs and what its result says is
//! `checks/run.rs`, the scoreboard and the ranking are `checks/scores.rs`,
//! landing several variants `checks/merge.rs`.
//!
//! * **When.** A variant's agent that stops (idle or exited) after a turn gets
//!   its checks queued ([`watch_agents`], reading the store's changes), and
//!   CheckVariants queues them on demand. A check of the work already checked
//!   — the worktree's committed and uncommitted work as one commit, the same
//!   work always the same commit (`environments/tree_state.rs`) — is not run
//!   again.
//! * **Room.** At most `[checks] parallel` run at once across the app, the
//!   others wait in the order they were queued (a fair semaphore); none starts
//!   while `[limits]` refuses room ([`crate::limits::Limits::room_for_check`]).
//! * **Where.** `sh -c COMMAND` in the variant's worktree, with its ports
//!   (here), or on its SSH host (through the host's link), by Code's runner
//!   ([`crate::program::run_in`]). A contained variant's checks run in a
//!   sandbox of the same kind as its agent's, here or on its host
//!   (bubblewrap, its worktree the one writable place), with a private home
//!   of their own and without its inbound ports; its network is the agent's:
//!   shared, none, or the agent's allowlist (its proxy and relays, every
//!   attempt in the agent's log). The variant's record says whether its
//!   agent runs contained, so its checks do after its Close too. Where no
//!   such sandbox can be made (its agent's allowlist gone with its terminal,
//!   no bubblewrap) the check is an `error` saying why, never run outside.
//! * **Usage.** A check's processes count in the variant's agent's `usage`
//!   while it runs: here sampled with it ([`Store::sample_also`]), on an SSH
//!   host through the host's link (the check's pid noted in a file there the
//!   host's sample reads: [`crate::hosts::Host::check_pid_file`]). The most
//!   CPU time and memory its processes were seen to use are kept with its
//!   result: here sampled on their own every [`SAMPLE_EVERY`], on a host by
//!   that sample ([`crate::hosts::Host::check_usage`]).
//! * **Kept.** Each (variant, check) has one record (`Kind::Check`): its last
//!   result, and its run queued or under way; one queued or under way at a
//!   crash is queued again at the next start ([`Checks::restore`]).
//!
//! Below the `Core`: it never imports the `Core`, `requests/`, spawning, the
//! queue or the watcher.

pub(crate) mod merge;
mod run;
pub(crate) mod scores;

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use krad_bus::protocol::{
    AgentRecord, AgentState, ApiError, CheckOutcome, CheckResultInfo, ErrorCode, StreamMessage,
};
use krad_store::Kind;
use serde::{Deserialize, Serialize};
use tokio::sync::{Semaphore, watch};

use crate::config::{CheckSpec, ChecksConfig, Config};
use crate::environments::Environments;
use crate::limits::Limits;
use crate::records::EnvironmentRecord;
use crate::sandbox::Sandbox;
use crate::store::{Store, now_rfc3339};

/// How often a running check's processes are sampled, and a check waiting
/// for `[limits]` looks again.
const SAMPLE_EVERY: Duration = Duration::from_millis(500);

/// The checks: a cloneable handle.
#[derive(Clone)]
pub(crate) struct Checks {
    shared: Arc<Shared>,
}

/// The checks' state, behind [`Checks`].
pub(crate) struct Shared {
    specs: Vec<CheckSpec>,
    /// Room for `[checks] parallel` at once; waiters served in order.
    room: Arc<Semaphore>,
    store: Arc<Store>,
    environments: Arc<Environments>,
    limits: Arc<Limits>,
    sandbox: Arc<Sandbox>,
    /// Numbers each run (its private home, its pid file on a host): from the
    /// app's start in milliseconds since 1970, so that no run of this app
    /// has the number of an earlier app's that may still be going on a host
    /// (its files, what the host's sample sees of it).
    runs: AtomicU64,
    /// (environment, check) queued and not started yet: queued once.
    queued: Mutex<HashSet<(String, String)>>,
    /// Held while a record is read, changed and written back.
    writing: Mutex<()>,
    /// Bumped at every change of a check's record (Wait with `scored`).
    changed: watch::Sender<u64>,
    /// The store's rev up to which agents' changes were read for checks to
    /// queue (Wait with `scored` waits for it to catch up).
    seen_rev: AtomicU64,
}

/// What a (variant, check) record holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct CheckRecord {
    group: String,
    variant: u32,
    environment: String,
    name: String,
    /// The last run that ended.
    #[serde(default)]
    last: Option<CheckResultInfo>,
    /// A run queued (`queued`) or under way (`running`, with its commit and
    /// start).
    #[serde(default)]
    pending: Option<CheckResultInfo>,
}

/// A variant's agent, as its checks see it.
#[derive(Debug, Clone, Copy, Default)]
struct Agent {
    /// Its terminal (its usage counts the checks; with an allowlist, its
    /// network is theirs).
    terminal: Option<u64>,
    /// Whether it runs (or ran) contained: its checks then run in a sandbox
    /// too, or not at all.
    contained: bool,
}

/// Why checks are queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Why {
    /// The variant's agent stopped after a turn.
    Stopped,
    /// CheckVariants.
    Asked,
}

fn key(environment: &str, check: &str) -> String {
    format!("{environment}/{check}")
}

impl Checks {
    pub(crate) fn new(
        config: &Config,
        store: Arc<Store>,
        environments: Arc<Environments>,
        limits: Arc<Limits>,
        sandbox: Arc<Sandbox>,
    ) -> Checks {
        let checks: &ChecksConfig = &config.checks;
        Checks {
            shared: Arc::new(Shared {
                specs: checks.specs(),
                room: Arc::new(Semaphore::new(checks.parallel())),
                store,
                environments,
                limits,
                sandbox,
                runs: AtomicU64::new(run::first_run()),
                queued: Mutex::default(),
                writing: Mutex::default(),
                changed: watch::Sender::new(0),
                seen_rev: AtomicU64::new(0),
            }),
        }
    }

    /// The checks of `[checks]`.
    pub(crate) fn specs(&self) -> &[CheckSpec] {
        &self.shared.specs
    }

    pub(crate) fn store(&self) -> &Arc<Store> {
        &self.shared.store
    }

    pub(crate) fn environments(&self) -> &Arc<Environments> {
        &self.shared.environments
    }

    fn queued(&self) -> MutexGuard<'_, HashSet<(String, String)>> {
        self.shared
            .queued
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Every check record kept, by its key (`<environment>/<check>`).
    fn all_records(&self) -> Vec<(String, CheckRecord)> {
        self.shared
            .store
            .db()
            .read(|tx| tx.all::<CheckRecord>(Kind::Check))
            .unwrap_or_default()
    }

    /// Every check record of `environment`, by check name.
    fn records(&self, environment: &str) -> BTreeMap<String, CheckRecord> {
        let prefix = format!("{environment}/");
        self.all_records()
            .into_iter()
            .filter(|(k, _)| k.starts_with(&prefix))
            .map(|(_, r)| (r.name.clone(), r))
            .collect()
    }

    /// Each check of `environment`: its run queued or under way, else its
    /// last result; and the last results alone (to judge the work now).
    pub(crate) fn results(
        &self,
        environment: &str,
    ) -> (Vec<CheckResultInfo>, BTreeMap<String, CheckResultInfo>) {
        let records = self.records(environment);
        let mut shown = Vec::new();
        let mut last = BTreeMap::new();
        for spec in &self.shared.specs {
            let Some(record) = records.get(&spec.name) else {
                continue;
            };
            if let Some(result) = record.pending.clone().or_else(|| record.last.clone()) {
                shown.push(result);
            }
            if let Some(result) = &record.last {
                last.insert(spec.name.clone(), result.clone());
            }
        }
        (shown, last)
    }

    /// Whether a check of `environment` is queued or under way.
    pub(crate) fn pending(&self, environment: &str) -> bool {
        self.queued().iter().any(|(env, _)| env == environment)
            || self
                .records(environment)
                .values()
                .any(|record| record.pending.is_some())
    }

    /// Changes the record of (`environment`, `name`) as it is in the store
    /// now (`None`: there is none); `None` back removes it.
    fn update(
        &self,
        environment: &str,
        name: &str,
        change: impl FnOnce(Option<CheckRecord>) -> Option<CheckRecord>,
    ) -> Option<CheckRecord> {
        let key = key(environment, name);
        let db = self.shared.store.db();
        let _writing = self
            .shared
            .writing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = db
            .read(|tx| tx.get::<CheckRecord>(Kind::Check, &key))
            .ok()
            .flatten();
        let changed = change(now);
        let written = match &changed {
            Some(record) => db.write(|tx| tx.put(Kind::Check, &key, record)),
            None => db.write(|tx| tx.remove(Kind::Check, &key).map(|_| ())),
        };
        if let Err(e) = written {
            tracing::warn!(%key, "cannot record a check: {e}");
        }
        self.shared.changed.send_modify(|n| *n += 1);
        changed
    }

    /// Forgets the check records of environments that are gone.
    fn forget_gone(&self) {
        for (key, record) in self.all_records() {
            if self.shared.store.environment(&record.environment).is_none() {
                let _ = self
                    .shared
                    .store
                    .db()
                    .write(|tx| tx.remove(Kind::Check, &key).map(|_| ()));
            }
        }
    }

    /// Queues every check in variant `variant` of `group` (its environment
    /// `environment`); a check already queued there is not queued twice.
    /// Returns how many were queued.
    pub(crate) fn queue(&self, group: &str, variant: u32, environment: &str, why: Why) -> usize {
        let mut count = 0;
        for spec in self.shared.specs.clone() {
            let place = (environment.to_owned(), spec.name.clone());
            if !self.queued().insert(place.clone()) {
                continue;
            }
            self.update(environment, &spec.name, |now| {
                let mut record = now.unwrap_or_else(|| CheckRecord {
                    group: group.to_owned(),
                    variant,
                    environment: environment.to_owned(),
                    name: spec.name.clone(),
                    last: None,
                    pending: None,
                });
                // One under way stays shown as it is.
                if record.pending.is_none() {
                    record.pending = Some(blank(&spec, CheckOutcome::Queued));
                }
                Some(record)
            });
            tracing::debug!(environment, check = %spec.name, ?why, "check queued");
            count += 1;
            let checks = self.clone();
            tokio::spawn(async move { checks.run_one(spec, place).await });
        }
        count
    }

    /// CheckVariants: queues the checks of every variant of `group` still
    /// there (or of variant `only`). `invalid` without `[checks]`,
    /// `not_found` for a group or variant that is not there.
    pub(crate) fn check_group(&self, group: &str, only: Option<u32>) -> Result<(), ApiError> {
        if self.shared.specs.is_empty() {
            return Err(ApiError::new(
                ErrorCode::Invalid,
                "the config names no checks: add them under [checks] (docs/environments.md)",
            ));
        }
        let store = &self.shared.store;
        let record = store.group(group).ok_or_else(|| no_group(group))?;
        if let Some(n) = only
            && !record.variants.contains_key(&n)
        {
            return Err(ApiError::new(
                ErrorCode::NotFound,
                format!("group {:?} has no variant {n}", record.name),
            )
            .with_detail(serde_json::json!({ "group": record.name, "variant": n })));
        }
        for (&n, variant) in &record.variants {
            if only.is_some_and(|v| v != n) || store.environment(&variant.environment).is_none() {
                continue;
            }
            self.queue(&record.name, n, &variant.environment, Why::Asked);
        }
        Ok(())
    }

    /// At start: queues again every check that was queued or under way when
    /// the app stopped, and forgets those of environments that are gone.
    pub(crate) fn restore(&self) {
        self.forget_gone();
        let mut again: Vec<(String, u32, String)> = self
            .all_records()
            .into_iter()
            .filter(|(_, r)| r.pending.is_some())
            .map(|(_, r)| (r.group, r.variant, r.environment))
            .collect();
        again.sort();
        again.dedup();
        for (group, variant, environment) in again {
            tracing::info!(%environment, "checks cut short by the last stop are run again");
            self.queue(&group, variant, &environment, Why::Asked);
        }
    }

    /// One queued check: waits for room, then runs it on the work as it is
    /// then (unless that work was checked already).
    async fn run_one(&self, spec: CheckSpec, place: (String, String)) {
        let Ok(_turn) = self.shared.room.clone().acquire_owned().await else {
            return;
        };
        while let Err(refused) = self.shared.limits.room_for_check() {
            tracing::debug!(check = %spec.name, "a check waits for room: {}", refused.message);
            tokio::time::sleep(SAMPLE_EVERY).await;
        }
        let environment_name = place.0.clone();
        let Some(environment) = self.shared.store.environment(&environment_name) else {
            // Gone (picked, closed): nothing to check.
            self.update(&environment_name, &spec.name, |_| None);
            self.queued().remove(&place);
            return;
        };
        let commit = match crate::environments::env_git(&self.shared.environments, &environment) {
            Ok(git) => match crate::environments::tree_state::snapshot(&git).await {
                Ok(snapshot) => snapshot.commit(&git).await,
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        let started = match commit {
            Ok(commit) => {
                let mut running = blank(&spec, CheckOutcome::Running);
                running.commit = commit.clone();
                running.started_at = Some(now_rfc3339());
                let mut checked_already = false;
                self.update(&environment_name, &spec.name, |now| {
                    let mut record = now?;
                    if record.last.as_ref().is_some_and(|l| l.commit == commit) {
                        checked_already = true;
                        record.pending = None;
                    } else {
                        record.pending = Some(running.clone());
                    }
                    Some(record)
                });
                self.queued().remove(&place);
                if checked_already {
                    return;
                }
                Ok(running)
            }
            Err(e) => Err(e),
        };
        let agent = self.agent_of(&environment);
        let result = match started {
            Ok(running) => {
                self.run_check(&environment_name, &spec, running, agent)
                    .await
            }
            Err(e) => {
                self.queued().remove(&place);
                let mut result = blank(&spec, CheckOutcome::Error);
                result.tail = vec![format!("cannot read the worktree: {}", e.message)];
                result.ran_at = Some(now_rfc3339());
                result
            }
        };
        tracing::info!(
            environment = %environment_name,
            check = %spec.name,
            outcome = result.outcome.as_str(),
            "check ran"
        );
        self.update(&environment_name, &spec.name, |now| {
            let mut record = now?;
            record.last = Some(result);
            // A run queued meanwhile (its place still in line) stays shown.
            if record
                .pending
                .as_ref()
                .is_some_and(|p| p.outcome == CheckOutcome::Running)
            {
                record.pending = None;
            }
            Some(record)
        });
    }

    /// The variant's agent, wherever it runs: its checks count in its
    /// usage, and run contained when it does (or did: the variant's record
    /// says so after its agent's Close too).
    fn agent_of(&self, environment: &EnvironmentRecord) -> Agent {
        let variant = environment
            .group
            .as_deref()
            .and_then(|group| self.shared.store.group(group))
            .zip(environment.variant)
            .and_then(|(group, n)| group.variants.get(&n).cloned());
        let Some(variant) = variant else {
            return Agent::default();
        };
        let sandbox = &self.shared.sandbox;
        let contained = variant.contained
            || variant.terminal.is_some_and(|id| {
                crate::sandbox::contained_here(sandbox, id)
                    || crate::sandbox::contained_on_host(sandbox, id)
            });
        Agent {
            terminal: variant.terminal,
            contained,
        }
    }

    /// Waits until every agent of `group`'s variants has stopped (and, with
    /// `scored`, every check of every variant is over, none queued), or
    /// `timeout` passes (`None`). Returns the agents.
    pub(crate) async fn wait_group(
        &self,
        group: &str,
        scored: bool,
        timeout: Duration,
    ) -> Result<Option<Vec<AgentRecord>>, ApiError> {
        let store = &self.shared.store;
        let deadline = tokio::time::Instant::now() + timeout;
        let mut revs = store.revs();
        let mut changed = self.shared.changed.subscribe();
        loop {
            let rev = store.rev();
            let record = store.group(group).ok_or_else(|| no_group(group))?;
            let mut agents = Vec::new();
            let mut met = true;
            for variant in record.variants.values() {
                if store.environment(&variant.environment).is_none() {
                    continue;
                }
                match variant.terminal.and_then(|t| store.record(t)) {
                    Some(agent) => {
                        met &= agent.state.is_stopped();
                        agents.push(agent);
                    }
                    None => met &= variant.terminal.is_some(),
                }
                if scored && met {
                    let (_, last) = self.results(&variant.environment);
                    met &= !self.pending(&variant.environment)
                        && self.shared.specs.iter().all(|s| last.contains_key(&s.name));
                }
            }
            if scored {
                met &= self.shared.seen_rev.load(Ordering::Acquire) >= rev;
            }
            if met {
                return Ok(Some(agents));
            }
            tokio::select! {
                _ = revs.changed() => {}
                _ = changed.changed() => {}
                () = tokio::time::sleep(SAMPLE_EVERY) => {}
                () = tokio::time::sleep_until(deadline) => return Ok(None),
            }
        }
    }
}

/// `not_found` for a group that is not there.
pub(crate) fn no_group(group: &str) -> ApiError {
    ApiError::new(ErrorCode::NotFound, format!("no variant group {group:?}"))
        .with_detail(serde_json::json!({ "group": group }))
}

/// A result with nothing run yet.
fn blank(spec: &CheckSpec, outcome: CheckOutcome) -> CheckResultInfo {
    CheckResultInfo {
        name: spec.name.clone(),
        outcome,
        gates: spec.gates,
        exit_code: None,
        duration_ms: None,
        commit: String::new(),
        tail: Vec::new(),
        started_at: None,
        ran_at: None,
        cpu_ms: None,
        max_rss_bytes: None,
    }
}

/// Reads the agents' changes from the store, for as long as the checks are
/// there: a variant's agent that stops (idle, asking or exited) after
/// starting or working gets its variant's checks queued. Does nothing
/// without `[checks]`.
pub(crate) async fn watch_agents(checks: std::sync::Weak<Shared>) {
    let Some(shared) = checks.upgrade() else {
        return;
    };
    let handle = Checks { shared };
    if handle.shared.specs.is_empty() {
        handle.shared.seen_rev.store(u64::MAX, Ordering::Release);
        return;
    }
    let mut revs = handle.shared.store.revs();
    let mut last_rev = 0;
    let mut states: BTreeMap<u64, AgentState> = BTreeMap::new();
    drop(handle);
    loop {
        let Some(shared) = checks.upgrade() else {
            return;
        };
        let handle = Checks { shared };
        let (messages, now) = handle.shared.store.changes_since(last_rev, None);
        last_rev = now;
        for message in messages {
            let StreamMessage::Agent(agent) = message else {
                continue;
            };
            let before = states.insert(agent.terminal, agent.state);
            let (Some(group), Some(variant)) = (&agent.group, agent.variant) else {
                continue;
            };
            let stopped_now = matches!(agent.state, AgentState::Idle | AgentState::Exited);
            let was_running = before.is_none_or(|s| !s.is_stopped());
            if stopped_now && was_running {
                handle.queue(group, variant, &agent.environment, Why::Stopped);
            }
        }
        handle.shared.seen_rev.store(now, Ordering::Release);
        drop(handle);
        if revs.changed().await.is_err() {
            return;
        }
    }
}

impl Checks {
    /// What [`watch_agents`] holds: the shared state, weakly.
    pub(crate) fn weak(&self) -> std::sync::Weak<Shared> {
        Arc::downgrade(&self.shared)
    }
}
