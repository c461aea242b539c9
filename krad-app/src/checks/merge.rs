//! MergeVariants: several compatible variants landed in the target one after
//! another, in the order that conflicts least (the fewest conflicts with the
//! other variants merged and the base first, then the ranking's order). Each
//! lands as a PickVariant with `close_others: false` — whole, or not at all —
//! and the first that would conflict stops the merging.

use krad_bus::protocol::{ApiError, ErrorCode, LandedInfo, MergedInfo, StoppedInfo};
use krad_bus::request::merge_variants::MergeVariants;
use krad_bus::request::pick_variant::{How, PickVariant};
use krad_bus::server::CallContext;
use serde_json::json;

use super::Checks;
use crate::environments::CloseTerminals;
use crate::environments::variants;

/// MergeVariants.
pub(crate) async fn merge(
    checks: &Checks,
    terminals: &impl CloseTerminals,
    ctx: &CallContext,
    request: MergeVariants,
) -> Result<MergedInfo, ApiError> {
    let scores = super::scores::scores(checks, &request.group).await?;
    let wanted: Vec<u32> = match &request.variants {
        Some(asked) => {
            for n in asked {
                if !scores.variants.iter().any(|v| v.variant == *n) {
                    return Err(ApiError::new(
                        ErrorCode::NotFound,
                        format!("group {:?} has no variant {n} left", scores.group),
                    )
                    .with_detail(json!({ "group": scores.group, "variant": n })));
                }
            }
            asked.clone()
        }
        None => scores.variants.iter().map(|v| v.variant).collect(),
    };
    let score = |n: u32| scores.variants.iter().find(|v| v.variant == n);
    let mut order = wanted.clone();
    order.sort_by_key(|&n| {
        let (among, base, rank) = score(n).map_or((usize::MAX, usize::MAX, u32::MAX), |v| {
            (
                v.conflicts_with
                    .iter()
                    .filter(|other| wanted.contains(other))
                    .count(),
                v.conflicts_with_base.len(),
                v.rank.unwrap_or(u32::MAX),
            )
        });
        (among + base, rank)
    });
    order.dedup();
    let into = request
        .into
        .clone()
        .unwrap_or_else(|| scores.base_environment.clone());
    // Each pick is its own mutation (its own intent); the request's id
    // answers the whole.
    let each = CallContext {
        principal: ctx.principal.clone(),
        request_id: None,
        once: None,
    };
    let mut landed = Vec::new();
    let mut stopped = None;
    for &variant in &order {
        let pick = PickVariant {
            group: request.group.clone(),
            variant,
            into: Some(into.clone()),
            how: Some(How::Merge),
            close_others: Some(false),
            ..PickVariant::default()
        };
        match variants::pick(checks.environments(), terminals, &each, pick).await {
            Ok(picked) => landed.push(LandedInfo {
                variant,
                commit: picked.commit,
            }),
            Err(e) => {
                let files = e
                    .detail
                    .as_ref()
                    .and_then(|d| d.get("files"))
                    .and_then(|f| serde_json::from_value::<Vec<String>>(f.clone()).ok())
                    .unwrap_or_default();
                if landed.is_empty() && e.code != ErrorCode::Conflict {
                    return Err(e);
                }
                stopped = Some(StoppedInfo {
                    variant,
                    files,
                    message: e.message,
                });
                break;
            }
        }
    }
    Ok(MergedInfo {
        group: request.group,
        into,
        order,
        landed,
        stopped,
    })
}
