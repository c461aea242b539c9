//! `krad stop`: asks the app to shut down, then waits until it is gone.

use std::time::{Duration, Instant};

use krad_bus::protocol::counted;
use krad_bus::request::list::List;
use krad_bus::request::shutdown::Shutdown;
use serde::Serialize;

use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::{Exit, Failure};
use crate::print;

/// Arguments of `krad stop`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  krad stop\n  krad stop --keep-terminals")]
pub(crate) struct StopArgs {
    /// Do not close the terminals: under the tmux host ([terminals] host =
    /// "tmux") their programs go on running and the next `krad serve` takes
    /// them back; on PTYs they end with the app. By default they are closed.
    #[arg(long)]
    pub keep_terminals: bool,
    /// How long to wait for the app to exit, in seconds.
    #[arg(long, default_value_t = 10, value_name = "SECS")]
    pub wait: u64,
}

/// Sends Shutdown and waits for the process to exit.
pub(crate) fn run(args: StopArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let bus = AppConnection::find(connect)?;
    // What becomes of the agents, said after: none when they cannot be listed.
    let running = bus.send(List::default(), None).ok().map(|reply| {
        reply
            .answer
            .iter()
            .filter(|agent| agent.state.is_running())
            .count()
    });
    let request = Shutdown {
        close_terminals: Some(!args.keep_terminals),
    };
    bus.send(request, None)?;
    if let Some(pid) = bus.pid {
        let until = Instant::now() + Duration::from_secs(args.wait);
        while krad_bus::api_json::pid_alive(pid) {
            if Instant::now() > until {
                return Err(Failure::new(
                    Exit::TimedOut,
                    format!(
                        "the app (pid {pid}) accepted Shutdown but is still running after {} s",
                        args.wait
                    ),
                )
                .into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    if json {
        print::message(&Stopped::Stopped {
            pid: bus.pid,
            endpoint: bus.endpoint(),
        });
    } else {
        let agents = |n: usize| counted(n, "running agent");
        print::line(&match running {
            Some(n) if n > 0 && args.keep_terminals => format!(
                "krad: the app stopped without closing its {}: under the tmux host they go on \
                 running and the next `krad serve` takes them back; on PTYs they ended with it",
                agents(n)
            ),
            Some(n) if n > 0 => format!("krad: the app stopped, and closed its {}", agents(n)),
            _ => "krad: the app stopped".to_owned(),
        });
    }
    Ok(Exit::Success)
}

/// What `krad stop --json` prints.
#[derive(Serialize)]
enum Stopped {
    Stopped { pid: Option<u32>, endpoint: String },
}
