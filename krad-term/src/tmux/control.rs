//! The control client's command side: command lines written to `tmux -C`, and
//! the replies their answers are owed — per command line, one per command, in
//! order; a command that fails ends its line, and the rest of it is skipped.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::process::ChildStdin;
use std::sync::Mutex;

use crate::program::ended;

use super::common::lock;
use super::reply::Reply;

/// The control client's input, and the answers its commands are owed: per
/// command line, one per command, in order.
#[derive(Debug)]
pub(super) struct Control {
    inner: Mutex<ControlInner>,
}

#[derive(Debug)]
struct ControlInner {
    stdin: Option<ChildStdin>,
    pending: VecDeque<VecDeque<Reply>>,
}

impl Control {
    pub(super) fn new(stdin: ChildStdin) -> Self {
        Self {
            inner: Mutex::new(ControlInner {
                stdin: Some(stdin),
                pending: VecDeque::new(),
            }),
        }
    }

    /// Sends command lines, together, each with the replies of its commands.
    /// Fails them all if the client is gone.
    pub(super) fn send(&self, lines: Vec<(String, Vec<Reply>)>) -> io::Result<()> {
        let mut guard = lock(&self.inner);
        let inner = &mut *guard;
        let Some(stdin) = inner.stdin.as_mut() else {
            drop(guard);
            for reply in lines.into_iter().flat_map(|(_, replies)| replies) {
                reply.fail("the tmux client has ended");
            }
            return Err(ended());
        };
        let mut text = String::new();
        for (line, _) in &lines {
            text.push_str(line);
            text.push('\n');
        }
        // The replies are owed before the reader can see an answer: it takes
        // them under the same lock.
        let count = lines.len();
        inner.pending.extend(
            lines
                .into_iter()
                .map(|(_, replies)| VecDeque::from(replies)),
        );
        match stdin
            .write_all(text.as_bytes())
            .and_then(|()| stdin.flush())
        {
            Ok(()) => Ok(()),
            Err(error) => {
                inner.stdin = None;
                let at = inner.pending.len() - count;
                let failed: Vec<Reply> = inner.pending.drain(at..).flatten().collect();
                for reply in failed {
                    reply.fail("cannot write to the tmux client");
                }
                Err(error)
            }
        }
    }

    /// The reply owed to the next answer, and — when it is an error — the
    /// replies of the rest of its command line, which tmux skips.
    pub(super) fn next_reply(&self, ok: bool) -> (Option<Reply>, Vec<Reply>) {
        let mut inner = lock(&self.inner);
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
        lock(&self.inner).stdin.is_none()
    }

    /// No more commands; every reply still owed fails.
    pub(super) fn close(&self) {
        let pending: Vec<Reply> = {
            let mut inner = lock(&self.inner);
            inner.stdin = None;
            inner.pending.drain(..).flatten().collect()
        };
        for reply in pending {
            reply.fail("the tmux client has ended");
        }
    }
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
}
