//! `krad archive ls [--host H]` (Archives) and `krad archive restore NAME
//! [--as NEW] [--host H]` (RestoreArchive): the work Close kept under
//! `refs/krad/archive/`, here or in an SSH host's repository.

use krad_bus::protocol::{ArchiveInfo, EnvironmentInfo};
use krad_bus::request::archives::{Archives, RestoreArchive};

use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::Exit;
use crate::print;
use crate::render;

/// Arguments of `krad archive`.
#[derive(Debug, clap::Args)]
pub(crate) struct ArchiveArgs {
    #[command(subcommand)]
    pub command: ArchiveCommand,
}

/// What to do with the archives.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum ArchiveCommand {
    /// List the archived work: refs/krad/archive/*, newest first (Archives).
    #[command(after_help = "\
Every Close of an environment keeps its tip under refs/krad/archive/<name> (<name>-2, … \
when taken) in the repository it lived in — this machine's, or an SSH host's — its \
uncommitted work committed there first (marked `uncommitted`). Each line: name, commit, \
date, subject, then `host H` for a host's. Without --host, this machine's archives then \
each configured host's; a host that cannot be reached fails the listing (exit 1) with \
its reason.

Examples:
  krad archive ls
  krad archive ls --host gpu
  krad archive ls --json")]
    Ls {
        /// Only the archives of this SSH host's repository ([hosts.NAME]).
        #[arg(long, value_name = "HOST")]
        host: Option<String>,
    },
    /// Make archived work an environment again (RestoreArchive).
    #[command(after_help = "\
A new worktree environment (NAME, or --as NEW) on a new branch krad/<name> at the archived \
commit. When that commit is krad's commit of the uncommitted work, its changes are \
uncommitted files again (reset --mixed to its parent, in the new worktree only). The \
archive ref stays. With --host, the archive is the host's and the environment is made \
on that host. An environment or branch of that name already → exit 8; no such \
archive → exit 3; a host that cannot be reached → exit 1.

Examples:
  krad archive restore fix-login
  krad archive restore fix-login --as fix-login-2
  krad archive restore train --host gpu
  krad archive restore fix-login --request-id restore-fix-login-1")]
    Restore {
        /// The archive's name (as `krad archive ls` shows it).
        name: String,
        /// The new environment's name (default: the archive's).
        #[arg(long = "as", value_name = "NEW")]
        as_name: Option<String>,
        /// The SSH host whose repository has the archive; the environment is made there.
        #[arg(long, value_name = "HOST")]
        host: Option<String>,
        /// Make the request at most once with this id (safe to retry).
        #[arg(long, value_name = "ID")]
        request_id: Option<String>,
    },
}

/// Runs the archive subcommand.
pub(crate) fn run(args: ArchiveArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    match args.command {
        ArchiveCommand::Ls { host } => {
            let reply = AppConnection::find(connect)?.send(Archives { host }, None)?;
            print::emit(json, &reply, |archives| print::lines(ls_lines(archives)));
        }
        ArchiveCommand::Restore {
            name,
            as_name,
            host,
            request_id,
        } => {
            let request = RestoreArchive {
                name,
                as_name,
                host,
            };
            let reply = AppConnection::find(connect)?.send(request, request_id.as_deref())?;
            print::emit(json, &reply, |env| print::line(&restored_line(env)));
        }
    }
    Ok(Exit::Success)
}

/// One line per archive: name, commit, date, subject (and its host).
fn ls_lines(archives: &[ArchiveInfo]) -> Vec<String> {
    if archives.is_empty() {
        return vec!["no archives".to_owned()];
    }
    let width = archives.iter().map(|a| a.name.len()).max().unwrap_or(0);
    archives
        .iter()
        .map(|a| {
            format!(
                "{:width$}  {}  {}  {}{}{}",
                a.name,
                render::short_commit(&a.commit),
                a.date,
                a.subject,
                if a.uncommitted { "  [uncommitted]" } else { "" },
                a.host
                    .as_ref()
                    .map(|h| format!("  host {h}"))
                    .unwrap_or_default(),
            )
        })
        .collect()
}

fn restored_line(env: &EnvironmentInfo) -> String {
    format!(
        "restored environment {} on branch {} at {}{}",
        env.name,
        env.branch.as_deref().unwrap_or("?"),
        env.path,
        env.host
            .as_ref()
            .map(|h| format!(" on host {h}"))
            .unwrap_or_default()
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
            host: None,
        };
        let far = ArchiveInfo {
            name: "train".into(),
            subject: "faster".into(),
            uncommitted: false,
            host: Some("gpu".into()),
            ..a.clone()
        };
        assert_eq!(
            ls_lines(&[a, far]),
            [
                "fix    0123456789  2026-12-01T22:40:00+00:00  krad: archive the uncommitted work of fix  [uncommitted]",
                "train  0123456789  2026-12-01T22:40:00+00:00  faster  host gpu"
            ]
        );
        assert_eq!(ls_lines(&[]), ["no archives"]);
    }
}
