//! `krad internal …` (hidden): what an app runs on an SSH host through its
//! link, with the same code it runs here.
//!
//! * `krad internal ports --owner ID claim --first P --count N [--keep P]…` —
//!   hands out a block from the host's port registry to the app `ID`, giving
//!   back first any other port `ID` holds that `--keep` does not name.
//! * `… retake [PORT]…` — takes those back for `ID` (a host whose runtime dir
//!   was emptied), gives back every other port `ID` holds.
//! * `… release PORT…` — gives ports of `ID` back.
//! * `krad internal ports in-use --dir DIR PORT…` — the ports some program
//!   outside DIR listens on, with its pid when /proc tells.
//!
//! Each prints one JSON line ([`PortsAnswer`]); a failure is one line on
//! stderr and exit 1.
//!
//! `krad internal sandboxed` is run by the app here, as the first process
//! inside an agent's sandbox ([`super::sandboxed`]).

use anyhow::{Context, bail};
use krad_app::port_registry::{self, Holder, PortsAnswer, Registry};

use crate::exit::Exit;

/// Arguments of `krad internal`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Run by the app — `ports` on an SSH host through its link, `sandboxed` inside an \
agent's sandbox; you do not call it yourself.

Examples:
  krad internal ports --owner app-0123abcd claim --first 20000 --count 3
  krad internal ports --owner app-0123abcd release 20000 20001 20002
  krad internal ports in-use --dir /srv/repo/.krad/worktrees/web 20000 20001
  krad internal sandboxed --listen 127.0.0.1:41234 --to /repo/.git/krad/sandbox-bus.sock \\
    --net /repo/.git/krad/sandbox/4.net.sock --relay 127.0.0.1:8080 -- claude")]
pub(crate) struct InternalArgs {
    #[command(subcommand)]
    pub command: InternalCommand,
}

/// What the app asks of the host.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum InternalCommand {
    /// This machine's registry of ports handed out to environments.
    Ports(PortsArgs),
    /// The first process inside an agent's sandbox (the app runs it there).
    Sandboxed(super::sandboxed::SandboxedArgs),
}

/// Arguments of `krad internal ports`.
#[derive(Debug, clap::Args)]
pub(crate) struct PortsArgs {
    /// The app the ports are for (`app-<hex>`; not needed by `in-use`).
    #[arg(long, value_name = "ID")]
    pub owner: Option<String>,
    #[command(subcommand)]
    pub command: PortsCommand,
}

/// What to do with the registry.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum PortsCommand {
    /// Hand out a block of free ports.
    Claim {
        /// The lowest port to hand out.
        #[arg(long)]
        first: u16,
        /// How many ports (at least 1).
        #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
        count: u16,
        /// A port the owner still uses (any other it holds is given back).
        #[arg(long = "keep", value_name = "PORT")]
        keep: Vec<u16>,
    },
    /// Take ports back after a restart; give back every other the owner holds.
    Retake {
        /// The owner's ports.
        ports: Vec<u16>,
    },
    /// Give ports back.
    Release {
        /// The ports.
        #[arg(required = true)]
        ports: Vec<u16>,
    },
    /// The ports some program outside DIR listens on.
    InUse {
        /// The environment's directory (its own programs do not count).
        #[arg(long)]
        dir: std::path::PathBuf,
        /// The ports to look at.
        #[arg(required = true)]
        ports: Vec<u16>,
    },
}

/// Runs `krad internal`.
pub(crate) fn run(args: InternalArgs) -> anyhow::Result<Exit> {
    let ports = match args.command {
        InternalCommand::Ports(ports) => ports,
        InternalCommand::Sandboxed(args) => return super::sandboxed::run(args),
    };
    let answer = run_ports(ports)?;
    println!("{}", serde_json::to_string(&answer)?);
    Ok(Exit::Success)
}

fn run_ports(args: PortsArgs) -> anyhow::Result<PortsAnswer> {
    if let PortsCommand::InUse { dir, ports } = &args.command {
        return Ok(PortsAnswer {
            in_use: port_registry::in_use(ports, dir),
            ..PortsAnswer::default()
        });
    }
    let Some(owner) = args.owner.as_deref() else {
        bail!("--owner ID is required (the app's id, app-<hex>)");
    };
    let Some(me) = Holder::app(owner) else {
        bail!("--owner {owner:?} is not an app id (app- then 1-64 letters, digits, ., _ or -)");
    };
    let registry = Registry::open().context("cannot open the port registry")?;
    let mut answer = PortsAnswer::default();
    match args.command {
        PortsCommand::Claim { first, count, keep } => {
            answer.released = release_others(&registry, &me, &keep);
            answer.ports = registry
                .claim(&me, first, count)
                .map_err(anyhow::Error::msg)?;
        }
        PortsCommand::Retake { ports } => {
            answer.released = release_others(&registry, &me, &ports);
            answer.held_by_others = ports
                .into_iter()
                .filter(|port| !registry.retake(*port, &me))
                .collect();
        }
        PortsCommand::Release { ports } => {
            for port in &ports {
                registry.release(*port, &me);
            }
            answer.released = ports;
        }
        PortsCommand::InUse { .. } => {}
    }
    Ok(answer)
}

/// Gives back every port `me` holds that `keep` does not name.
fn release_others(registry: &Registry, me: &Holder, keep: &[u16]) -> Vec<u16> {
    let others: Vec<u16> = registry
        .held_by(me)
        .into_iter()
        .filter(|port| !keep.contains(port))
        .collect();
    for port in &others {
        registry.release(*port, me);
    }
    others
}
