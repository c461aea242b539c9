//! The scored side of `krad variants`: the scoreboard (`ls GROUP`), checks on
//! demand (`check`), a pick by rule (`pick --best`), landing several
//! (`merge`) and waiting for scores (`wait --scored`).

use krad_bus::protocol::{MergedInfo, ScoresInfo, VariantScore, Waited};
use krad_bus::request::check_variants::CheckVariants;
use krad_bus::request::merge_variants::MergeVariants;
use krad_bus::request::pick_variant::{How, PickVariant};
use krad_bus::request::scores::Scores;
use krad_bus::request::wait::Wait;

use crate::connect::AppConnection;
use crate::exit::{Exit, Failure};
use crate::print;
use crate::render::{self, Column, table, terminal_width};

/// `krad variants ls GROUP`: the scoreboard.
pub(crate) fn scoreboard(bus: &AppConnection, group: &str, json: bool) -> anyhow::Result<Exit> {
    let reply = bus.send(
        Scores {
            group: group.to_owned(),
        },
        None,
    )?;
    print::emit(json, &reply, |scores| print::lines(board_lines(scores)));
    Ok(Exit::Success)
}

/// `krad variants check GROUP [N]`.
pub(crate) fn check(
    bus: &AppConnection,
    group: String,
    variant: Option<u32>,
    request_id: Option<&str>,
    json: bool,
) -> anyhow::Result<Exit> {
    let reply = bus.send(CheckVariants { group, variant }, request_id)?;
    print::emit(json, &reply, |scores| {
        let queued: usize = scores
            .variants
            .iter()
            .flat_map(|v| &v.checks)
            .filter(|c| !c.outcome.is_final())
            .count();
        print::line(&format!(
            "{} queued or running in group {} (krad variants wait {} --scored waits for them)",
            render::counted(queued, "check"),
            scores.group,
            scores.group
        ));
        print::lines(board_lines(scores));
    });
    Ok(Exit::Success)
}

/// `krad variants pick GROUP --best [--yes]`: the ranking and the dry run;
/// the pick itself only with `--yes`.
pub(crate) fn pick_best(
    bus: &AppConnection,
    request: PickVariant,
    yes: bool,
    request_id: Option<&str>,
    json: bool,
) -> anyhow::Result<Exit> {
    if !json {
        let scores = bus
            .send(
                Scores {
                    group: request.group.clone(),
                },
                None,
            )?
            .answer;
        print::lines(board_lines(&scores));
    }
    let dry = PickVariant {
        best: true,
        dry_run: true,
        ..request.clone()
    };
    let reply = bus.send(dry, None)?;
    let conflicts = reply
        .answer
        .dry_run
        .as_ref()
        .is_some_and(|d| !d.conflicts.is_empty());
    if !yes || conflicts {
        print::emit(json, &reply, |picked| {
            print::lines(super::dry_run_lines(picked));
            if !conflicts {
                print::line(&format!(
                    "the best is variant {}: pick it with --yes",
                    picked.variant
                ));
            }
        });
        return Ok(if conflicts {
            Exit::Conflict
        } else {
            Exit::Success
        });
    }
    if !json {
        print::lines(super::dry_run_lines(&reply.answer));
    }
    let pick = PickVariant {
        best: true,
        dry_run: false,
        ..request
    };
    let reply = bus.send(pick, request_id)?;
    print::emit(json, &reply, |picked| {
        print::line(&super::picked_line(picked))
    });
    Ok(Exit::Success)
}

/// `krad variants merge GROUP`.
pub(crate) fn merge(
    bus: &AppConnection,
    request: MergeVariants,
    request_id: Option<&str>,
    json: bool,
) -> anyhow::Result<Exit> {
    let reply = bus.send(request, request_id)?;
    print::emit(json, &reply, |merged| print::lines(merged_lines(merged)));
    Ok(if reply.answer.stopped.is_some() {
        Exit::Conflict
    } else {
        Exit::Success
    })
}

fn merged_lines(merged: &MergedInfo) -> Vec<String> {
    let order: Vec<String> = merged.order.iter().map(u32::to_string).collect();
    let mut lines = vec![format!(
        "merging group {} into {} in the order {}",
        merged.group,
        merged.into,
        order.join(", ")
    )];
    for landed in &merged.landed {
        lines.push(format!(
            "  variant {} landed, {} now at {}",
            landed.variant,
            merged.into,
            render::short_commit(&landed.commit)
        ));
    }
    if let Some(stopped) = &merged.stopped {
        lines.push(format!(
            "  stopped at variant {}: {} (nothing of it applied){}",
            stopped.variant,
            stopped.message,
            if stopped.files.is_empty() {
                String::new()
            } else {
                format!("; files: {}", stopped.files.join(", "))
            }
        ));
    }
    lines
}

