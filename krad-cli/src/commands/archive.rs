//! `krad archive ls` (Archives) and `krad archive restore NAME [--as NEW]`
//! (RestoreArchive): the work Close kept under `refs/krad/archive/`.

use krad_bus::protocol::{ArchiveInfo, EnvironmentInfo};
use krad_bus::request::archives::{Archives, RestoreArchive};

use crate::connect::{Bus, ConnectArgs};
use crate::exit::Exit;
use crate::output;

/// Arguments of `krad archive`.
#[derive(Debug, clap::Args)]
pub struct ArchiveArgs {
    #[command(subcommand)]
    pub command: ArchiveCommand,
}

/// What to do with the archives.
#[derive(Debug, clap::Subcommand)]
pub enum ArchiveCommand {
    /// List the archived work: refs/krad/archive/*, newest first (Archives).
    #[command(after_help = "\
Every Close of an environment keeps its tip under refs/krad/archive/<name> (<name>-2, … \
when taken), its uncommitted work committed there first (marked `uncommitted`). Each line: \
name, commit, date, subject.

Examples:
  krad archive ls
  krad archive ls --json")]
    Ls,
    /// Make archived work an environment again (RestoreArchive).
    #[command(after_help = "\
A new worktree environment (NAME, or --as NEW) on a new branch krad/<name> at the archived \
commit. When that commit is krad's commit of the uncommitted work, its changes are \
uncommitted files again (reset --mixed to its parent, in the new worktree only). The \
archive ref stays. An environment or branch of that name already → exit 8; no such \
archive → exit 3.

Examples:
  krad archive restore fix-login
  krad archive restore fix-login --as fix-login-2
  krad archive restore fix-login --request-id restore-fix-login-1")]
    Restore {
        /// The archive's name (as `krad archive ls` shows it).
        name: String,
        /// The new environment's name (default: the archive's).
        #[arg(long = "as", value_name = "NEW")]
        as_name: Option<String>,
        /// Make the request at most once with this id (safe to retry).
        #[arg(long, value_name = "ID")]
        request_id: Option<String>,
    },
}

/// Runs the archive subcommand.
pub fn run(args: ArchiveArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    match args.command {
        ArchiveCommand::Ls => {
            let reply = Bus::find(connect)?.send(Archives {}, None)?;
            output::emit(json, &reply, |archives| output::lines(ls_lines(archives)));
        }
        ArchiveCommand::Restore {
            name,
            as_name,
            request_id,
        } => {
            let request = RestoreArchive { name, as_name };
            let reply = Bus::find(connect)?.send(request, request_id.as_deref())?;
            output::emit(json, &reply, |env| output::line(&restored_line(env)));
        }
    }
    Ok(Exit::Success)
}

/// One line per archive: name, commit, date, subject.
fn ls_lines(archives: &[ArchiveInfo]) -> Vec<String> {
    if archives.is_empty() {
        return vec!["no archives".to_owned()];
    }
    let width = archives.iter().map(|a| a.name.len()).max().unwrap_or(0);
    archives
        .iter()
        .map(|a| {
            format!(
                "{:width$}  {}  {}  {}{}",
                a.name,
                a.commit.get(..10).unwrap_or(&a.commit),
                a.date,
                a.subject,
                if a.uncommitted { "  [uncommitted]" } else { "" },
            )
        })
        .collect()
}

fn restored_line(env: &EnvironmentInfo) -> String {
    format!(
        "restored environment {} on branch {} at {}",
        env.name,
        env.branch.as_deref().unwrap_or("?"),
        env.path
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_name_commit_date_subject() {
        let a = ArchiveInfo {
            name: "fix".into(),
            commit: "0123456789abcdef".into(),
            date: "2026-12-01T22:40:00+00:00".into(),
            subject: "krad: archive the uncommitted work of fix".into(),
            uncommitted: true,
        };
        assert_eq!(
            ls_lines(&[a]),
            [
                "fix  0123456789  2026-12-01T22:40:00+00:00  krad: archive the uncommitted work of fix  [uncommitted]"
            ]
        );
        assert_eq!(ls_lines(&[]), ["no archives"]);
    }
}
