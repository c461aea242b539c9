//! `krad changes`: what an environment did since it was created — a diffstat, or
//! the patch (coloured on a terminal).

use std::io::IsTerminal;

use krad_bus::protocol::{ChangesInfo, FileStatus};
use krad_bus::request::changes::Changes;

use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::Exit;
use crate::print;
use crate::render;

/// Arguments of `krad changes`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Committed and uncommitted work are both shown, untracked files included, \
against the commit the environment was created from.\n\nExamples:\n  krad changes fix-login\n  \
krad changes fix-login --patch | less -R\n  krad changes main --json"
)]
pub(crate) struct ChangesArgs {
    /// The environment.
    pub environment: String,
    /// Print the patch instead of the diffstat.
    #[arg(long)]
    pub patch: bool,
    /// Colour the patch: auto (on a terminal), always, never.
    #[arg(long, value_enum, default_value_t = ColorWhen::Auto)]
    pub color: ColorWhen,
}

/// When to colour.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum ColorWhen {
    /// On a terminal.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

/// Prints the changes.
pub(crate) fn run(args: ChangesArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let request = Changes {
        environment: args.environment,
        patch: Some(args.patch),
    };
    let reply = AppConnection::find(connect)?.send(request, None)?;
    print::emit(json, &reply, |changes| {
        if args.patch {
            print_patch(changes, args.color);
        } else {
            print::lines(diffstat(changes));
        }
    });
    Ok(Exit::Success)
}

/// The patch, coloured when `color` says so.
fn print_patch(changes: &ChangesInfo, color: ColorWhen) {
    let colour = match color {
        ColorWhen::Always => true,
        ColorWhen::Never => false,
        ColorWhen::Auto => {
            std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
        }
    };
    for line in changes.patch.as_deref().unwrap_or_default().lines() {
        print::line(&if colour { paint(line) } else { line.to_owned() });
    }
    if changes.truncated {
        eprintln!("krad: the patch was cut at the answer's size limit");
    }
}

/// A line per file, then the totals; `no changes` when there are none.
fn diffstat(changes: &ChangesInfo) -> Vec<String> {
    let files = &changes.files;
    if files.is_empty() {
        return vec!["no changes".to_owned()];
    }
    let width = files
        .iter()
        .map(|f| f.path.chars().count())
        .max()
        .unwrap_or(0);
    let (mut added, mut removed) = (0, 0);
    let mut lines = Vec::with_capacity(files.len() + 1);
    for file in files {
        let (path, a, r) = (&file.path, file.added, file.removed);
        added += a;
        removed += r;
        let detail = if file.binary {
            "binary".to_owned()
        } else {
            format!("+{a} -{r}")
        };
        let status = match (file.status, &file.from) {
            (FileStatus::Renamed, Some(from)) => format!("renamed from {from}"),
            (status, _) => render::wire_name(&status),
        };
        lines.push(format!(" {path:<width$}  {detail:>12}  {status}"));
    }
    // git's own summary line.
    lines.push(format!(
        " {} changed, {}(+), {}(-)",
        render::counted(files.len(), "file"),
        render::counted(added as usize, "insertion"),
        render::counted(removed as usize, "deletion"),
    ));
    lines
}

fn paint(line: &str) -> String {
    let code = if line.starts_with("+++") || line.starts_with("---") || line.starts_with("diff ") {
        "1"
    } else if line.starts_with('+') {
        "32"
    } else if line.starts_with('-') {
        "31"
    } else if line.starts_with("@@") {
        "36"
    } else {
        return line.to_owned();
    };
    format!("\x1b[{code}m{line}\x1b[0m")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_diffstat_line_per_file() {
        let changes = json!({"environment":"feat","base":"a1","head":"b2","truncated":false,
            "files":[{"path":"src/lib.rs","status":"modified","added":3,"removed":1},
                {"path":"new.rs","from":"old.rs","status":"renamed","added":0,"removed":0},
                {"path":"logo.png","status":"added","added":0,"removed":0,"binary":true}]});
        let lines = diffstat(&serde_json::from_value(changes).unwrap());
        assert_eq!(
            lines,
            [
                " src/lib.rs         +3 -1  modified",
                " new.rs             +0 -0  renamed from old.rs",
                " logo.png          binary  added",
                " 3 files changed, 3 insertions(+), 1 deletion(-)",
            ]
        );
    }
}
