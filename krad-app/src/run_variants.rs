//! Running a variant group (RunVariants): N fresh worktrees from one base
//! commit, one agent each, the group recorded (with the request's intent)
//! before anything is created. After a crash midway, [`resume`] starts the
//! variants that had not started — none twice — so the group is whole and the
//! request id gets its answer. Picking one is [`crate::environments::variants`].

use std::collections::BTreeSet;
use std::sync::Arc;

use krad_bus::protocol::{ApiError, ErrorCode, VariantInfo, VariantsInfo};
use krad_bus::request::RequestKind;
use krad_bus::request::run_variants::RunVariants;
use krad_bus::request::spawn::Spawn;
use krad_bus::server::CallContext;
use serde_json::json;

use crate::environments::{self, NewWorktree};
use crate::hosts::Host;
use crate::intents::{self, Underway};
use crate::records::{GroupRecord, Phase};
use crate::spawning::Spawner;

/// Starts a new group as `request` asks, and answers it.
pub(crate) async fn run(
    spawner: &Spawner,
    ctx: &CallContext,
    request: RunVariants,
) -> Result<VariantsInfo, ApiError> {
    let profile = known_profile(spawner, &request)?;
    let group = match &request.name {
        Some(name) => name.clone(),
        None => free_group_name(spawner),
    };
    names_are_free(spawner, &group, request.count)?;
    // Room for every variant at once, or (sent with `queue`) each waits in line.
    let room = match spawner.limits.may_start(request.count as usize) {
        Ok(room) => Some(room),
        Err(e) if request.queue == Some(true) && e.code == ErrorCode::Busy => None,
        Err(e) => return Err(e),
    };
    let host = environments::host(&spawner.environments, request.host.as_deref())?;
    let (base_commit, base_environment) = environments::resolve_base(
        &spawner.environments,
        request.base.as_deref(),
        host.as_ref(),
    )
    .await?;
    let plan = Plan {
        group,
        profile,
        base_commit,
        base_environment,
        host,
        request: &request,
        queued: room.is_none(),
    };
    let _underway = record_group(spawner, ctx, &plan)?;
    let started = start_missing(spawner, ctx, &plan, &BTreeSet::new()).await;
    drop(room);
    started
}

/// Starts every variant of the group that has not started (all of them, the
/// first time; after a crash, those it had not reached).
async fn start_missing(
    spawner: &Spawner,
    ctx: &CallContext,
    plan: &Plan<'_>,
    never_started: &BTreeSet<u64>,
) -> Result<VariantsInfo, ApiError> {
    // The variants' own Spawns are part of this request, not requests of
    // their own: their intents are not keyed by its request id.
    let inner = intents::inner(ctx);
    let mut variants = Vec::new();
    for n in 1..=plan.request.count {
        let started = spawner.store.group(&plan.group).and_then(|g| {
            let v = g.variants.get(&n)?;
            Some(VariantInfo {
                variant: n,
                environment: v.environment.clone(),
                terminal: v.terminal.filter(|t| !never_started.contains(t))?,
                queue_place: None,
            })
        });
        match started {
            Some(variant) => variants.push(variant),
            None => variants.push(start_variant(spawner, &inner, plan, n).await?),
        }
    }
    tracing::info!(group = %plan.group, count = plan.request.count, "variants started");
    Ok(VariantsInfo {
        group: plan.group.clone(),
        variants,
    })
}

/// After a crash: starts the variants of group `name` that had not started, as
/// `request` asked — those with no terminal yet, and those whose terminal had
/// an id but whose program `never_started`. The answer is the group's, as the
/// request would have had it.
pub(crate) async fn resume(
    spawner: &Spawner,
    name: &str,
    request: &RunVariants,
    never_started: &BTreeSet<u64>,
) -> Result<VariantsInfo, ApiError> {
    let group = spawner
        .store
        .group(name)
        .ok_or_else(|| ApiError::new(ErrorCode::NotFound, format!("no variant group {name:?}")))?;
    let plan = Plan {
        group: group.name,
        profile: known_profile(spawner, request)?,
        base_commit: group.base,
        base_environment: group.base_environment,
        host: environments::host(&spawner.environments, group.host.as_deref())?,
        request,
        // Started again after a crash: those with no room wait in line.
        queued: request.queue == Some(true),
    };
    let ctx = CallContext {
        principal: krad_bus::token::Principal::Client,
        request_id: None,
        once: None,
    };
    start_missing(spawner, &ctx, &plan, never_started).await
}

/// What every variant of a new group shares.
struct Plan<'a> {
    group: String,
    profile: String,
    base_commit: String,
    base_environment: String,
    host: Option<Arc<Host>>,
    request: &'a RunVariants,
    /// No room for them now: each variant's agent waits in the queue.
    queued: bool,
}

