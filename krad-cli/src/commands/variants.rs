//! `krad variants run|ls|check|pick|merge|wait`: the same task in N worktrees,
//! scored by `[checks]`, then keep the best.

mod scored;

use std::io::Read;

use anyhow::Context;
use krad_bus::protocol::{AgentRecord, PickedInfo};
use krad_bus::request::changes::Changes;
use krad_bus::request::environments::Environments;
use krad_bus::request::list::List;
use krad_bus::request::merge_variants::MergeVariants;
use krad_bus::request::pick_variant::PickVariant;
use krad_bus::request::run_variants::RunVariants;

use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::Exit;
use crate::print;
use crate::render::{self, Column, table, terminal_width};

/// Arguments of `krad variants`.
#[derive(Debug, clap::Args)]
pub(crate) struct VariantsArgs {
    #[command(subcommand)]
    pub command: VariantsCommand,
}

/// Run or pick.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum VariantsCommand {
    /// Start the same task in N fresh worktrees from one base commit, one agent each.
    #[command(
        after_help = "Examples:\n  krad variants run 3 --profile claude --prompt \"fix the login bug\" --name login\n  \
        krad wait $(krad variants run 2 --prompt - --json < task.md | jq '.Variants.variants[].terminal')"
    )]
    Run {
        /// How many variants (1–16).
        count: u32,
        /// The task (`-` reads stdin).
        #[arg(long)]
        prompt: String,
        /// The profile (default: the config's default).
        #[arg(long)]
        profile: Option<String>,
        /// The group's name; variants are NAME-1, NAME-2, …
        #[arg(long)]
        name: Option<String>,
        /// An environment or git ref to start from (default: main's HEAD).
        #[arg(long)]
        base: Option<String>,
        /// Run the variants on an SSH host of the config.
        #[arg(long)]
        host: Option<String>,
        /// Run every variant in a sandbox (see `krad spawn --sandbox`).
        #[arg(long)]
        sandbox: bool,
        /// What each variant's model calls may cost, in US dollars.
        #[arg(long, value_name = "USD", value_parser = super::budget::dollars)]
        max_cost: Option<krad_bus::protocol::Dollars>,
        /// What the whole group's may cost, in US dollars (`krad budget --group` raises it).
        #[arg(long, value_name = "USD", value_parser = super::budget::dollars)]
        max_group_cost: Option<krad_bus::protocol::Dollars>,
        /// When the app's [limits] leave no room for all of them now, make
        /// their worktrees and queue their agents (started in order) instead
        /// of answering busy (exit 1).
        #[arg(long)]
        queue: bool,
        /// Make the request at most once with this id (safe to retry).
        #[arg(long, value_name = "ID")]
        request_id: Option<String>,
        /// The argv instead of the profile's.
        #[arg(last = true)]
        command: Vec<String>,
    },
    /// The variant groups: each variant's environment, agent state, diff
    /// size against its base, and cost.
    #[command(
        visible_alias = "list",
        after_help = "STATE is its agent's (several: the first's, and how many more); \
FILES, + and − its changes since its base, uncommitted work included.\n\n\
With GROUP: its scoreboard (Scores) — each variant's checks (`*`: not all on its work as it \
is now), cost, tokens, time from spawn to its last idle, diff, the files it would conflict on \
with the base and the variants it would conflict with — and the ranking a pick by rule \
follows.\n\n\
Examples:\n  krad variants ls\n  krad variants ls login\n  krad variants ls login --json"
    )]
    Ls {
        /// Only this group (default: every group).
        group: Option<String>,
    },
    /// Keep one variant (merged, squashed or as a branch); archive and close the others.
    #[command(
        after_help = "--dry-run answers what the pick would land — the tree and message of the \
        commit it would make, the files it would change, the variant's uncommitted files it would \
        commit first, and the conflicts — and changes nothing (no commit, not even in the variant). \
        It exits 8 when the pick would conflict, like the pick itself.\n\nExamples:\n  \
        krad variants pick login 2 --dry-run\n  krad variants pick login 2\n  \
        krad variants pick login 3 --how squash\n  \
        krad variants pick login 1 --how branch --keep-others\n  \
        krad variants pick login --best          # the ranking and the dry run\n  \
        krad variants pick login --best --yes    # and the pick\n\n\
        --best picks by rule: every gating check passed, then the fewest conflicts with the \
        base, then the least cost, then the shortest time (see `krad variants ls GROUP`). It \
        shows the ranking and the dry run, and picks only with --yes; no variant that passed \
        every gating check, or a tie, is refused (exit 8) with the table."
    )]
    Pick {
        /// The group.
        group: String,
        /// The variant to keep (or --best).
        #[arg(required_unless_present = "best", conflicts_with = "best")]
        variant: Option<u32>,
        /// Pick by rule: the first of the group's ranking.
        #[arg(long)]
        best: bool,
        /// With --best: pick after the dry run (without it, only the ranking and the dry run).
        #[arg(long, requires = "best")]
        yes: bool,
        /// The environment to merge into (default: the group's base environment).
        #[arg(long)]
        into: Option<String>,
        /// merge, squash, or branch (keep the branch only).
        #[arg(long, value_enum, default_value_t = HowArg::Merge)]
        how: HowArg,
        /// Leave the other variants open.
        #[arg(long)]
        keep_others: bool,
        /// Show what would land (commit, files, conflicts) and change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Make the request at most once with this id (safe to retry).
        #[arg(long, value_name = "ID")]
        request_id: Option<String>,
    },
    /// Run the group's checks ([checks] in the config) in its variants now.
    #[command(
        after_help = "A check of work already checked is not run again. At most \
[checks] parallel run at once across the app; the others wait in order.\n\n\
Examples:\n  krad variants check login\n  krad variants check login 2\n  \
krad variants check login && krad variants wait login --scored"
    )]
    Check {
        /// The group.
        group: String,
        /// Only this variant.
        variant: Option<u32>,
        /// Make the request at most once with this id (safe to retry).
        #[arg(long, value_name = "ID")]
        request_id: Option<String>,
    },
    /// Land several compatible variants, in the order that conflicts least;
    /// stop at the first that conflicts, with nothing of it applied.
    #[command(
        after_help = "Exit 8 when it stopped at a conflict (what landed stays).\n\n\
Examples:\n  krad variants merge login\n  krad variants merge login --variants 1,3 --into main"
    )]
    Merge {
        /// The group.
        group: String,
        /// Only these variants (default: every variant still there).
        #[arg(long, value_delimiter = ',')]
        variants: Vec<u32>,
        /// The environment to merge into (default: the group's base environment).
        #[arg(long)]
        into: Option<String>,
        /// Make the request at most once with this id (safe to retry).
        #[arg(long, value_name = "ID")]
        request_id: Option<String>,
    },
    /// Wait until every variant's agent has stopped (with --scored: and is checked).
    #[command(after_help = "Exit 5 when --timeout passes first.\n\n\
