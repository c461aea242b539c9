//! The control client's command side: command lines written to `tmux -C`, and
//! the replies their answers are owed — per command line, one per command, in
//! order; a command that fails ends its line, and the rest of it is skipped.
//!
//! Lines are written by a thread of the connection's own, in the order they
//! were sent: a caller never blocks on tmux's input (a tmux that stops reading
//! fills the pipe); past [`MAX_QUEUED_COMMANDS`] bytes not yet written, a send
//! is refused at once (`WouldBlock`: Send answers `busy`).

use std::collections::VecDeque;
use std::io::{self, Write};
use std::process::ChildStdin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};

use crate::program::ended;

use super::common::lock;
use super::reply::Reply;

/// Bytes of command lines that may wait for tmux to read them.
pub(super) const MAX_QUEUED_COMMANDS: usize = 8 * 1024 * 1024;

/// The control client's input, and the answers its commands are owed: per
/// command line, one per command, in order.
#[derive(Debug)]
pub(super) struct Control {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    inner: Mutex<ControlInner>,
    /// Bytes handed to the writer thread and not yet written.
    queued: AtomicUsize,
}

#[derive(Debug)]
struct ControlInner {
    /// To the writer thread; `None` once the client ended.
    writer: Option<mpsc::Sender<Vec<u8>>>,
    pending: VecDeque<VecDeque<Reply>>,
}

impl Control {
    pub(super) fn new(stdin: ChildStdin) -> Self {
        let (writer, lines) = mpsc::channel::<Vec<u8>>();
        let shared = Arc::new(Shared {
            inner: Mutex::new(ControlInner {
                writer: Some(writer),
                pending: VecDeque::new(),
            }),
            queued: AtomicUsize::new(0),
        });
        let theirs = Arc::downgrade(&shared);
        let spawned = std::thread::Builder::new()
            .name("krad-tmux-input".into())
            .spawn(move || write_lines(stdin, &lines, &theirs));
        if let Err(e) = spawned {
            tracing::error!("cannot start the tmux client's writer: {e}");
            lock(&shared.inner).writer = None;
        }
        Self { shared }
    }

    /// Sends command lines, together, each with the replies of its commands.
    /// Fails them all if the client is gone, or when too much waits already.
    pub(super) fn send(&self, lines: Vec<(String, Vec<Reply>)>) -> io::Result<()> {
        let mut text = String::new();
        for (line, _) in &lines {
            text.push_str(line);
            text.push('\n');
        }
        let queued = self.shared.queued.load(Ordering::SeqCst);
        let full = queued > 0 && queued.saturating_add(text.len()) > MAX_QUEUED_COMMANDS;
        let mut inner = lock(&self.shared.inner);
        let writer = match inner.writer.as_ref() {
            Some(writer) if !full => writer.clone(),
            _ => {
                drop(inner);
                let why = if full {
                    "tmux has not read the commands already sent"
                } else {
                    "the tmux client has ended"
                };
                for reply in lines.into_iter().flat_map(|(_, replies)| replies) {
                    reply.fail(why);
                }
                return Err(if full { input_full(queued) } else { ended() });
            }
        };
        // The replies are owed before the reader can see an answer: it takes
        // them under the same lock; and lines reach the writer in this order.
        inner.pending.extend(
            lines
                .into_iter()
                .map(|(_, replies)| VecDeque::from(replies)),
        );
        self.shared.queued.fetch_add(text.len(), Ordering::SeqCst);
        if writer.send(text.into_bytes()).is_err() {
            drop(inner);
            self.close();
            return Err(ended());
        }
        Ok(())
    }

    /// The reply owed to the next answer, and — when it is an error — the
    /// replies of the rest of its command line, which tmux skips.
    pub(super) fn next_reply(&self, ok: bool) -> (Option<Reply>, Vec<Reply>) {
        let mut inner = lock(&self.shared.inner);
        let Some(line) = inner.pending.front_mut() else {
            return (None, Vec::new());
        };
        let reply = line.pop_front();
        let skipped = if ok {
            Vec::new()
        } else {
            line.drain(..).collect()
        };
        if line.is_empty() {
            inner.pending.pop_front();
        }
        (reply, skipped)
    }

