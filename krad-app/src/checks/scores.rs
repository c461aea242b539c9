//! A variant group's scoreboard (Scores): each variant's agent, checks, cost,
//! time, diff and conflicts; and the ranking a pick by rule follows
//! ([`rank`]): every gating check passed on the work as it is now, then the
//! fewest files in conflict with the base, then the least cost (unknown
//! last), then the shortest time from spawn to the last idle. The first two
//! equal on all four is a tie: no best.

use std::cmp::Ordering;
use std::time::SystemTime;

use krad_bus::protocol::{
    AgentRecord, ApiError, CheckOutcome, ErrorCode, ScoresInfo, Tokens, VariantScore,
};
use serde_json::json;

use krad_bus::protocol::PickedInfo;
use krad_bus::request::pick_variant::PickVariant;
use krad_bus::server::CallContext;

use super::Checks;
use crate::environments::{CloseTerminals, conflicts, present_git, tree_state, variants};

/// The scoreboard of `group`.
pub(crate) async fn scores(checks: &Checks, group: &str) -> Result<ScoresInfo, ApiError> {
    let store = checks.store();
    let envs = checks.environments();
    let record = store.group(group).ok_or_else(|| super::no_group(group))?;
    let mut variants = Vec::new();
    for (&number, variant) in &record.variants {
        let Some(environment) = store.environment(&variant.environment) else {
            continue;
        };
        let agents: Vec<AgentRecord> = store.list(Some(&environment.name));
        let agent = variant
            .terminal
            .and_then(|t| store.record(t))
            .or_else(|| agents.first().cloned());
        // One whose directory is gone is not on the board: it cannot be
        // picked (`krad variants ls` without a group says why).
        let git = match present_git(envs, &environment) {
            Ok(git) => git,
            Err(gone) if gone.code == ErrorCode::Conflict => continue,
            Err(other) => return Err(other),
        };
        let (shown, last) = checks.results(&environment.name);
        let now = match tree_state::snapshot(&git).await {
            Ok(snapshot) => snapshot.commit(&git).await.ok(),
            Err(_) => None,
        };
        let on_now = |name: &str| {
            last.get(name)
                .filter(|r| Some(&r.commit) == now.as_ref() && r.outcome.is_final())
        };
        let checked = checks.specs().iter().all(|s| on_now(&s.name).is_some());
        let gates_passed = checked
            && checks
                .specs()
                .iter()
                .filter(|s| s.gates)
                .all(|s| on_now(&s.name).is_some_and(|r| r.outcome == CheckOutcome::Passed));
        let (files, added, removed) = match crate::environments::changes::changes(
            &environment.name,
            &git,
            &record.base,
            false,
        )
        .await
        {
            Ok(changes) => (
                changes.files.len(),
                changes.files.iter().map(|f| f.added).sum(),
                changes.files.iter().map(|f| f.removed).sum(),
            ),
            Err(_) => (0, 0, 0),
        };
        let tokens = Tokens::sum(agents.iter().filter_map(|a| a.tokens.as_ref()));
        let time_ms = agent.as_ref().and_then(time_ms);
        let checks_cpu_ms = last
            .values()
            .filter_map(|r| r.cpu_ms)
            .reduce(|a, b| a.saturating_add(b));
        variants.push(VariantScore {
            variant: number,
            environment: environment.name.clone(),
            terminal: variant.terminal,
            state: agent.as_ref().map(|a| a.state),
            checks: shown,
            checked,
            gates_passed,
            tokens,
            time_ms,
            files,
            added,
            removed,
            conflicts_with_base: Vec::new(),
            conflicts_with: Vec::new(),
            checks_cpu_ms,
            rank: None,
        });
    }
    let names: Vec<String> = variants.iter().map(|v| v.environment.clone()).collect();
    if !names.is_empty()
        && let Ok(found) = conflicts::conflicts(envs, Some(&names)).await
    {
        for v in &mut variants {
            if let Some(base) = found
                .environments
                .iter()
                .find(|e| e.name == v.environment)
                .and_then(|e| e.base.as_ref())
            {
                v.conflicts_with_base = base.files.clone();
            }
        }
        let number_of = |name: &str| {
            variants
                .iter()
                .find(|v| v.environment == name)
                .map(|v| v.variant)
        };
        let mut pairs = Vec::new();
        for pair in found.pairs.iter().filter(|p| !p.clean) {
            if let (Some(a), Some(b)) = (number_of(&pair.a), number_of(&pair.b)) {
                pairs.push((a, b));
            }
        }
        for v in &mut variants {
            for &(a, b) in &pairs {
                if a == v.variant {
                    v.conflicts_with.push(b);
                } else if b == v.variant {
                    v.conflicts_with.push(a);
                }
            }
            v.conflicts_with.sort_unstable();
        }
    }
    let (ranking, best, why) = rank(&mut variants);
    Ok(ScoresInfo {
        group: record.name.clone(),
        base: record.base.clone(),
        base_environment: record.base_environment.clone(),
        checks: checks.specs().iter().map(|s| s.name.clone()).collect(),
        variants,
        ranking,
        best,
        why,
        picked: record.picked,
    })
}

