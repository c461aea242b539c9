//! The one channel's messages: what the keyboard, the signals, the bus's
//! stream, the preview's stream and finished calls tell the UI thread, which
//! alone owns the state. Plain data; must never import the terminal's I/O.

use crossterm::event::KeyEvent;
use krad_bus::protocol::{AgentRecord, RemovedInfo, SampledInfo, SnapshotInfo};

use crate::state::{Action, Outcome, Refusal};

/// One message to the UI thread.
#[derive(Debug)]
pub(crate) enum Event {
    /// A key.
    Key(KeyEvent),
    /// Text pasted (bracketed paste), typed as keys.
    Paste(String),
    /// The terminal changed size.
    Resize,
    /// The keyboard is gone (the terminal closed).
    InputClosed,
    /// SIGTERM, SIGHUP, SIGINT or SIGQUIT: leave, the terminal restored.
    Stop(&'static str),
    /// The agents' stream of one app (its generation: see `Bus::switch`).
    Bus(u64, BusEvent),
    /// The apps running on this machine, listed for the picker.
    AppsListed(Vec<crate::ListedApp>),
    /// How many agents are asking in the apps other than the one on screen
    /// (its generation: see `Bus::switch`).
    AskingElsewhere { app: u64, asking: usize },
    /// The preview's stream, of one generation.
    Preview(u64, PreviewEvent),
    /// A call came back.
    Done(Box<Done>),
}

/// A call and what came of it.
#[derive(Debug)]
pub(crate) struct Done {
    /// The call.
    pub(crate) action: Action,
    /// The app it was made to (its generation).
    pub(crate) app: u64,
    /// What came of it.
    pub(crate) result: Result<Outcome, Refusal>,
}

/// What the agents' stream says.
#[derive(Debug)]
pub(crate) enum BusEvent {
    /// Connected; the snapshot follows.
    Up,
    /// The first message.
    Snapshot(SnapshotInfo),
    /// An agent after a change.
    Agent(Box<AgentRecord>),
    /// A terminal is gone.
    Removed(RemovedInfo),
    /// CPU, memory and tokens sampled anew.
    Sampled(SampledInfo),
    /// The stream ended or could not start: why.
    Down(String),
}

/// What the preview's stream says.
#[derive(Debug)]
pub(crate) enum PreviewEvent {
    /// Output's scrollback lines, before the screen.
    Scrollback(Vec<String>),
    /// The screen: its size and the bytes that redraw it.
    Screen(u16, u16, Vec<u8>),
    /// Printed bytes.
    Output(Vec<u8>),
    /// The stream ended: why.
    Ended(String),
}
