//! `krad conflicts`: which environments' work would conflict — a matrix of every
//! pair, and each against its base — once, or kept current with `--watch`.

use std::io::IsTerminal;
use std::time::Duration;

use krad_bus::protocol::{ConflictsEnvironment, ConflictsInfo};
use krad_bus::request::conflicts::Conflicts;

use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::Exit;
use crate::print;
use crate::render;

/// Arguments of `krad conflicts`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Every pair of environments (main and the worktrees, or the ones named), and each against \
its base environment's current tip: whether their work — committed and uncommitted, \
untracked files included — merges cleanly. Worked out with `git merge-tree` on snapshots: \
no worktree, index or branch is touched. Environments on an SSH host are compared on the \
host, with each other; environments on different machines are not paired.

In the matrix, `ok` merges cleanly, `!N` has N conflicting files (listed below it), `-` is \
an environment against itself or main's base (it has none), `.` was not compared (another \
machine, or it could not be read: the reason is below). A `*` after a name: it has \
uncommitted work, included.

--watch asks again every 2 seconds (polling: a change in a worktree's files is seen within \
2 s plus the time to compute) and prints the matrix again whenever it changes; on a \
terminal it is redrawn in place. With --json, one answer per line, each time the answer \
changes. Ends when the app stops.

Examples:
  krad conflicts
  krad conflicts main fix-login spike
  krad conflicts --watch
  krad conflicts --json | jq '.Conflicts.pairs[] | select(.clean | not)'")]
pub(crate) struct ConflictsArgs {
    /// Only these environments (default: main and every worktree).
    #[arg(value_name = "ENV")]
    pub environments: Vec<String>,
    /// Keep it current: ask every 2 s, print again on every change.
    #[arg(long)]
    pub watch: bool,
}

/// How often `--watch` asks.
const POLL: Duration = Duration::from_secs(2);

/// Prints the matrix, once or on every change.
pub(crate) fn run(args: ConflictsArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let bus = AppConnection::find(connect)?;
    let request = Conflicts {
        environments: (!args.environments.is_empty()).then_some(args.environments),
    };
    if !args.watch {
        let reply = bus.send(request, None)?;
        print::emit(json, &reply, |info| print::lines(matrix(info)));
        return Ok(Exit::Success);
    }
    let live = !json && std::io::stdout().is_terminal();
    let mut last: Option<String> = None;
    loop {
        let reply = match bus.send(request.clone(), None) {
            Ok(reply) => reply,
            Err(failure) if failure.exit == Exit::Unreachable && last.is_some() => {
                if !json {
                    print::line("the app stopped");
                }
                return Ok(Exit::Success);
            }
            Err(failure) => return Err(failure.into()),
        };
        let text = if json {
            reply.raw.to_string()
        } else {
            matrix(&reply.answer).join("\n")
        };
        if last.as_ref() != Some(&text) {
            if live {
                print::line(&format!(
                    "\x1b[H\x1b[2Jkrad conflicts: asked every {} s — Ctrl-C to quit\n{text}",
                    POLL.as_secs()
                ));
            } else if json || last.is_none() {
                print::line(&text);
            } else {
                print::line(&format!("\n{text}"));
            }
            last = Some(text);
        }
        std::thread::sleep(POLL);
    }
}

/// The matrix, then the conflicting files and what could not be compared.
fn matrix(info: &ConflictsInfo) -> Vec<String> {
    let envs = &info.environments;
    if envs.is_empty() {
        return vec!["no environments".to_owned()];
    }
    let label = |e: &ConflictsEnvironment| {
        if e.uncommitted {
            format!("{}*", e.name)
        } else {
            e.name.clone()
        }
    };
    let pair = |a: &str, b: &str| {
        info.pairs
            .iter()
            .find(|p| (p.a == a && p.b == b) || (p.a == b && p.b == a))
    };
    let mut rows: Vec<Vec<String>> = vec![
        ["#", "ENVIRONMENT", "BASE"]
            .into_iter()
            .map(str::to_owned)
            .chain((1..=envs.len()).map(|n| n.to_string()))
            .collect(),
    ];
    for (i, env) in envs.iter().enumerate() {
        let base = match (&env.base, env.error.is_some(), env.name == "main") {
            (Some(base), _, _) => cell(base.clean, base.files.len()),
            (None, false, true) => "-".to_owned(),
            _ => ".".to_owned(),
        };
        let mut row = vec![(i + 1).to_string(), label(env), base];
        for (j, other) in envs.iter().enumerate() {
            row.push(if i == j {
                "-".to_owned()
            } else {
                pair(&env.name, &other.name)
                    .map_or_else(|| ".".to_owned(), |p| cell(p.clean, p.files.len()))
            });
        }
        rows.push(row);
    }
    let columns = rows[0].len();
    let widths: Vec<usize> = (0..columns)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut lines: Vec<String> = rows
        .iter()
        .map(|row| {
            row.iter()
                .zip(&widths)
                .enumerate()
                .map(|(c, (text, &w))| {
                    if c == 1 {
                        format!("{text:<w$}")
                    } else {
                        format!("{text:>w$}")
                    }
                })
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_owned()
        })
        .collect();
    let mut notes = Vec::new();
    for p in info.pairs.iter().filter(|p| !p.clean) {
        notes.push(format!("{} and {}: {}", p.a, p.b, p.files.join(", ")));
    }
    for env in envs {
        if let Some(base) = env.base.as_ref().filter(|b| !b.clean) {
            notes.push(format!(
                "{} against {} ({}): {}",
                env.name,
                base.environment,
                render::short_commit(&base.tip),
                base.files.join(", ")
            ));
        }
    }
    lines.push(String::new());
    if notes.is_empty() {
        lines.push("no conflicts".to_owned());
    } else {
        lines.push("conflicts:".to_owned());
        lines.extend(notes.into_iter().map(|n| format!("  {n}")));
    }
    let errors: Vec<String> = envs
        .iter()
        .filter_map(|e| Some(format!("  {}: {}", e.name, e.error.as_ref()?)))
        .collect();
    if !errors.is_empty() {
        lines.push("not compared:".to_owned());
        lines.extend(errors);
    }
    lines
}

/// `ok`, or `!N` for N conflicting files.
fn cell(clean: bool, files: usize) -> String {
    if clean {
        "ok".to_owned()
    } else {
        format!("!{files}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_matrix_with_its_conflicts_listed() {
        let info: ConflictsInfo = serde_json::from_value(json!({
            "environments": [
                {"name": "main", "head": "a", "tree": "t", "uncommitted": false},
                {"name": "fix", "head": "b", "tree": "u", "uncommitted": true,
                 "base": {"environment": "main", "tip": "0123456789abcdef", "clean": false, "files": ["README.md"]}},
                {"name": "spike", "head": "c", "tree": "v", "uncommitted": false,
                 "base": {"environment": "main", "tip": "0123456789abcdef", "clean": true, "files": []}},
                {"name": "gone", "head": null, "tree": null, "uncommitted": false, "error": "its directory is gone"}
            ],
            "pairs": [
                {"a": "main", "b": "fix", "clean": false, "files": ["README.md", "src/a.rs"]},
                {"a": "main", "b": "spike", "clean": true, "files": []},
                {"a": "fix", "b": "spike", "clean": true, "files": []}
            ]
        }))
        .unwrap();
        assert_eq!(
            matrix(&info),
            [
                "#  ENVIRONMENT  BASE   1   2   3  4",
                "1  main            -   -  !2  ok  .",
                "2  fix*           !1  !2   -  ok  .",
                "3  spike          ok  ok  ok   -  .",
                "4  gone            .   .   .   .  -",
                "",
                "conflicts:",
                "  main and fix: README.md, src/a.rs",
                "  fix against main (0123456789): README.md",
                "not compared:",
                "  gone: its directory is gone",
            ]
        );
        let clean = ConflictsInfo {
            environments: info.environments[..1].to_vec(),
            pairs: Vec::new(),
        };
        assert_eq!(matrix(&clean).last().unwrap(), "no conflicts");
    }
}