/// PickVariant with `best`: the first of the ranking, picked as PickVariant
/// picks (or its dry run), the scoreboard it followed in the answer; no best
/// is `conflict` with the scoreboard in `detail.scores`.
pub(crate) async fn pick_best(
    checks: &Checks,
    terminals: &impl CloseTerminals,
    ctx: &CallContext,
    mut request: PickVariant,
) -> Result<PickedInfo, ApiError> {
    let scores = scores(checks, &request.group).await?;
    let Some(best) = scores.best else {
        let why = scores.why.clone().unwrap_or_default();
        return Err(ApiError::new(
            ErrorCode::Conflict,
            format!("no pick by rule in group {:?}: {why}", scores.group),
        )
        .with_detail(json!({ "group": scores.group, "scores": scores })));
    };
    request.variant = best;
    request.best = false;
    let mut picked = variants::pick(checks.environments(), terminals, ctx, request).await?;
    picked.scores = Some(Box::new(scores));
    Ok(picked)
}

/// Milliseconds from the agent's spawn to its last stop (or to now while it
/// works).
fn time_ms(agent: &AgentRecord) -> Option<u64> {
    let started = humantime::parse_rfc3339(&agent.started_at).ok()?;
    let end = if agent.state.is_stopped() {
        humantime::parse_rfc3339(&agent.state_since).ok()?
    } else {
        SystemTime::now()
    };
    let ms = end.duration_since(started).ok()?.as_millis();
    Some(u64::try_from(ms).unwrap_or(u64::MAX))
}

/// The order of two variants by the rule; `Equal` is a tie.
fn by_rule(a: &VariantScore, b: &VariantScore) -> Ordering {
    let cost = |v: &VariantScore| {
        let cost = v.tokens.as_ref().and_then(|t| t.cost_usd);
        (cost.is_none(), cost)
    };
    b.gates_passed
        .cmp(&a.gates_passed)
        .then(
            a.conflicts_with_base
                .len()
                .cmp(&b.conflicts_with_base.len()),
        )
        .then(cost(a).cmp(&cost(b)))
        .then(
            a.time_ms
                .unwrap_or(u64::MAX)
                .cmp(&b.time_ms.unwrap_or(u64::MAX)),
        )
}

/// Ranks the variants (their `rank` set, best first), and says which is best:
/// none when no variant passed every gating check, or the first two tie.
pub(crate) fn rank(variants: &mut [VariantScore]) -> (Vec<u32>, Option<u32>, Option<String>) {
    let mut order: Vec<usize> = (0..variants.len()).collect();
    order.sort_by(|&a, &b| by_rule(&variants[a], &variants[b]).then(a.cmp(&b)));
    for (place, &i) in order.iter().enumerate() {
        variants[i].rank = Some(u32::try_from(place + 1).unwrap_or(u32::MAX));
    }
    let ranking: Vec<u32> = order.iter().map(|&i| variants[i].variant).collect();
    let (best, why) = match order.as_slice() {
        [] => (None, Some("the group has no variant left".to_owned())),
        [first, ..] if !variants[*first].gates_passed => (
            None,
            Some(
                "no variant passed every gating check on its work as it is now \
                 (krad variants check runs them)"
                    .to_owned(),
            ),
        ),
        [first, second, ..]
            if variants[*second].gates_passed
                && by_rule(&variants[*first], &variants[*second]) == Ordering::Equal =>
        {
            (
                None,
                Some(format!(
                    "variants {} and {} tie on every rule (gating checks, conflicts with \
                     the base, cost, time): pick one by number",
                    variants[*first].variant, variants[*second].variant
                )),
            )
        }
        [first, ..] => (Some(variants[*first].variant), None),
    };
    (ranking, best, why)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn score(variant: u32, passed: bool, conflicts: usize, time_ms: u64) -> VariantScore {
        VariantScore {
            variant,
            environment: format!("g-{variant}"),
            terminal: None,
            state: None,
            checks: Vec::new(),
            checked: true,
            gates_passed: passed,
            tokens: None,
            time_ms: Some(time_ms),
            files: 1,
            added: 1,
            removed: 0,
            conflicts_with_base: vec!["f".to_owned(); conflicts],
            conflicts_with: Vec::new(),
            checks_cpu_ms: None,
            rank: None,
        }
    }

    #[test]
    fn passing_first_then_conflicts_then_time() {
        let mut v = vec![
            score(1, false, 0, 10),
            score(2, true, 1, 10),
            score(3, true, 0, 50),
            score(4, true, 0, 20),
        ];
        let (ranking, best, why) = rank(&mut v);
        assert_eq!(ranking, vec![4, 3, 2, 1]);
        assert_eq!(best, Some(4));
        assert!(why.is_none());
        assert_eq!(v[3].rank, Some(1));
    }

    #[test]
    fn no_pass_and_ties_have_no_best() {
        let mut none = vec![score(1, false, 0, 10), score(2, false, 0, 5)];
        let (_, best, why) = rank(&mut none);
        assert_eq!(best, None);
        assert!(why.unwrap().contains("no variant passed"));
        let mut tie = vec![score(1, true, 0, 10), score(2, true, 0, 10)];
        let (_, best, why) = rank(&mut tie);
        assert_eq!(best, None);
        assert!(why.unwrap().contains("tie"));
    }
}