    pub(super) fn closed(&self) -> bool {
        lock(&self.shared.inner).writer.is_none()
    }

    /// No more commands; every reply still owed fails.
    pub(super) fn close(&self) {
        self.shared.close("the tmux client has ended");
    }
}

impl Shared {
    fn close(&self, why: &str) {
        let pending: Vec<Reply> = {
            let mut inner = lock(&self.inner);
            inner.writer = None;
            inner.pending.drain(..).flatten().collect()
        };
        for reply in pending {
            reply.fail(why);
        }
    }
}

/// The writer thread: writes each batch of lines, in order, until the client
/// ends (its channel closes) or a write fails (every reply owed fails then).
fn write_lines(
    mut stdin: ChildStdin,
    lines: &mpsc::Receiver<Vec<u8>>,
    shared: &std::sync::Weak<Shared>,
) {
    for batch in lines {
        let written = stdin.write_all(&batch).and_then(|()| stdin.flush());
        let Some(shared) = shared.upgrade() else {
            return;
        };
        shared.queued.fetch_sub(batch.len(), Ordering::SeqCst);
        if let Err(error) = written {
            tracing::debug!("cannot write to the tmux client: {error}");
            shared.close("cannot write to the tmux client");
            return;
        }
    }
}

/// The error of a send refused because tmux has not read what waits.
fn input_full(queued: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::WouldBlock,
        format!(
            "tmux has not read the {queued} bytes of commands already sent to it (the limit is \
             {MAX_QUEUED_COMMANDS} bytes); send again once it reads"
        ),
    )
}

#[cfg(test)]
mod tests {
    use std::process::{Command, Stdio};
    use std::sync::Arc;

    use tokio::sync::oneshot;

    use super::*;
    use crate::tmux::reply::WriteState;

    #[test]
    fn a_failed_command_skips_the_rest_of_its_line() {
        let mut child = Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let control = Control::new(child.stdin.take().unwrap());
        let (reply, mut answered) = oneshot::channel();
        let state = Arc::new(WriteState {
            reply: Mutex::new(Some(reply)),
        });
        control
            .send(vec![
                (
                    "a ; b ; c".into(),
                    vec![
                        Reply::Ignore,
                        Reply::Ignore,
                        Reply::Write { state, last: true },
                    ],
                ),
                ("d".into(), vec![Reply::Dead("%1".into())]),
            ])
            .unwrap();
        assert!(matches!(control.next_reply(true), (Some(Reply::Ignore), ref s) if s.is_empty()));
        let (reply, skipped) = control.next_reply(false);
        assert!(matches!(reply, Some(Reply::Ignore)));
        assert_eq!(skipped.len(), 1);
        for reply in skipped {
            reply.fail("skipped");
        }
        assert!(answered.try_recv().unwrap().is_err());
        assert!(matches!(
            control.next_reply(true),
            (Some(Reply::Dead(_)), _)
        ));
        assert!(control.next_reply(true).0.is_none());
        control.close();
        assert!(control.closed());
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn a_tmux_that_stops_reading_never_blocks_a_sender() {
        // `sleep` never reads: the pipe fills, the writer thread waits, and the
        // sends go on returning at once until the bound refuses one.
        let mut child = Command::new("sleep")
            .arg("60")
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        let control = Control::new(child.stdin.take().unwrap());
        let line = "x".repeat(64 * 1024);
        let refused = (0..2 * MAX_QUEUED_COMMANDS / line.len())
            .map(|_| control.send(vec![(line.clone(), vec![Reply::Ignore])]))
            .find_map(Result::err)
            .unwrap();
        assert_eq!(refused.kind(), io::ErrorKind::WouldBlock, "{refused}");
        let _ = child.kill();
        let _ = child.wait();
        // The client gone, the writer fails every reply owed and ends.
        for _ in 0..500 {
            if control.closed() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(control.closed());
    }
}
