//! How a tmux terminal ends: its exit status asked of tmux once the window was
//! renamed `krad-dead` (or the watchdog found its program gone), its final
//! screen asked for, then — once its output is parsed — `Exited`. The reader
//! reads the answers; this holds the commands and the end.

use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::{ExitStatus, TerminalEvent};

use super::codec::quote;
use super::common::lock;
use super::connection::Connection;
use super::reply::Reply;
use super::seed::seed_line;
use super::state::Pipeline;

/// Times a pane's exit status is asked for again while tmux does not know it yet.
const EXIT_QUERIES: u32 = 40;

/// The exit status in the first line of a [`Reply::Dead`] answer
/// (`pane_dead`, `pane_dead_status`, `pane_dead_signal`), if the pane is dead.
pub(super) fn dead_status(lines: &[Vec<u8>]) -> Option<ExitStatus> {
    let text = String::from_utf8_lossy(lines.first()?).into_owned();
    let mut fields = text.split('\t');
    if fields.next() != Some("1") {
        return None;
    }
    Some(ExitStatus {
        code: fields.next().and_then(|c| c.parse().ok()),
        signal: fields.next().and_then(|s| s.parse().ok()),
    })
}

/// Whether a dead pane's status is worth asking for again (tmux may see the end
/// of the output before the process's status), after `queries` asks.
pub(super) fn ask_again(status: ExitStatus, queries: u32) -> bool {
    status.code.is_none() && status.signal.is_none() && queries < EXIT_QUERIES
}

/// Asks for a dead pane's final screen: tmux drops the output it had not yet
/// passed to control clients when a pane dies, but its screen has it.
pub(super) fn ask_final_screen(
    connection: &Connection,
    pane: &str,
    scrollback_lines: usize,
) -> io::Result<()> {
    let replies = vec![
        Reply::SeedInfo(pane.to_owned()),
        Reply::Seed(pane.to_owned()),
    ];
    connection
        .control
        .send(vec![(seed_line(pane, scrollback_lines), replies)])
}

/// Asks for a pane's exit status, shortly, off the reader (which reads for
/// everyone); false if the client's thread for later work is gone.
///
/// On an SSH host (where the watchdog cannot send the server the SIGCHLD tmux
/// 3.3 may miss, leaving the program a zombie and its status unknown), tmux
/// is first asked to send it to itself.
pub(super) fn ask_exit_soon(connection: &Arc<Connection>, pane: &str) -> bool {
    if connection.remote.is_some() {
        let nudge = format!("run-shell -b {}", quote(b"kill -CHLD #{pid}"));
        let _ = connection.control.send(vec![(nudge, vec![Reply::Ignore])]);
    }
    let asking = Arc::clone(connection);
    let pane = pane.to_owned();
    connection
        .later
        .after(Duration::from_millis(25), move || ask_exit(&asking, &pane))
}

/// Asks for a pane's exit status.
pub(super) fn ask_exit(connection: &Connection, pane: &str) {
    let format = quote(b"#{pane_dead}\t#{pane_dead_status}\t#{pane_dead_signal}");
    let _ = connection.control.send(vec![(
        format!("display-message -p -t {pane} {format}"),
        vec![Reply::Dead(pane.to_owned())],
    )]);
}

/// A program ended: once its output is parsed (and the final screen, if given,
/// is in place), records the status, sends `Exited` (last) and closes its
/// window. Off the reader (the client's thread for later work): the reader
/// goes on for the others.
pub(super) fn finish(
    connection: &Arc<Connection>,
    pipeline: Pipeline,
    status: ExitStatus,
    screen: Option<((u16, u16), Vec<u8>)>,
) {
    end(connection, pipeline, status, screen, true);
}

/// A terminal whose pane is gone from its server (the host's tmux server was
/// killed, or the host restarted): it ends without a status, and no window is
/// closed (a new server may have given its id to another).
pub(super) fn finish_gone(connection: &Arc<Connection>, pipeline: Pipeline) {
    let status = ExitStatus {
        code: None,
        signal: None,
    };
    end(connection, pipeline, status, None, false);
}

/// A terminal on an SSH host closed while the link is down (its pipeline
/// waiting for a client): the app lets go of it — its output parsed, it ends
/// with `status` here; the host's window is the app's to close once the link
/// is back.
pub(super) fn abandon(mut pipeline: Pipeline, status: ExitStatus) {
    let work = move || {
        drop(pipeline.chunks.take());
        if let Some(parsed) = pipeline.parsed.take() {
            let _ = parsed.blocking_recv();
        }
        if pipeline.shared.exit.set(status).is_ok() {
            let _ = pipeline.events.blocking_send(TerminalEvent::Exited(status));
        }
    };
    if let Err(error) = std::thread::Builder::new()
        .name("krad-tmux-abandon".into())
        .spawn(work)
    {
        tracing::error!(%error, "cannot end a tmux terminal");
    }
}

fn end(
    connection: &Arc<Connection>,
    mut pipeline: Pipeline,
    status: ExitStatus,
    screen: Option<((u16, u16), Vec<u8>)>,
    close_window: bool,
) {
    lock(&connection.followed).remove(pipeline.shared.pane());
    let finishing = Arc::clone(connection);
    let work = move || {
        let connection = finishing;
        drop(pipeline.chunks.take());
        if let Some(parsed) = pipeline.parsed.take() {
            // Resolves (with an error) once the output thread is done.
            let _ = parsed.blocking_recv();
        }
        let shared = &pipeline.shared;
        if let Some((size, bytes)) = screen {
            shared.replace_screen(size, &bytes);
        }
        // tmux may forget the pane now (before the exit is known: an app that
        // stops as soon as it is leaves no dead pane behind).
        let window = shared.window();
        if close_window && !window.is_empty() && !shared.detached.load(Ordering::SeqCst) {
            let _ = connection.control.send(vec![(
                format!("kill-window -t {window}"),
                vec![Reply::Ignore],
            )]);
        }
        if shared.exit.set(status).is_err() {
            return;
        }
        tracing::debug!(terminal = shared.id, ?status, "tmux terminal ended");
        let _ = pipeline.events.blocking_send(TerminalEvent::Exited(status));
    };
    if !connection.later.after(Duration::ZERO, work) {
        tracing::error!("cannot finish a tmux terminal: its client's thread is gone");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dead_panes_tell_their_status() {
        assert_eq!(
            dead_status(&[b"1\t3\t".to_vec()]),
            Some(ExitStatus {
                code: Some(3),
                signal: None
            })
        );
        assert_eq!(dead_status(&[b"0\t\t".to_vec()]), None);
        assert_eq!(dead_status(&[]), None);
    }
}
