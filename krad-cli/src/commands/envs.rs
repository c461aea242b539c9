//! `krad env ls`: the environments — main and the worktrees — with their state.

use krad_bus::protocol::EnvironmentInfo;
use krad_bus::request::environments::Environments;

use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::Exit;
use crate::print;
use crate::render::{self, Column};

/// Arguments of `krad env ls`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
DISK is the environment's disk use as the app last measured it (in the background, every \
60 s by default and soon after an environment is created or closed; `[environments] \
disk_refresh_secs`), `?` until measured. AGE is the time since it was created. COST is \
what its agents' model calls cost together (`krad ls`'s COST); each variant group's total \
follows the table.

Examples:
  krad env ls
  krad env ls --json | jq '.Environments[] | {name, disk_bytes, created_at}'
  krad env ls --json | jq '.Environments[] | {name, cost: .tokens.cost_usd}'
  krad gc --merged --dry-run        what could go, and what it would free")]
pub(crate) struct EnvsArgs {}

/// Lists the environments.
pub(crate) fn run(_args: EnvsArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let reply = AppConnection::find(connect)?.send(Environments {}, None)?;
    print::emit(json, &reply, |envs| {
        print::lines(envs_table(envs, render::terminal_width()));
    });
    Ok(Exit::Success)
}

/// The table of `krad env ls`, fitted to `width`.
fn envs_table(envs: &[EnvironmentInfo], width: usize) -> Vec<String> {
    let now = std::time::SystemTime::now();
    let rows: Vec<Vec<String>> = envs
        .iter()
        .map(|env| {
            let terminals: Vec<String> = env.terminals.iter().map(u64::to_string).collect();
            let group = match (&env.group, env.variant) {
                (Some(g), Some(v)) => format!("{g} #{v}"),
                _ => String::new(),
            };
            vec![
                env.name.clone(),
                render::wire_name(&env.kind),
                render::wire_name(&env.status).replace('_', " "),
                env.branch.clone().unwrap_or_default(),
                group,
                terminals.join(","),
                env.disk_bytes.map_or_else(|| "?".to_owned(), render::bytes),
                render::cost(env.tokens.as_ref()),
                env.created_at
                    .as_deref()
                    .and_then(|at| render::elapsed(at, now))
                    .map(render::relative)
                    .unwrap_or_default(),
                ports_column(env),
                env.path.clone(),
            ]
        })
        .collect();
    let columns = [
        Column::new("NAME", 4, 24),
        Column::new("KIND", 4, 8),
        Column::new("STATUS", 5, 12),
        Column::new("BRANCH", 6, 30),
        Column::new("GROUP", 5, 20),
        Column::new("TERMINALS", 9, 16),
        Column::new("DISK", 4, 10),
        Column::new("COST", 4, 9),
        Column::new("AGE", 3, 5),
        Column::new("PORTS", 5, 60),
        Column::new("PATH", 4, 200),
    ];
    let mut lines = render::table(&columns, &rows, width);
    lines.extend(group_totals(envs));
    lines
}

/// `group login: $0.0400 (21.3k tokens) over 3 variants` (or `group t: 1 variant, no
/// model usage seen`), for each variant group, by name.
fn group_totals(envs: &[EnvironmentInfo]) -> Vec<String> {
    let mut groups: std::collections::BTreeMap<&str, Vec<&EnvironmentInfo>> = Default::default();
    for env in envs {
        if let Some(group) = &env.group {
            groups.entry(group).or_default().push(env);
        }
    }
    groups
        .into_iter()
        .map(|(group, variants)| {
            let total =
                krad_bus::protocol::Tokens::sum(variants.iter().filter_map(|e| e.tokens.as_ref()));
            let variants = render::counted(variants.len(), "variant");
            match total {
                Some(t) => format!(
                    "group {group}: {} ({} tokens) over {variants}",
                    render::cost(Some(&t)),
                    render::count(t.input + t.output + t.cache_write + t.cache_read),
                ),
                None => format!("group {group}: {variants}, no model usage seen"),
            }
        })
        .collect()
}

/// An environment's ports, with those another program holds marked `in use`.
fn ports_column(env: &EnvironmentInfo) -> String {
    env.ports
        .iter()
        .map(
            |port| match env.ports_in_use.iter().find(|u| u.port == *port) {
                Some(used) => match used.pid {
                    Some(pid) => format!("{port} (in use by pid {pid})"),
                    None => format!("{port} (in use)"),
                },
                None => port.to_string(),
            },
        )
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn variant(name: &str, tokens: serde_json::Value) -> EnvironmentInfo {
        serde_json::from_value(json!({"name":name,"path":"/r","branch":null,"base":null,
            "host":null,"kind":"worktree","group":"t","variant":1,"terminals":[],
            "status":"ready","setup":null,"tokens":tokens}))
        .unwrap()
    }

    #[test]
    fn a_group_says_its_variants_and_whether_any_model_usage_was_seen() {
        let none = [variant("t-1", serde_json::Value::Null)];
        assert_eq!(
            group_totals(&none),
            ["group t: 1 variant, no model usage seen"]
        );
        let usage =
            json!({"input":1000,"output":500,"cache_write":0,"cache_read":0,"cost_usd":0.01});
        let two = [variant("t-1", usage.clone()), variant("t-2", usage)];
        assert_eq!(
            group_totals(&two),
            ["group t: $0.0200 (3.0k tokens) over 2 variants"]
        );
    }
}
