//! How a tmux terminal ends: its exit status asked of tmux once the window was
//! renamed `krad-dead`, its final screen taken from tmux, then `Exited`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::{ExitStatus, TerminalEvent};

use super::codec::quote;
use super::connection::Connection;
use super::control::Reply;
use super::lock;
use super::reader::{Pipeline, Reader};
use super::seed::{replace_screen, seed_line};

/// Times a pane's exit status is asked for again while tmux does not know it yet.
const EXIT_QUERIES: u32 = 40;

impl Reader {
    /// A pane's exit status came (`pane_dead`, `pane_dead_status`,
    /// `pane_dead_signal`): the final screen is asked for next.
    pub(super) fn dead(&mut self, pane: &str, ok: bool, lines: &[Vec<u8>]) {
        let text = lines
            .first()
            .map(|l| String::from_utf8_lossy(l).into_owned());
        let Some(text) = text.filter(|_| ok) else {
            return;
        };
        let Some(pipeline) = self.terminals.get_mut(pane) else {
            return;
        };
        let mut fields = text.split('\t');
        if fields.next() != Some("1") || pipeline.final_status.is_some() {
            return;
        }
        let status = ExitStatus {
            code: fields.next().and_then(|c| c.parse().ok()),
            signal: fields.next().and_then(|s| s.parse().ok()),
        };
        // tmux may see the end of the output before the process's status: ask
        // again, shortly.
        if status.code.is_none() && status.signal.is_none() && pipeline.exit_queries < EXIT_QUERIES
        {
            pipeline.exit_queries += 1;
            if ask_exit_soon(&self.connection, pane) {
                return;
            }
        }
        // tmux drops the output it had not yet passed to control clients when a
        // pane dies, but its screen has it: the final screen comes from there.
        pipeline.final_status = Some(status);
        let (line, _) = seed_line(pane, pipeline.shared.scrollback_lines);
        let replies = vec![
            Reply::SeedInfo(pane.to_owned()),
            Reply::Seed(pane.to_owned()),
        ];
        if self.connection.control.send(vec![(line, replies)]).is_err()
            && let Some(pipeline) = self.terminals.remove(pane)
        {
            finish(&self.connection, pipeline, status, None);
        }
    }
}

/// Asks for a pane's exit status, shortly, from another thread (the reader
/// reads for everyone); false if no thread could be started.
fn ask_exit_soon(connection: &Arc<Connection>, pane: &str) -> bool {
    let connection = Arc::clone(connection);
    let pane = pane.to_owned();
    std::thread::Builder::new()
        .name("krad-tmux-ask".into())
        .spawn(move || {
            std::thread::sleep(Duration::from_millis(25));
            ask_exit(&connection, &pane);
        })
        .is_ok()
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
/// window. On a thread of its own: the reader goes on for the others.
pub(super) fn finish(
    connection: &Arc<Connection>,
    mut pipeline: Pipeline,
    status: ExitStatus,
    screen: Option<((u16, u16), Vec<u8>)>,
) {
    lock(&connection.followed).remove(pipeline.shared.pane());
    let connection = Arc::clone(connection);
    let work = move || {
        drop(pipeline.chunks.take());
        if let Some(parsed) = pipeline.parsed.take() {
            // Resolves (with an error) once the output thread is done.
            let _ = parsed.blocking_recv();
        }
        let shared = &pipeline.shared;
        if let Some((size, bytes)) = screen {
            replace_screen(shared, size, &bytes);
        }
        // tmux may forget the pane now (before the exit is known: an app that
        // stops as soon as it is leaves no dead pane behind).
        let window = shared.window();
        if !window.is_empty() && !shared.detached.load(Ordering::SeqCst) {
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
    if let Err(error) = std::thread::Builder::new()
        .name("krad-tmux-exit".into())
        .spawn(work)
    {
        tracing::error!(%error, "cannot finish a tmux terminal");
    }
}