Examples:\n  krad variants wait login --scored\n  krad variants wait login --timeout 10m")]
    Wait {
        /// The group.
        group: String,
        /// Also wait until every check of every variant is over.
        #[arg(long)]
        scored: bool,
        /// Give up after this long (seconds, or 90s, 10m; at most 1800 s).
        #[arg(long, value_name = "SECS", default_value = "1800",
              value_parser = super::wait::parse_wait_secs)]
        timeout: u64,
    },
}

/// How to land a variant.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum HowArg {
    /// A merge commit (or fast-forward).
    Merge,
    /// One commit with the variant's changes.
    Squash,
    /// Keep the branch only.
    Branch,
}

/// Runs the variants subcommand.
pub(crate) fn run(args: VariantsArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let bus = AppConnection::find(connect)?;
    match args.command {
        VariantsCommand::Run {
            count,
            prompt,
            profile,
            name,
            base,
            host,
            sandbox,
            max_cost,
            max_group_cost,
            queue,
            request_id,
            command,
        } => {
            let prompt = if prompt == "-" {
                let mut text = String::new();
                std::io::stdin()
                    .read_to_string(&mut text)
                    .context("cannot read the prompt from stdin")?;
                text.trim_end_matches('\n').to_owned()
            } else {
                prompt
            };
            let request = RunVariants {
                count,
                prompt,
                profile,
                command: (!command.is_empty()).then_some(command),
                base,
                name,
                host,
                sandbox: sandbox.then_some(true),
                max_cost_usd: max_cost,
                max_group_cost_usd: max_group_cost,
                queue: queue.then_some(true),
            };
            let reply = bus.send(request, request_id.as_deref())?;
            print::emit(json, &reply, |variants| {
                print::line(&format!("group {}", variants.group));
                for v in &variants.variants {
                    let queued = v
                        .queue_place
                        .map(|place| format!(" (queued, place {place})"))
                        .unwrap_or_default();
                    print::line(&format!(
                        "  variant {}: environment {}, terminal {}{queued}",
                        v.variant, v.environment, v.terminal
                    ));
                }
            });
        }
        VariantsCommand::Ls { group: Some(group) } => {
            return scored::scoreboard(&bus, &group, json);
        }
        VariantsCommand::Ls { group: None } => return list(&bus, None, json),
        VariantsCommand::Check {
            group,
            variant,
            request_id,
        } => return scored::check(&bus, group, variant, request_id.as_deref(), json),
        VariantsCommand::Merge {
            group,
            variants,
            into,
            request_id,
        } => {
            let request = MergeVariants {
                group,
                variants: (!variants.is_empty()).then_some(variants),
                into,
            };
            return scored::merge(&bus, request, request_id.as_deref(), json);
        }
        VariantsCommand::Wait {
            group,
            scored,
            timeout,
        } => return scored::wait(&bus, group, scored, timeout, json),
        VariantsCommand::Pick {
            group,
            variant,
            best,
            yes,
            into,
            how,
            keep_others,
            dry_run,
            request_id,
        } => {
            let request = PickVariant {
                group,
                variant: variant.unwrap_or(0),
                best: false,
                into,
                how: Some(scored::how_of(how)),
                close_others: Some(!keep_others),
                dry_run,
            };
            if best {
                return scored::pick_best(&bus, request, yes, request_id.as_deref(), json);
            }
            let reply = bus.send(request, request_id.as_deref())?;
            if let Some(would) = &reply.answer.dry_run {
                print::emit(json, &reply, |picked| print::lines(dry_run_lines(picked)));
                if !would.conflicts.is_empty() {
                    return Ok(Exit::Conflict);
                }
                return Ok(Exit::Success);
            }
            print::emit(json, &reply, |picked| print::line(&picked_line(picked)));
        }
    }
    Ok(Exit::Success)
}

