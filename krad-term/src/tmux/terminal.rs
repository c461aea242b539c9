//! A terminal of the tmux host: its handle ([`TmuxTerminal`]), and input,
//! resizes and closing as tmux commands and signals (on an SSH host, signals
//! sent by tmux there). The handle reaches the host's current control client
//! through the host's [`Slot`], so a terminal on an SSH host outlives the
//! client the link took.

use std::io;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::sync::{mpsc, oneshot};

use crate::output;
use crate::program::{ended, group_gone, log_grace_kill, pgid};
use crate::{Attachment, ExitStatus, NativeAttach, Snapshot, SpawnError, Terminal, TerminalEvent};

use super::codec::quote;
use super::common::{SESSION, lock};
use super::connection::{Slot, current};
use super::exit::abandon;
use super::reply::{Reply, WriteState};
use super::state::{Orphans, Pipeline, Shared};

/// Bytes per `send-keys -H` command.
const KEYS_PER_COMMAND: usize = 256;
/// Bytes per `set-buffer` command.
const PASTE_PER_COMMAND: usize = 2048;

/// A terminal of a [`TmuxHost`](super::TmuxHost).
#[derive(Debug)]
pub(super) struct TmuxTerminal {
    id: u64,
    slot: Arc<Slot>,
    /// On an SSH host (its pid is the host's): where its pipeline waits while
    /// the link is down.
    home: Option<Orphans>,
    pub(super) shared: Arc<Shared>,
}

impl TmuxTerminal {
    pub(super) fn new(
        slot: &Arc<Slot>,
        home: Option<&Orphans>,
        id: u64,
        size: (u16, u16),
        scrollback_lines: usize,
    ) -> Self {
        Self {
            id,
            slot: Arc::clone(slot),
            home: home.cloned(),
            shared: Arc::new(Shared::new(id, size, scrollback_lines)),
        }
    }

    /// The terminal's output pipeline, for the reader to feed once it knows the
    /// pane.
    pub(super) fn pipeline(
        &self,
        transcript: Option<PathBuf>,
        events: mpsc::Sender<TerminalEvent>,
    ) -> Result<Pipeline, SpawnError> {
        let output = output::start(
            self.id,
            Arc::clone(&self.shared.screen),
            transcript,
            events.clone(),
        )
        .map_err(|e| SpawnError::Host(format!("cannot start the output thread: {e}")))?;
        Ok(Pipeline {
            shared: Arc::clone(&self.shared),
            chunks: Some(output.chunks),
            parsed: Some(output.parsed),
            events,
            skip_output: false,
            seed: None,
            seeded: None,
            exit_queries: 0,
            final_status: None,
            home: self.home.clone(),
        })
    }

    fn ended(&self) -> bool {
        self.shared.exit.get().is_some()
    }

    /// Closing a program on an SSH host: tmux there signals its group.
    fn close_remote(&self, grace: Duration) {
        let id = self.id;
        let target = self.shared.reachable().ok().and_then(|()| {
            let pid = self.shared.pid.get().copied()?;
            Some((pid, current(&self.slot).ok()?))
        });
        let Some((pid, connection)) = target else {
            tracing::debug!(
                terminal = id,
                "the link is down: the program on the host ends later"
            );
            let waiting = self.home.as_ref().and_then(|home| {
                let mut home = lock(home);
                let at = home.iter().position(|p| p.shared.id == id)?;
                Some(home.remove(at))
            });
            if let Some(pipeline) = waiting {
                let hung_up = ExitStatus {
                    code: None,
                    signal: Some(Signal::SIGHUP as i32),
                };
                abandon(pipeline, hung_up);
            }
            return;
        };
        tracing::debug!(
            terminal = id,
            "closing the tmux terminal on its host: SIGHUP"
        );
        let _ = connection.control.send(vec![remote_signal(pid, "HUP")]);
        let (shared, slot) = (Arc::clone(&self.shared), Arc::clone(&self.slot));
        connection.later.after(grace, move || {
            if shared.exit.get().is_none()
                && shared.reachable().is_ok()
                && let Ok(connection) = current(&slot)
            {
                let _ = connection.control.send(vec![remote_signal(pid, "KILL")]);
            }
        });
    }

