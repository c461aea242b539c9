//! `krad tui`, and `krad` alone on a terminal: the keyboard home screen
//! (krad-tui), given the way to find the app (found again after a restart).

use std::io::IsTerminal;
use std::sync::Arc;

use krad_bus::client::Client;
use krad_bus::protocol::Caller;

use crate::apps::discovery;
use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::{Exit, Failure};

/// Arguments of `krad tui`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
The list shows every agent, grouped by environment (or variant group), `asking` first; under \
it the selected agent's screen, its environment's diff and its open asks (Tab). Enter attaches \
to the agent's real TUI (the detach key comes back), n starts an agent, s sends, a answers, \
x closes, v runs variants, p picks one after its dry run, b sets a budget, r renames, / filters, \
A switches to another repository's app on this machine, ? lists every key, q quits and leaves \
every agent running. NO_COLOR turns colours off.

Examples:
  krad
  krad tui --detach-key ctrl-]")]
pub(crate) struct TuiArgs {
    /// The key that comes back from an agent's TUI to the list: ctrl-<key> (ctrl-\\, ctrl-], …).
    #[arg(long, value_name = "KEY", default_value = "ctrl-\\", value_parser = super::attach::parse_detach_key)]
    pub detach_key: u8,
}

/// Runs the home screen until q.
pub(crate) fn run(args: TuiArgs, connect: &ConnectArgs) -> anyhow::Result<Exit> {
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        return Err(Failure::new(
            Exit::Usage,
            "krad tui needs a terminal (stdin and stdout); for a table use `krad ls` or `krad watch`",
        )
        .into());
    }
    // Said at once when no app runs; once running, the screen reconnects.
    AppConnection::find(connect)?;
    let connect = connect.clone();
    let find: krad_tui::Connect = Arc::new(move || {
        AppConnection::find(&connect)
            .map(|app| app.client().clone())
            .map_err(|failure| failure.message)
    });
    let options = krad_tui::Options {
        detach_key: args.detach_key,
        list_apps: Some(Arc::new(running_apps)),
        asking_elsewhere: Some(Arc::new(super::apps::asking_elsewhere)),
        ..krad_tui::Options::default()
    };
    krad_tui::run(find, options).map_err(|e| Failure::new(Exit::Failure, e.to_string()))?;
    Ok(Exit::Success)
}

/// The apps `A` lists: each app running on this machine (`krad apps`), its
/// agents, and how to reach it — its repository's discovery file, read
/// again at each connection, so that a restarted app is found.
fn running_apps() -> Vec<krad_tui::ListedApp> {
    super::apps::live_with_agents()
        .into_iter()
        .map(|(entry, agents)| {
            let (git_dir, root) = (entry.git_dir, entry.root.clone());
            let connect: krad_tui::Connect = Arc::new(move || {
                let found = discovery::live(&git_dir)
                    .ok_or_else(|| format!("no app serves {} any more", root.display()))?;
                Client::new(&found.endpoint, found.token, Caller::Client).map_err(|e| e.to_string())
            });
            krad_tui::ListedApp {
                root: entry.root,
                endpoint: entry.endpoint,
                agents,
                connect,
            }
        })
        .collect()
}

/// `krad` with no command: the home screen on a terminal; the help, and a
/// usage error, otherwise.
pub(crate) fn without_a_command(
    connect: &ConnectArgs,
    mut command: clap::Command,
) -> anyhow::Result<Exit> {
    if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
        let args = TuiArgs { detach_key: 0x1c };
        return run(args, connect);
    }
    eprint!("{}", command.render_help());
    Ok(Exit::Usage)
}