/// The profile asked for (or the default one), if the app knows it.
fn known_profile(spawner: &Spawner, request: &RunVariants) -> Result<String, ApiError> {
    let profile = request
        .profile
        .clone()
        .unwrap_or_else(|| spawner.profiles.default_name().to_owned());
    if spawner.profiles.get(&profile).is_none() {
        return Err(RequestKind::RunVariants.field_error(
            ErrorCode::Invalid,
            "profile",
            format!("unknown profile {profile:?}"),
        ));
    }
    Ok(profile)
}

/// A conflict if the group or any of its `count` environments exists.
fn names_are_free(spawner: &Spawner, group: &str, count: u32) -> Result<(), ApiError> {
    if spawner.store.has_group(group) {
        return Err(environments::conflict(
            format!("variant group {group:?} exists; choose another name"),
            json!({ "group": group }),
        ));
    }
    for n in 1..=count {
        let name = format!("{group}-{n}");
        if spawner.environments.check(&name).is_ok() {
            return Err(environments::conflict(
                format!("environment {name:?} exists; choose another group name"),
                json!({ "environment": name }),
            ));
        }
    }
    Ok(())
}

/// Records the group, before any of its worktrees is created, with the
/// request's intent in the same transaction (see [`crate::intents`]).
fn record_group(
    spawner: &Spawner,
    ctx: &CallContext,
    plan: &Plan<'_>,
) -> Result<Underway, ApiError> {
    let underway = Underway::new(
        spawner.store.db(),
        ctx,
        intents::Plan::RunVariants {
            group: plan.group.clone(),
            request: plan.request.clone(),
        },
    );
    spawner
        .store
        .update_group_with(
            &plan.group,
            |g| {
                *g = Some(GroupRecord {
                    name: plan.group.clone(),
                    base: plan.base_commit.clone(),
                    base_environment: plan.base_environment.clone(),
                    host: plan.host.as_ref().map(|h| h.name.clone()),
                    count: plan.request.count,
                    variants: Default::default(),
                    picked: None,
                    max_cost_usd: spawner.budgets.group_limit(plan.request.max_group_cost_usd),
                })
            },
            |tx| underway.write(tx),
        )
        .map_err(|e| ApiError::new(ErrorCode::Failed, format!("cannot record the group: {e}")))?;
    Ok(underway)
}

/// Variant `n`: its worktree, then its agent, each recorded as it starts.
async fn start_variant(
    spawner: &Spawner,
    ctx: &CallContext,
    plan: &Plan<'_>,
    n: u32,
) -> Result<VariantInfo, ApiError> {
    let group = &plan.group;
    let environment = format!("{group}-{n}");
    // Made already when a crash came between its worktree and its agent; a
    // setup the crash cut short runs again.
    let made = spawner
        .store
        .environment(&environment)
        .filter(|e| e.group.as_deref() == Some(group.as_str()));
    if let Some(record) = made {
        if record.phase == Phase::SetupFailed {
            environments::run_setup(&spawner.environments, record).await?;
        }
    } else {
        environments::create(
            &spawner.environments,
            NewWorktree {
                name: &environment,
                branch: None,
                base_commit: plan.base_commit.clone(),
                base_environment: plan.base_environment.clone(),
                group: Some((group.clone(), n)),
                host: plan.host.clone(),
            },
        )
        .await?;
    }
    spawner
        .store
        .record_variant(
            group,
            n,
            &environment,
            (
                None,
                spawner
                    .profiles
                    .get(&plan.profile)
                    .map_or(plan.request.sandbox == Some(true), |p| {
                        p.contained_for(plan.request.sandbox)
                    }),
            ),
        )
        .map_err(|e| ApiError::new(ErrorCode::Failed, format!("cannot record the variant: {e}")))?;
    let spawn_request = Spawn {
        environment: Some(environment.clone()),
        profile: Some(plan.profile.clone()),
        command: plan.request.command.clone(),
        prompt: Some(plan.request.prompt.clone()),
        name: Some(format!("{group} #{n}")),
        sandbox: plan.request.sandbox,
        max_cost_usd: plan.request.max_cost_usd,
        queue: plan.queued.then_some(true),
        ..Spawn::default()
    };
    let agent = crate::spawning::spawn(spawner, ctx, spawn_request, Some((group.clone(), n)))
        .await?
        .or_queued(|queued| crate::queue::spawn_later(spawner, queued))?;
    Ok(VariantInfo {
        variant: n,
        environment,
        terminal: agent.terminal,
        queue_place: agent.queue_place,
    })
}

/// `variants-1`, `variants-2`, … the first whose group and environments are free.
fn free_group_name(spawner: &Spawner) -> String {
    (1..)
        .map(|n| format!("variants-{n}"))
        .find(|name| {
            !spawner.store.has_group(name)
                && spawner.environments.check(&format!("{name}-1")).is_err()
        })
        .unwrap_or_else(|| "variants".to_owned())
}