    /// The commands that type `bytes` into the pane: a bracketed paste through
    /// a tmux buffer and `paste-buffer -p`, the other bytes with `send-keys -H`.
    fn input_lines(&self, bytes: &[u8]) -> Vec<String> {
        let pane = self.shared.pane();
        let mut lines = Vec::new();
        let (paste, keys) = split_paste(bytes);
        if let Some(paste) = paste.filter(|p| !p.is_empty()) {
            let buffer = format!("krad-{}", self.id);
            for (i, part) in paste.chunks(PASTE_PER_COMMAND).enumerate() {
                let append = if i == 0 { "" } else { " -a" };
                lines.push(format!("set-buffer{append} -b {buffer} {}", quote(part)));
            }
            lines.push(format!("paste-buffer -p -r -d -b {buffer} -t {pane}"));
        }
        for part in keys.chunks(KEYS_PER_COMMAND) {
            let mut line = format!("send-keys -t {pane} -H");
            for byte in part {
                line.push_str(&format!(" {byte:02x}"));
            }
            lines.push(line);
        }
        lines
    }
}

impl Drop for TmuxTerminal {
    fn drop(&mut self) {
        // The handle is gone (the app let go of the terminal, or is stopping):
        // the reader forgets it, the program runs on in tmux.
        self.shared.detached.store(true, Ordering::SeqCst);
    }
}

impl Terminal for TmuxTerminal {
    fn id(&self) -> u64 {
        self.id
    }

    /// `None` on an SSH host: the pid there means nothing here.
    fn pid(&self) -> Option<u32> {
        if self.home.is_some() {
            return None;
        }
        self.shared.pid.get().copied()
    }

    fn write(&self, bytes: Vec<u8>) -> oneshot::Receiver<io::Result<()>> {
        let (reply, receiver) = oneshot::channel();
        if self.ended() {
            let _ = reply.send(Err(ended()));
            return receiver;
        }
        if let Err(error) = self.shared.reachable() {
            let _ = reply.send(Err(error));
            return receiver;
        }
        let lines = self.input_lines(&bytes);
        if lines.is_empty() {
            let _ = reply.send(Ok(()));
            return receiver;
        }
        let state = Arc::new(WriteState {
            reply: Mutex::new(Some(reply)),
        });
        let count = lines.len();
        let commands = lines
            .into_iter()
            .enumerate()
            .map(|(i, line)| {
                let reply = Reply::Write {
                    state: Arc::clone(&state),
                    last: i + 1 == count,
                };
                (line, vec![reply])
            })
            .collect();
        match current(&self.slot) {
            // A failure already answered the receiver.
            Ok(connection) => {
                let _ = connection.control.send(commands);
            }
            Err(error) => state.answer(Err(error)),
        }
        receiver
    }

    fn resize(&self, cols: u16, rows: u16) -> io::Result<()> {
        let (cols, rows) = (cols.max(1), rows.max(1));
        if self.ended() {
            return Err(ended());
        }
        self.shared.reachable()?;
        // The screen first, as on the PTY host: the program's redraw for the new
        // size must land on a screen of that size.
        self.shared.screen.with(|screen| screen.resize(cols, rows));
        current(&self.slot)?.control.send(vec![(
            format!(
                "resize-window -t {} -x {cols} -y {rows}",
                self.shared.window()
            ),
            vec![Reply::Ignore],
        )])
    }

    fn snapshot(&self, scrollback_lines: usize) -> Snapshot {
        self.shared
            .screen
            .with(|screen| screen.snapshot(scrollback_lines))
    }

    /// Always true: a paste is handed to tmux (`paste-buffer -p`), which brackets
    /// it only if the program asked for bracketed paste.
    fn bracketed_paste(&self) -> bool {
        true
    }

