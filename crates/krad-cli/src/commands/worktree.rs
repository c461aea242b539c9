//! `krad worktree create`: a new environment on its own branch.

use krad_bus::request::{Request, create_worktree::CreateWorktree, deadline};

use crate::connect::{Bus, ConnectArgs};
use crate::exit::Exit;
use crate::output;

/// Arguments of `krad worktree`.
#[derive(Debug, clap::Args)]
pub struct WorktreeArgs {
    #[command(subcommand)]
    pub command: WorktreeCommand,
}

/// What to do with worktrees.
#[derive(Debug, clap::Subcommand)]
pub enum WorktreeCommand {
    /// Create a worktree environment (branch `krad/NAME` unless --branch).
    #[command(after_help = "Examples:\n  krad worktree create fix-login\n  \
        krad worktree create spike --base v1.2 --branch spike/new-parser\n  \
        krad worktree create review --base fix-login")]
    Create {
        /// The environment's name.
        name: String,
        /// An environment or a git ref to start from (default: main's HEAD).
        #[arg(long)]
        base: Option<String>,
        /// The branch to create (default krad/NAME).
        #[arg(long)]
        branch: Option<String>,
        /// Make it on an SSH host of the config (`[hosts.NAME]`), in the host's repository.
        #[arg(long)]
        host: Option<String>,
        /// Make the request at most once with this id (safe to retry).
        #[arg(long, value_name = "ID")]
        request_id: Option<String>,
    },
}

/// Runs the worktree subcommand.
pub fn run(args: WorktreeArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let WorktreeCommand::Create {
        name,
        base,
        branch,
        host,
        request_id,
    } = args.command;
    let bus = Bus::find(connect)?;
    let request = Request::CreateWorktree(CreateWorktree {
        name,
        base,
        branch,
        host,
    });
    let answer = bus.call(&request.to_value(), request_id.as_deref(), deadline::LONG)?;
    if json {
        output::json(&answer);
        return Ok(Exit::Success);
    }
    let env = &answer["Environment"];
    output::line(&format!(
        "created environment {} on branch {} at {}",
        env["name"].as_str().unwrap_or("?"),
        env["branch"].as_str().unwrap_or("?"),
        env["path"].as_str().unwrap_or("?"),
    ));
    if let Some(setup) = env.get("setup").filter(|s| s.is_object()) {
        let status = env["status"].as_str().unwrap_or("?").replace('_', " ");
        output::line(&format!(
            "setup `{}`: {status}",
            setup["command"].as_str().unwrap_or("")
        ));
    }
    Ok(Exit::Success)
}