/// `krad variants wait GROUP [--scored]`.
pub(crate) fn wait(
    bus: &AppConnection,
    group: String,
    scored: bool,
    timeout: u64,
    json: bool,
) -> anyhow::Result<Exit> {
    let request = Wait {
        group: Some(group.clone()),
        scored,
        timeout_secs: Some(timeout),
        ..Wait::default()
    };
    let reply = bus.send(request, None)?;
    let records =
        match &reply.answer {
            Waited::Agent(record) => vec![(**record).clone()],
            Waited::Agents(records) => records.clone(),
            Waited::TimedOut => {
                return Err(Failure::new(
                Exit::TimedOut,
                format!(
                    "group {group} is not {} after {timeout} s (timed out, exit 5); wait longer \
                     with --timeout (at most 1800 s)",
                    if scored { "stopped and checked" } else { "stopped" }
                ),
            )
            .into());
            }
        };
    if json {
        print::json(&reply.raw);
    } else {
        for record in &records {
            print::line(&crate::render::Agent(record).summary_line());
        }
        if scored {
            let scores = bus.send(Scores { group }, None)?.answer;
            print::lines(board_lines(&scores));
        }
    }
    Ok(Exit::Success)
}

/// The scoreboard as a table, then the ranking and the best.
pub(crate) fn board_lines(scores: &ScoresInfo) -> Vec<String> {
    let columns = [
        Column::new("RANK", 4, 4),
        Column::new("#", 1, 3),
        Column::new("ENV", 3, 24),
        Column::new("STATE", 5, 10),
        Column::new("CHECKS", 6, 40),
        Column::new("COST", 4, 9),
        Column::new("TOKENS", 6, 9),
        Column::new("TIME", 4, 8),
        Column::new("FILES", 5, 5),
        Column::new("+/−", 3, 12),
        Column::new("CONFLICTS", 9, 24),
    ];
    let cells: Vec<Vec<String>> = scores
        .variants
        .iter()
        .map(|v| {
            vec![
                v.rank.map_or_else(|| "-".to_owned(), |r| r.to_string()),
                v.variant.to_string(),
                v.environment.clone(),
                v.state.map_or("-", |s| s.as_str()).to_owned(),
                checks_cell(v, &scores.checks),
                v.tokens
                    .as_ref()
                    .and_then(|t| t.cost_usd)
                    .map_or_else(|| "-".to_owned(), |c| format!("${:.2}", c.value())),
                v.tokens.as_ref().map_or_else(
                    || "-".to_owned(),
                    |t| (t.input + t.output + t.cache_write + t.cache_read).to_string(),
                ),
                v.time_ms.map_or_else(
                    || "-".to_owned(),
                    |ms| format!("{:.1}s", ms as f64 / 1000.0),
                ),
                v.files.to_string(),
                format!("+{} -{}", v.added, v.removed),
                conflicts_cell(v),
            ]
        })
        .collect();
    let mut lines = vec![format!(
        "group {} (base {} from {})",
        scores.group,
        render::short_commit(&scores.base),
        scores.base_environment
    )];
    lines.extend(table(&columns, &cells, terminal_width()));
    let ranking: Vec<String> = scores.ranking.iter().map(u32::to_string).collect();
    lines.push(format!(
        "ranking (gating checks passed, fewest conflicts with the base, least cost, shortest time): {}",
        ranking.join(", ")
    ));
    match (scores.best, &scores.why) {
        (Some(best), _) => lines.push(format!("best: variant {best}")),
        (None, Some(why)) => lines.push(format!("no best: {why}")),
        (None, None) => {}
    }
    if let Some(picked) = scores.picked {
        lines.push(format!("picked: variant {picked}"));
    }
    lines
}

/// `test passed, lint failed(1)`; `-` for a check that never ran.
fn checks_cell(v: &VariantScore, names: &[String]) -> String {
    if names.is_empty() {
        return "(no [checks])".to_owned();
    }
    let each = krad_tui::check_outcomes(v, names);
    let stale = if v.checked { "" } else { " *" };
    format!("{}{stale}", each.join(", "))
}

/// `base: 2 files, 3` — the files in conflict with the base, and the other
/// variants.
fn conflicts_cell(v: &VariantScore) -> String {
    let mut parts = Vec::new();
    if !v.conflicts_with_base.is_empty() {
        parts.push(format!(
            "base: {}",
            render::counted(v.conflicts_with_base.len(), "file")
        ));
    }
    if !v.conflicts_with.is_empty() {
        let others: Vec<String> = v.conflicts_with.iter().map(u32::to_string).collect();
        parts.push(format!("variants {}", others.join(" ")));
    }
    if parts.is_empty() {
        "none".to_owned()
    } else {
        parts.join("; ")
    }
}

/// How a pick lands, for `pick --best`.
pub(crate) fn how_of(how: super::HowArg) -> How {
    match how {
        super::HowArg::Merge => How::Merge,
        super::HowArg::Squash => How::Squash,
        super::HowArg::Branch => How::Branch,
    }
}