    fn close(&self, grace: Duration) {
        if self.ended() {
            return;
        }
        if self.home.is_some() {
            return self.close_remote(grace);
        }
        let Some(pid) = self.pid().and_then(pgid) else {
            return;
        };
        let id = self.id;
        tracing::debug!(terminal = id, "closing the tmux terminal: SIGHUP");
        if let Err(error) = signal_group(pid, Signal::SIGHUP) {
            tracing::debug!(terminal = id, %error, "cannot send SIGHUP");
        }
        // Closed as it starts, the pane's process may be tmux's child that
        // has not run the program yet: it can take a SIGHUP in the server's
        // handler and go on to run the program. Then the hangup is sent
        // again while the program runs, within the grace.
        let not_yet = std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .is_ok_and(|comm| comm.starts_with("tmux"));
        let again: &[Duration] = if not_yet { &HANGUP_AGAIN } else { &[] };
        let shared = Arc::clone(&self.shared);
        let queued = current(&self.slot).is_ok_and(|c| {
            for &again in again.iter().filter(|&&at| at < grace) {
                let shared = Arc::clone(&shared);
                c.later.after(again, move || {
                    if shared.exit.get().is_none() {
                        let _ = signal_group(pid, Signal::SIGHUP);
                    }
                });
            }
            c.later.after(grace, move || kill_after_grace(&shared, pid))
        });
        if !queued {
            tracing::warn!(terminal = id, "cannot wait for the grace; SIGKILL now");
            let _ = signal_group(pid, Signal::SIGKILL);
        }
    }

    fn exit_status(&self) -> Option<ExitStatus> {
        self.shared.exit.get().copied()
    }

    fn attach(&self) -> Option<Attachment> {
        Some(self.shared.screen.attach())
    }

    /// `None` on an SSH host: its server is there.
    fn native_attach(&self) -> Option<NativeAttach> {
        if self.home.is_some() {
            return None;
        }
        Some(NativeAttach::Tmux {
            socket: current(&self.slot).ok()?.socket.clone(),
            session: SESSION.to_owned(),
            window: self.shared.window().to_owned(),
        })
    }
}

/// When a close made as the pane starts sends its SIGHUP again, while the
/// program has not ended.
const HANGUP_AGAIN: [Duration; 2] = [Duration::from_millis(250), Duration::from_secs(1)];

/// At the end of the grace: SIGKILL to what is left of the program's group —
/// unless the program ended and nothing is left of its group.
fn kill_after_grace(shared: &Shared, pid: Pid) {
    if shared.exit.get().is_some() && group_gone(pid) {
        return;
    }
    log_grace_kill(shared.id, signal_group(pid, Signal::SIGKILL));
}

/// A command that has tmux send `signal` to the program `pid`'s group (or to
/// the program alone, when it has no group yet) on the server's machine.
fn remote_signal(pid: u32, signal: &str) -> (String, Vec<Reply>) {
    let script =
        format!("kill -{signal} -- -{pid} 2>/dev/null || kill -{signal} {pid} 2>/dev/null; true");
    (
        format!("run-shell -b {}", quote(script.as_bytes())),
        vec![Reply::Ignore],
    )
}

/// Splits what a write carries into a bracketed paste (its text, without the
/// markers) and the keys around it (before it nothing is expected; after it, the
/// Enter that Send may add).
fn split_paste(bytes: &[u8]) -> (Option<&[u8]>, Vec<u8>) {
    const START: &[u8] = b"\x1b[200~";
    const END: &[u8] = b"\x1b[201~";
    if let Some(rest) = bytes.strip_prefix(START)
        && let Some(end) = rest.windows(END.len()).position(|w| w == END)
    {
        return (Some(&rest[..end]), rest[end + END.len()..].to_vec());
    }
    (None, bytes.to_vec())
}

/// Signals the program's process group — or the program alone, when it has no
/// group yet (tmux's child between `fork` and `setsid`; the signal waits for it).
fn signal_group(pid: Pid, signal: Signal) -> nix::Result<()> {
    match killpg(pid, signal) {
        Err(Errno::ESRCH) => nix::sys::signal::kill(pid, signal),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pastes_are_split_from_keys() {
        let (paste, keys) = split_paste(b"\x1b[200~a\nb\x1b[201~\r");
        assert_eq!(paste, Some(&b"a\nb"[..]));
        assert_eq!(keys, b"\r");
        let (paste, keys) = split_paste(b"ls\r");
        assert_eq!(paste, None);
        assert_eq!(keys, b"ls\r");
        let (paste, keys) = split_paste(b"\x1b[200~unterminated");
        assert_eq!(paste, None);
        assert_eq!(keys, b"\x1b[200~unterminated");
    }
}
