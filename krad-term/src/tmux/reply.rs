//! What becomes of tmux's answers: the [`Reply`] each command sent is owed,
//! and the pending answer of a write ([`WriteState`]).

use std::io;
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use super::common::lock;
use super::state::Pipeline;

/// What becomes of the answer to a command sent to the control client.
#[derive(Debug)]
pub(super) enum Reply {
    /// Nothing.
    Ignore,
    /// A program's window opened (`pane window pid`): its pipeline joins the
    /// reader, then the spawning thread is told.
    Created(Box<Pipeline>, std_mpsc::Sender<Result<(), String>>),
    /// A pane being taken back: its pipeline joins the reader, with this answer
    /// (its size, cursor and modes; [`Reply::Seed`] follows).
    Adopt(Box<Pipeline>),
    /// One command of a write: an error answers the write; the last one's
    /// success does.
    Write { state: Arc<WriteState>, last: bool },
    /// A pane's exit status, asked once its window was renamed `krad-dead`.
    Dead(String),
    /// A pane's size, cursor and modes, once its program ended.
    SeedInfo(String),
    /// A pane's screen (`capture-pane`), after [`Reply::SeedInfo`] or
    /// [`Reply::Adopt`].
    Seed(String),
}

impl Reply {
    /// The command failed, was skipped, or the client ended.
    pub(super) fn fail(self, why: &str) {
        match self {
            Reply::Created(_, sender) => {
                let _ = sender.send(Err(why.to_owned()));
            }
            Reply::Adopt(mut pipeline) => {
                if let Some(seeded) = pipeline.seeded.take() {
                    let _ = seeded.send(Err(why.to_owned()));
                }
                // On an SSH host: the next client takes it back.
                if let Some(home) = pipeline.home.clone() {
                    lock(&home).push(*pipeline);
                }
            }
            Reply::Write { state, .. } => state.answer(Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                why.to_owned(),
            ))),
            Reply::Ignore | Reply::Dead(_) | Reply::SeedInfo(_) | Reply::Seed(_) => {}
        }
    }
}

/// The pending answer of one write.
#[derive(Debug)]
pub(super) struct WriteState {
    pub(super) reply: Mutex<Option<oneshot::Sender<io::Result<()>>>>,
}

impl WriteState {
    pub(super) fn answer(&self, result: io::Result<()>) {
        if let Some(reply) = lock(&self.reply).take() {
            let _ = reply.send(result);
        }
    }
}
