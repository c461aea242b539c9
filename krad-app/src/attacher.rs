//! Attaching to a terminal: its screen and output, live, for a client — and the
//! client's keystrokes and size back to the terminal. The bus owns the
//! connection (see [`krad_bus::server::Attachment`]); an [`Attacher`] is the
//! app's side of it. The Attach request's handler checks the caller's rights
//! (as Send's) and opens one here.
//!
//! Keystrokes to an asking agent make
//! it working, as Send's do. Several attachers may follow one terminal; each
//! Resize resizes it, so the last one sets the size. An attacher that falls more
//! than [`krad_term::ATTACH_BACKLOG`] chunks behind gets a fresh `Screen` instead
//! of the output it missed: it never slows the terminal.

use std::collections::VecDeque;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use krad_bus::protocol::{
    AgentRecord, AgentState, ApiError, AttachInput, AttachMessage, DataInfo, ErrorCode, ExitedInfo,
    ScreenInfo, StateSource, TmuxInfo,
};
use krad_bus::request::RequestKind;
use krad_bus::server::Attachment as BusAttachment;
use krad_term::{Attachment, NativeAttach, Terminal};
use tokio::sync::{broadcast, oneshot, watch};

use crate::records::no_terminal;
use crate::store::Store;
use crate::store::set_state;

/// Output bytes gathered into one `Output` message, at most.
const OUTPUT_BYTES: usize = 64 * 1024;

/// Keystroke writes an attacher may have in flight before it waits for them.
const WRITES_IN_FLIGHT: usize = 64;

/// Attaches to terminal `id`, whose record `record` follows.
pub(crate) fn open(
    store: &Arc<Store>,
    id: u64,
    record: watch::Receiver<AgentRecord>,
) -> Result<Attacher, ApiError> {
    let Some(terminal) = store.with(id, |e| e.terminal.clone()) else {
        return Err(no_terminal(id));
    };
    let attachment = terminal.attach().ok_or_else(|| {
        ApiError::new(
            ErrorCode::Failed,
            format!("terminal {id} cannot be attached to"),
        )
        .with_detail(serde_json::json!({ "terminal": id }))
    })?;
    let exited = record.borrow().state == AgentState::Exited;
    let screen = screen_message(id, terminal.as_ref(), &attachment, exited);
    Ok(Attacher {
        store: store.clone(),
        id,
        terminal,
        record,
        output: attachment.output,
        screen: Some(screen),
        writes: VecDeque::new(),
        done: false,
    })
}

/// The `Screen` message of an attachment. An exited terminal offers no native
/// attach: its window is gone, the screen and `Exited` are all there is.
fn screen_message(
    id: u64,
    terminal: &dyn Terminal,
    attachment: &Attachment,
    exited: bool,
) -> AttachMessage {
    let (cols, rows) = attachment.size;
    let native = if exited {
        None
    } else {
        terminal.native_attach()
    };
    AttachMessage::Screen(ScreenInfo {
        terminal: id,
        cols,
        rows,
        data: BASE64.encode(&attachment.screen),
        tmux: native.map(|native| match native {
            NativeAttach::Tmux {
                socket,
                session,
                window,
            } => TmuxInfo {
                socket,
                session,
                window,
            },
        }),
    })
}

/// One client attached to one terminal.
pub struct Attacher {
    store: Arc<Store>,
    id: u64,
    terminal: Arc<dyn Terminal>,
    record: watch::Receiver<AgentRecord>,
    output: broadcast::Receiver<Arc<[u8]>>,
    /// The screen, sent before any output.
    screen: Option<AttachMessage>,
    /// Keystroke writes not yet answered, oldest first.
    writes: VecDeque<oneshot::Receiver<std::io::Result<()>>>,
    /// `Exited` was sent.
    done: bool,
}