/// What a pick did, in a line.
pub(crate) fn picked_line(picked: &PickedInfo) -> String {
    let (variant, branch) = (picked.variant, &picked.branch);
    let commit = render::short_commit(&picked.commit);
    match &picked.into {
        Some(into) => format!("picked variant {variant} ({branch}) into {into}, now at {commit}"),
        None => format!("kept variant {variant} as branch {branch} at {commit}"),
    }
}

/// What a dry run says would land.
pub(crate) fn dry_run_lines(picked: &PickedInfo) -> Vec<String> {
    let Some(would) = &picked.dry_run else {
        return Vec::new();
    };
    let (variant, branch) = (picked.variant, &picked.branch);
    let short = render::short_commit;
    let mut lines = Vec::new();
    if !would.uncommitted.is_empty() {
        lines.push(format!(
            "would commit {} on {branch} first: {}",
            render::counted(would.uncommitted.len(), "uncommitted file"),
            would.uncommitted.join(", ")
        ));
    }
    match (&picked.into, &would.message) {
        (Some(into), _) if !would.conflicts.is_empty() => lines.push(format!(
            "variant {variant} ({branch}) conflicts with {into} in {}: {}; the pick would be refused",
            render::counted(would.conflicts.len(), "file"),
            would.conflicts.join(", ")
        )),
        (Some(into), _) if would.fast_forward => lines.push(format!(
            "would fast-forward {into} from {} to variant {variant} ({branch}), tree {}",
            short(&picked.commit),
            short(&would.tree)
        )),
        (Some(into), Some(message)) => lines.push(format!(
            "would commit on {into} (now at {}): {message:?}, tree {}",
            short(&picked.commit),
            short(&would.tree)
        )),
        (Some(into), None) => lines.push(format!(
            "{into} already has variant {variant}'s work: nothing would be committed"
        )),
        (None, _) => lines.push(format!(
            "would keep variant {variant} as branch {branch} (at {}{})",
            short(&picked.commit),
            if would.message.is_some() { ", plus a commit of its uncommitted work" } else { "" }
        )),
    }
    if would.conflicts.is_empty() {
        lines.push(format!(
            "would change {}{}{}",
            render::counted(would.files.len(), "file"),
            if would.files.is_empty() { "" } else { ": " },
            would.files.join(", ")
        ));
    }
    lines.push("dry run: nothing was changed".to_owned());
    lines
}

