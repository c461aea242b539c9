//! A terminal's state, as plain data: [`Shared`], what its handle and the
//! reader share, and [`Pipeline`], what the reader keeps of it.

use std::sync::atomic::AtomicBool;
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::{mpsc, oneshot};

use crate::output::SharedScreen;
use crate::screen::Screen;
use crate::{ExitStatus, TerminalEvent};

use super::seed::SeedInfo;

/// Terminals on an SSH host whose control client ended with the link (their
/// programs run on there): taken back by the next client.
pub(super) type Orphans = Arc<Mutex<Vec<Pipeline>>>;

/// What a terminal's handle and the reader share.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) id: u64,
    pub(super) screen: Arc<SharedScreen>,
    pub(super) scrollback_lines: usize,
    /// The program's pane (`%N`) and window (`@N`), once known.
    pub(super) pane: OnceLock<String>,
    pub(super) window: OnceLock<String>,
    pub(super) exit: OnceLock<ExitStatus>,
    pub(super) pid: OnceLock<u32>,
    /// The handle let go of a live terminal: the reader forgets it, its program
    /// runs on.
    pub(super) detached: AtomicBool,
    /// On an SSH host: waiting for a client to take it back (the link is down,
    /// or the app just started); its pane may not be the one tmux has now.
    pub(super) waiting: AtomicBool,
}

impl Shared {
    /// Terminal `id`'s state, with a blank screen of `cols` × `rows`.
    pub(super) fn new(id: u64, (cols, rows): (u16, u16), scrollback_lines: usize) -> Self {
        Self {
            id,
            screen: Arc::new(SharedScreen::new(cols, rows, scrollback_lines)),
            scrollback_lines,
            pane: OnceLock::new(),
            window: OnceLock::new(),
            exit: OnceLock::new(),
            pid: OnceLock::new(),
            detached: AtomicBool::new(false),
            waiting: AtomicBool::new(false),
        }
    }

    pub(super) fn pane(&self) -> &str {
        self.pane.get().map_or("", String::as_str)
    }

    pub(super) fn window(&self) -> &str {
        self.window.get().map_or("", String::as_str)
    }

    /// An error if the terminal waits to be taken back (see `waiting`).
    pub(super) fn reachable(&self) -> std::io::Result<()> {
        if self.waiting.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                "the link to the terminal's host is down: it is taken back once the link is up",
            ));
        }
        Ok(())
    }

    /// Replaces the screen with one of `size` showing `bytes` (the title stays).
    pub(super) fn replace_screen(&self, (cols, rows): (u16, u16), bytes: &[u8]) {
        let scrollback = self.scrollback_lines;
        self.screen.with(|screen| {
            let title = screen.title().to_owned();
            *screen = Screen::new(cols, rows, scrollback);
            screen.process(bytes);
            if !title.is_empty() {
                screen.process(format!("\x1b]2;{title}\x07").as_bytes());
            }
        });
    }
}

/// What the reader keeps of one terminal.
#[derive(Debug)]
pub(super) struct Pipeline {
    pub(super) shared: Arc<Shared>,
    /// To the output pipeline; dropped once the program ended.
    pub(super) chunks: Option<mpsc::Sender<Vec<u8>>>,
    /// Resolves once every chunk sent was parsed.
    pub(super) parsed: Option<oneshot::Receiver<()>>,
    pub(super) events: mpsc::Sender<TerminalEvent>,
    /// Being taken back: its output so far is in the capture to come.
    pub(super) skip_output: bool,
    pub(super) seed: Option<SeedInfo>,
    /// Told once a taken-back pane's screen is in place.
    pub(super) seeded: Option<std_mpsc::Sender<Result<(), String>>>,
    /// How many times the exit status was asked for.
    pub(super) exit_queries: u32,
    /// The program ended with this; its final screen is on its way.
    pub(super) final_status: Option<ExitStatus>,
    /// On an SSH host: where it waits when its client ends.
    pub(super) home: Option<Orphans>,
}