impl Attacher {
    /// An `Output` message: `first`, and whatever else is queued now.
    fn output_message(&mut self, first: Arc<[u8]>) -> AttachMessage {
        let mut bytes = first.to_vec();
        while bytes.len() < OUTPUT_BYTES {
            match self.output.try_recv() {
                Ok(chunk) => bytes.extend_from_slice(&chunk),
                Err(_) => break,
            }
        }
        AttachMessage::Output(DataInfo {
            data: BASE64.encode(&bytes),
        })
    }

    /// The attacher fell too far behind: a fresh screen instead of what it missed.
    fn resync(&mut self) -> Option<AttachMessage> {
        tracing::debug!(
            terminal = self.id,
            "an attacher fell behind; sending the screen again"
        );
        let attachment = self.terminal.attach()?;
        let exited = self.record.borrow().state == AgentState::Exited;
        let screen = screen_message(self.id, self.terminal.as_ref(), &attachment, exited);
        self.output = attachment.output;
        Some(screen)
    }

    fn exited(&mut self) -> AttachMessage {
        self.done = true;
        let record = self.record.borrow();
        AttachMessage::Exited(ExitedInfo {
            terminal: self.id,
            exit_code: record.exit_code,
            signal: record.signal,
        })
    }
}

impl BusAttachment for Attacher {
    async fn next(&mut self) -> Option<AttachMessage> {
        if self.done {
            return None;
        }
        if let Some(screen) = self.screen.take() {
            return Some(screen);
        }
        let mut removed = false;
        loop {
            // Once the program ended, all its output is queued: send it, then `Exited`.
            let ended = removed || self.record.borrow_and_update().state == AgentState::Exited;
            if ended {
                return match self.output.try_recv() {
                    Ok(chunk) => Some(self.output_message(chunk)),
                    // Fell behind while the program ended: the final screen, as
                    // on the running path, then what followed it and `Exited`.
                    Err(broadcast::error::TryRecvError::Lagged(_)) => match self.resync() {
                        Some(screen) => Some(screen),
                        None => continue,
                    },
                    Err(_) => Some(self.exited()),
                };
            }
            tokio::select! {
                chunk = self.output.recv() => match chunk {
                    Ok(chunk) => return Some(self.output_message(chunk)),
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        if let Some(screen) = self.resync() {
                            return Some(screen);
                        }
                    }
                    Err(broadcast::error::RecvError::Closed) => removed = true,
                },
                // The terminal was closed and removed: nothing more will come.
                changed = self.record.changed() => removed = changed.is_err(),
            }
        }
    }

    async fn input(&mut self, input: AttachInput) -> Result<(), ApiError> {
        match input {
            AttachInput::Input(data) => {
                let bytes = BASE64.decode(data.data.as_bytes()).map_err(|e| {
                    ApiError::bad_request(format!(
                        "{}: Input data is not base64: {e}",
                        RequestKind::Attach.name()
                    ))
                })?;
                if bytes.is_empty() {
                    return Ok(());
                }
                // Writes are queued in order; a program that does not read its
                // input holds up only this attacher, and only past this many.
                self.writes.retain_mut(|w| {
                    matches!(w.try_recv(), Err(oneshot::error::TryRecvError::Empty))
                });
                while self.writes.len() >= WRITES_IN_FLIGHT {
                    if let Some(oldest) = self.writes.pop_front() {
                        let _ = oldest.await;
                    }
                }
                self.writes.push_back(self.terminal.write(bytes));
                // Keystrokes answer a question: an asking agent is working again —
                // unless it tells its state itself (then it says when it is not asking).
                self.store.update(self.id, |e| {
                    e.record.state == AgentState::Asking
                        && !e.tells_its_state()
                        && set_state(&mut e.record, AgentState::Working, StateSource::Input, None)
                });
                Ok(())
            }
            AttachInput::Resize(size) => self.terminal.resize(size.cols, size.rows).map_err(|e| {
                ApiError::new(
                    ErrorCode::Conflict,
                    format!("cannot resize terminal {}: {e}", self.id),
                )
            }),
        }
    }
}