/// One variant as `krad variants ls` shows it.
#[derive(Debug, serde::Serialize)]
struct VariantRow {
    group: String,
    variant: u32,
    environment: String,
    terminals: Vec<u64>,
    state: Option<String>,
    /// The files, lines added and lines removed of its changes; none when
    /// they could not be read (`error` says why).
    files: Option<usize>,
    added: Option<u64>,
    removed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    cost_usd: Option<f64>,
}

/// Lists the variant groups (Environments, List, and Changes of each variant).
fn list(bus: &AppConnection, group: Option<&str>, json: bool) -> anyhow::Result<Exit> {
    let environments = bus.send(Environments::default(), None)?.answer;
    let agents = bus.send(List::default(), None)?.answer;
    let mut rows = Vec::new();
    for env in environments {
        let (Some(of), Some(variant)) = (env.group.clone(), env.variant) else {
            continue;
        };
        if group.is_some_and(|g| g != of) {
            continue;
        }
        let states: Vec<&AgentRecord> = agents
            .iter()
            .filter(|a| a.environment == env.name)
            .collect();
        let state = states.first().map(|first| {
            let more = states.len() - 1;
            let state = crate::render::Agent(first).state();
            if more > 0 {
                format!("{state} +{more}")
            } else {
                state.to_owned()
            }
        });
        let changes = bus.send(
            Changes {
                environment: env.name.clone(),
                ..Changes::default()
            },
            None,
        );
        let (files, added, removed, error) = match changes {
            Ok(reply) => {
                let files = &reply.answer.files;
                (
                    Some(files.len()),
                    Some(files.iter().map(|f| f.added).sum()),
                    Some(files.iter().map(|f| f.removed).sum()),
                    None,
                )
            }
            Err(failure) => (None, None, None, Some(failure.message)),
        };
        rows.push(VariantRow {
            group: of,
            variant,
            environment: env.name,
            terminals: env.terminals,
            state,
            files,
            added,
            removed,
            error,
            cost_usd: env
                .tokens
                .as_ref()
                .and_then(|t| t.cost_usd)
                .map(|d| d.value()),
        });
    }
    rows.sort_by(|a, b| (&a.group, a.variant).cmp(&(&b.group, b.variant)));
    if json {
        print::json(&serde_json::json!({ "Variants": rows }));
        return Ok(Exit::Success);
    }
    if rows.is_empty() {
        print::line(
            match group {
                Some(group) => format!("no variant group {group:?} (krad variants run starts one)"),
                None => "no variant groups (krad variants run starts one)".to_owned(),
            }
            .as_str(),
        );
        return Ok(Exit::Success);
    }
    let columns = [
        Column::new("GROUP", 5, 24),
        Column::new("#", 1, 3),
        Column::new("ENV", 3, 28),
        Column::new("STATE", 5, 12),
        Column::new("FILES", 5, 6),
        Column::new("+", 1, 8),
        Column::new("−", 1, 8),
        Column::new("COST", 4, 10),
    ];
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            vec![
                row.group.clone(),
                row.variant.to_string(),
                row.environment.clone(),
                row.state.clone().unwrap_or_else(|| "-".to_owned()),
                row.files.map_or_else(|| "?".to_owned(), |n| n.to_string()),
                row.added
                    .map_or_else(|| "?".to_owned(), |n| format!("+{n}")),
                row.removed
                    .map_or_else(|| "?".to_owned(), |n| format!("-{n}")),
                row.cost_usd
                    .map_or_else(|| "-".to_owned(), |c| format!("${c:.2}")),
            ]
        })
        .collect();
    print::lines(table(&columns, &cells, terminal_width()));
    let unread: Vec<String> = rows
        .iter()
        .filter_map(|row| {
            let error = row.error.as_deref()?;
            Some(format!(
                "  {}: {}",
                row.environment,
                render::one_line(error)
            ))
        })
        .collect();
    if !unread.is_empty() {
        print::line("changes not read (`?`):");
        print::lines(unread);
    }
    Ok(Exit::Success)
}
