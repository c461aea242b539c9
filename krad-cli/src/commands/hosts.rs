//! `krad hosts`: the SSH hosts of the config and the state of their links;
//! `krad hosts check NAME` connects and says whether the host answers.

use krad_bus::protocol::HostStatus;
use krad_bus::request::hosts::{CheckHost, Hosts};

use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::Exit;
use crate::print;
use crate::render::{self, Column};

/// Arguments of `krad hosts`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Hosts are configured as [hosts.NAME] in the config file (see docs/hosts.md).\n\
    TMUX says whether a host's terminals live in tmux there (they outlive the link and the app).\n\n\
    Examples:\n  krad hosts\n  krad hosts check gpu\n  krad hosts --json"
)]
pub(crate) struct HostsArgs {
    #[command(subcommand)]
    pub command: Option<HostsCommand>,
}

/// What to do with hosts.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum HostsCommand {
    /// Connect to a host (if needed) and show its link; exit 1 with ssh's reason when it cannot be reached.
    Check {
        /// The host's name in the config.
        name: String,
    },
}

/// Lists or checks hosts.
pub(crate) fn run(args: HostsArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let bus = AppConnection::find(connect)?;
    let reply = match args.command {
        None => bus.send(Hosts {}, None)?,
        Some(HostsCommand::Check { name }) => bus.send(CheckHost { name }, None)?,
    };
    print::emit(json, &reply, |hosts| {
        print::lines(hosts_table(hosts, render::terminal_width()));
    });
    Ok(Exit::Success)
}

/// The table of `krad hosts`, fitted to `width`; a hint when there are none.
fn hosts_table(hosts: &[HostStatus], width: usize) -> Vec<String> {
    if hosts.is_empty() {
        return vec!["no hosts (add [hosts.NAME] to the config file)".to_owned()];
    }
    let rows: Vec<Vec<String>> = hosts
        .iter()
        .map(|h| {
            vec![
                h.name.clone(),
                h.ssh.clone(),
                h.state.to_string(),
                match h.tmux {
                    Some(true) => "yes".to_owned(),
                    Some(false) => "no".to_owned(),
                    None => String::new(),
                },
                h.remote_port.map(|p| p.to_string()).unwrap_or_default(),
                h.reconnects.to_string(),
                render::one_line(h.error.as_deref().unwrap_or_default()),
            ]
        })
        .collect();
    let columns = [
        Column::new("NAME", 4, 20),
        Column::new("SSH", 3, 30),
        Column::new("STATE", 5, 10),
        Column::new("TMUX", 4, 4),
        Column::new("PORT", 4, 6),
        Column::new("RECONNECTS", 10, 10),
        Column::new("ERROR", 5, 4096),
    ];
    render::table(&columns, &rows, width)
}

#[cfg(test)]
mod tests {
    use super::*;
    use krad_bus::protocol::LinkState;

    #[test]
    fn a_long_error_is_whole_without_a_terminal_and_cut_on_one() {
        let error = "ssh: connect to host gpu-box port 22: Connection timed out ".repeat(4);
        let hosts = [HostStatus {
            name: "gpu".into(),
            ssh: "me@gpu-box".into(),
            root: "/srv/repo".into(),
            state: LinkState::Failed,
            tmux: None,
            remote_port: None,
            error: Some(error.clone()),
            since: "2026-01-01T00:00:00Z".into(),
            reconnects: 2,
        }];
        let piped = hosts_table(&hosts, render::UNLIMITED);
        assert!(piped[1].ends_with(error.trim_end()), "{piped:#?}");
        let narrow = hosts_table(&hosts, 80);
        assert!(
            narrow[1].ends_with('…') && narrow[1].chars().count() <= 80,
            "{narrow:#?}"
        );
    }
}
