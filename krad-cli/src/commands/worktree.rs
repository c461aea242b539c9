//! `krad worktree create`: a new environment on its own branch.

use krad_bus::protocol::EnvironmentInfo;
use krad_bus::request::create_worktree::CreateWorktree;

use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::Exit;
use crate::print;
use crate::render;

/// Arguments of `krad worktree`.
#[derive(Debug, clap::Args)]
pub(crate) struct WorktreeArgs {
    #[command(subcommand)]
    pub command: WorktreeCommand,
}

/// What to do with worktrees.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum WorktreeCommand {
    /// Create a worktree environment (branch `krad/NAME` unless --branch);
    /// the same as `krad env create`.
    Create(CreateArgs),
}

/// Arguments of `krad env create` (and `krad worktree create`).
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  krad env create fix-login\n  \
    krad env create spike --base v1.2 --branch spike/new-parser\n  \
    krad env create review --base fix-login")]
pub(crate) struct CreateArgs {
    /// The environment's name.
    pub name: String,
    /// An environment or a git ref to start from (default: main's HEAD).
    #[arg(long)]
    pub base: Option<String>,
    /// The branch to create (default krad/NAME).
    #[arg(long)]
    pub branch: Option<String>,
    /// Make it on an SSH host of the config (`[hosts.NAME]`), in the host's repository.
    #[arg(long)]
    pub host: Option<String>,
    /// Make the request at most once with this id (safe to retry).
    #[arg(long, value_name = "ID")]
    pub request_id: Option<String>,
}

/// Runs the worktree subcommand.
pub(crate) fn run(args: WorktreeArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let WorktreeCommand::Create(create) = args.command;
    self::create(create, connect, json)
}

/// Creates a worktree environment (CreateWorktree) and says where.
pub(crate) fn create(args: CreateArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let CreateArgs {
        name,
        base,
        branch,
        host,
        request_id,
    } = args;
    let request = CreateWorktree {
        name,
        base,
        branch,
        host,
    };
    let reply = AppConnection::find(connect)?.send(request, request_id.as_deref())?;
    print::emit(json, &reply, |env| print::lines(created_lines(env)));
    Ok(Exit::Success)
}

/// What was created, and how its setup went.
fn created_lines(env: &EnvironmentInfo) -> Vec<String> {
    let mut lines = vec![format!(
        "created environment {} on branch {} at {}",
        env.name,
        env.branch.as_deref().unwrap_or("?"),
        env.path,
    )];
    if let Some(setup) = &env.setup {
        let status = render::wire_name(&env.status).replace('_', " ");
        lines.push(format!("setup `{}`: {status}", setup.command));
    }
    lines
}
