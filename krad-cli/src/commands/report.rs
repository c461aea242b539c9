//! `krad report`: a terminal tells the app what its agent is doing. Hooks and
//! agents inside krad terminals call it; it finds the bus through `KRAD_ADE_*`.

use krad_bus::request::report::{Report, ReportedState};

use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::Exit;
use crate::print;

/// Arguments of `krad report`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Run inside a krad terminal (the app refuses Client).\n\nExamples:\n  \
    krad report working --message \"running the tests\"\n  krad report idle --message \"All 48 tests pass.\"\n  \
    krad report asking --message \"Delete the old migrations?\""
)]
pub(crate) struct ReportArgs {
    /// The agent's state.
    #[arg(value_enum)]
    pub state: StateArg,
    /// What the agent says: its last message, or the question it asks.
    #[arg(long, short)]
    pub message: Option<String>,
    /// A title to show for the terminal.
    #[arg(long)]
    pub title: Option<String>,
}

/// The states a terminal may report.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum StateArg {
    /// Running a turn.
    Working,
    /// Turn over, waiting for the next prompt.
    Idle,
    /// Blocked on a question.
    Asking,
}

impl From<StateArg> for ReportedState {
    fn from(state: StateArg) -> Self {
        match state {
            StateArg::Working => ReportedState::Working,
            StateArg::Idle => ReportedState::Idle,
            StateArg::Asking => ReportedState::Asking,
        }
    }
}

/// Sends the report.
pub(crate) fn run(args: ReportArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let report = Report {
        state: args.state.into(),
        message: args.message,
        title: args.title,
        session: None,
        transcript: None,
    };
    let reply = AppConnection::find(connect)?.send(report, None)?;
    print::emit(json, &reply, |()| {});
    Ok(Exit::Success)
}
