//! krad's keyboard home screen (`krad`, `krad tui`): a full-screen client of
//! the bus, as the page is. The list of agents (live through SubscribeAgents),
//! the selected agent's screen, its environment's diff and its open asks, and
//! keys for every action; attaching to an agent's real TUI and back.
//!
//! The parts stay apart: [`state`] is the state and how events change it
//! (pure); `draw` is a pure function of it; `event` is the one channel the
//! threads feed (`bus`, `input`, `signals`, `elsewhere`); `app` is the loop,
//! the only owner of the state; `terminal` gives the terminal back on every
//! way out.
//!
//! Depends on `krad-bus` only (its types and typed client), never on the
//! app's crate; the CLI hands in how to find the app ([`Connect`]).

mod app;
mod attach;
mod bus;
mod cells;
mod draw;
mod elsewhere;
mod event;
mod input;
mod signals;
mod state;
mod terminal;
#[cfg(test)]
mod test_support;

pub mod bench;

use std::sync::Arc;

pub use bus::Connect;
pub use cells::{bytes_in, check_outcomes, counted, elapsed, one_line, relative, short_commit};
pub use terminal::TerminalGuard;

/// How the home screen runs.
#[derive(Clone)]
pub struct Options {
    /// The byte that detaches from an agent's TUI (Ctrl-\ = 0x1c).
    pub detach_key: u8,
    /// Whether to use colours (false when `NO_COLOR` is set).
    pub color: bool,
    /// The apps running on this machine, for `A` (switch to another
    /// repository's app); none: `A` says it cannot.
    pub list_apps: Option<ListApps>,
    /// Counts the agents asking in the other apps on this machine, for the
    /// header; none: the header tells only of the app on screen.
    pub asking_elsewhere: Option<AskingElsewhere>,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("detach_key", &self.detach_key)
            .field("color", &self.color)
            .field("list_apps", &self.list_apps.is_some())
            .field("asking_elsewhere", &self.asking_elsewhere.is_some())
            .finish()
    }
}

impl Default for Options {
    fn default() -> Options {
        Options {
            detach_key: 0x1c,
            color: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
            list_apps: None,
            asking_elsewhere: None,
        }
    }
}

/// Lists the apps running on this machine (it may take a moment: each is
/// asked for its agents). Called on a thread of its own.
pub type ListApps = Arc<dyn Fn() -> Vec<ListedApp> + Send + Sync>;

/// How many agents are asking in the apps running on this machine other than
/// the one whose bus is the argument (`127.0.0.1:PORT`). Called every few
/// seconds on a thread of its own.
pub type AskingElsewhere = Arc<dyn Fn(&str) -> usize + Send + Sync>;

/// One running app, as `A` lists it.
#[derive(Clone)]
pub struct ListedApp {
    /// The repository it serves.
    pub root: std::path::PathBuf,
    /// Its bus (`127.0.0.1:PORT`): the one the screen is on is marked.
    pub endpoint: String,
    /// How many agents it hosts, and how many of them are asking; none when
    /// it did not answer in time.
    pub agents: Option<(usize, usize)>,
    /// Finds it (again): the screen switches to it with this.
    pub connect: Connect,
}

impl std::fmt::Debug for ListedApp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListedApp")
            .field("root", &self.root)
            .field("endpoint", &self.endpoint)
            .field("agents", &self.agents)
            .finish_non_exhaustive()
    }
}

/// Why the home screen could not run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The terminal could not be set up or written.
    #[error("the terminal: {0}")]
    Terminal(#[from] std::io::Error),
}

/// Runs the home screen until `q` (or a signal, or the terminal's end);
/// every agent is left running. Call it before starting other threads: it
/// blocks the signals it handles in this thread and those it starts.
pub fn run(connect: Connect, options: Options) -> Result<(), Error> {
    app::run(connect, options)
}
