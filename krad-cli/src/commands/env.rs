//! `krad env`: the one noun for environments — `create` (CreateWorktree),
//! `ls` (Environments), `close` (Close of an environment) and `update`
//! (UpdateEnvironment). The older spellings `krad worktree create`, `krad envs`
//! and `krad close --env` do the same.

use krad_bus::protocol::UpdatedInfo;
use krad_bus::request::update_environment::{UpdateEnvironment, UpdateHow};

use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::Exit;
use crate::print;
use crate::render;

/// Arguments of `krad env`.
#[derive(Debug, clap::Args)]
pub(crate) struct EnvArgs {
    #[command(subcommand)]
    pub command: EnvCommand,
}

/// What to do with an environment.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum EnvCommand {
    /// Create a worktree environment (branch `krad/NAME` unless --branch).
    Create(super::worktree::CreateArgs),
    /// The environments — main and the worktrees — with their state.
    #[command(visible_alias = "list")]
    Ls(super::envs::EnvsArgs),
    /// Close a worktree environment: its terminals, then its worktree and
    /// branch (their tip archived under refs/krad/archive/).
    #[command(
        after_help = "Uncommitted or unmerged work refuses the close (exit 8) unless \
--force.\n\nExamples:\n  krad env close feat-x\n  krad env close feat-x --force"
    )]
    Close {
        /// The environment (never main).
        name: String,
        /// Close it even with uncommitted or unmerged work.
        #[arg(long)]
        force: bool,
    },
    /// Bring a worktree environment up to its base environment's current tip (UpdateEnvironment).
    #[command(after_help = "\
Merges the base environment's tip into the environment's branch (--merge, the default; a \
fast-forward when it has no commits of its own), or replays its commits on that tip \
(--rebase). Uncommitted changes (untracked files included) are refused: exit 8, naming \
the files. A conflict is refused too — exit 8, naming the files — and nothing is changed: \
the merge or rebase is worked out on git objects first, and the worktree moves only once \
it is known to succeed. Afterwards the environment's base is that tip, so `krad changes` \
shows its own work only. `krad conflicts` foresees conflicts first.

Examples:
  krad env update fix-login
  krad env update fix-login --rebase
  krad env update fix-login --request-id update-fix-login-1")]
    Update {
        /// The worktree environment.
        name: String,
        /// Replay its commits on the base's tip.
        #[arg(long, conflicts_with = "merge")]
        rebase: bool,
        /// Merge the base's tip into it (the default).
        #[arg(long)]
        merge: bool,
        /// Make the request at most once with this id (safe to retry).
        #[arg(long, value_name = "ID")]
        request_id: Option<String>,
    },
}

/// Runs the env subcommand.
pub(crate) fn run(args: EnvArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let (name, rebase, request_id) = match args.command {
        EnvCommand::Create(create) => return super::worktree::create(create, connect, json),
        EnvCommand::Ls(ls) => return super::envs::run(ls, connect, json),
        EnvCommand::Close { name, force } => {
            let close = super::close::CloseArgs {
                target: None,
                environment: Some(name),
                force,
            };
            return super::close::run(close, connect, json);
        }
        EnvCommand::Update {
            name,
            rebase,
            merge: _,
            request_id,
        } => (name, rebase, request_id),
    };
    let request = UpdateEnvironment {
        environment: name,
        how: Some(if rebase {
            UpdateHow::Rebase
        } else {
            UpdateHow::Merge
        }),
    };
    let reply = AppConnection::find(connect)?.send(request, request_id.as_deref())?;
    print::emit(json, &reply, |updated| print::line(&updated_line(updated)));
    Ok(Exit::Success)
}

/// What the update did.
fn updated_line(u: &UpdatedInfo) -> String {
    let tip = render::short_commit(&u.base);
    if u.before == u.head {
        format!(
            "{} is up to date with {} ({tip})",
            u.environment, u.base_environment
        )
    } else {
        format!(
            "updated {} to {} ({tip}){}: {} → {}",
            u.environment,
            u.base_environment,
            if u.fast_forward {
                " by a fast-forward"
            } else {
                ""
            },
            render::short_commit(&u.before),
            render::short_commit(&u.head)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn says_what_moved() {
        let mut u = UpdatedInfo {
            environment: "fix".into(),
            base_environment: "main".into(),
            base: "0123456789abcdef".into(),
            before: "aaaaaaaaaaaa".into(),
            head: "aaaaaaaaaaaa".into(),
            fast_forward: false,
        };
        assert_eq!(updated_line(&u), "fix is up to date with main (0123456789)");
        u.head = "bbbbbbbbbbbbb".into();
        assert_eq!(
            updated_line(&u),
            "updated fix to main (0123456789): aaaaaaaaaa → bbbbbbbbbb"
        );
    }
}
