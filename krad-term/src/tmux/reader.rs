//! The reader thread: reads the control client's output — each pane's
//! `%output` for its terminal, `%window-renamed` when a program ended,
//! `%layout-change` when someone resized a window — and hands each `%begin` …
//! `%end` (or `%error`) answer to the reply it is owed.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader};
use std::process::ChildStdout;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc as std_mpsc;

use crate::ExitStatus;

use super::codec::{lossy_lines, output_size, unescape};
use super::common::{DEAD_NAME, lock};
use super::connection::Connection;
use super::exit::{ask_again, ask_exit, ask_exit_soon, ask_final_screen, dead_status, finish};
use super::reply::{Reply, WriteState};
use super::seed::parse_seed_info;
use super::state::Pipeline;

/// The lines of the answer being read, and whether it answers us.
type Block = Option<(bool, Vec<Vec<u8>>)>;

/// The reader thread of the control client.
pub(super) struct Reader {
    connection: Arc<Connection>,
    /// The terminals it feeds, by pane.
    terminals: HashMap<String, Pipeline>,
    /// Told once the client is attached.
    attached: Option<std_mpsc::Sender<()>>,
}

impl Reader {
    /// A reader for `connection`'s client; `attached` is told once it is.
    pub(super) fn new(connection: Arc<Connection>, attached: std_mpsc::Sender<()>) -> Self {
        Self {
            connection,
            terminals: HashMap::new(),
            attached: Some(attached),
        }
    }

    /// Reads the client's output until it ends.
    pub(super) fn run(mut self, stdout: ChildStdout) {
        let mut stdout = BufReader::new(stdout);
        let mut line = Vec::new();
        let mut block: Block = None;
        loop {
            line.clear();
            match stdout.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if line.last() == Some(&b'\n') {
                line.pop();
            }
            log_line(&line);
            if block.is_some() {
                self.block_line(&mut block, &line);
            } else if let Some(rest) = line.strip_prefix(b"%begin ") {
                block = Some((answers_us(rest), Vec::new()));
            } else {
                self.notification(&line);
            }
        }
        self.client_ended();
    }

    /// A line of an answer: the answer's own, or its `%end` / `%error`.
    fn block_line(&mut self, block: &mut Block, line: &[u8]) {
        let Some((ours, lines)) = block else {
            return;
        };
        let end = line.starts_with(b"%end ");
        if end || line.starts_with(b"%error ") {
            let (ours, lines) = (*ours, std::mem::take(lines));
            *block = None;
            if ours {
                self.answer(end, lines);
            }
        } else {
            lines.push(line.to_vec());
        }
    }

    /// A line outside an answer: a pane's output, a window renamed (its program
    /// ended), a window resized, the client attached.
    fn notification(&mut self, line: &[u8]) {
        if let Some(rest) = line.strip_prefix(b"%output ") {
            self.output(rest);
        } else if let Some(rest) = line.strip_prefix(b"%window-renamed ") {
            let text = String::from_utf8_lossy(rest);
            if let Some((window, name)) = text.split_once(' ')
                && name == DEAD_NAME
                && let Some(pane) = self.pane_of_window(window)
            {
                ask_exit(&self.connection, &pane);
            }
        } else if let Some(rest) = line.strip_prefix(b"%layout-change ") {
            self.layout(&String::from_utf8_lossy(rest));
        } else if line.starts_with(b"%session-changed ")
            && let Some(attached) = self.attached.take()
        {
            let _ = attached.send(());
        }
    }

    /// The client ended: the server went away (or was killed), or the host
    /// let go of it. Terminals still followed end without a known status —
    /// unless the server is on an SSH host: there the link went, the programs
    /// run on, and the terminals wait for the next client ([`Self::orphan`]).
    fn client_ended(mut self) {
        self.connection.control.close();
        if let Some(mut client) = lock(&self.connection.client).take() {
            let _ = client.kill();
            let _ = client.wait();
        }
        for (_, mut pipeline) in self.terminals.drain() {
            if let Some(seeded) = pipeline.seeded.take() {
                let _ = seeded.send(Err("the tmux client ended".into()));
            }
            if let (Some(host), Some(home)) = (&self.connection.remote, pipeline.home.clone()) {
                orphan(&self.connection, (host.as_str(), &*home), pipeline);
                continue;
            }
            if pipeline.shared.exit.get().is_none()
                && !pipeline.shared.detached.load(Ordering::SeqCst)
            {
                tracing::debug!(
                    terminal = pipeline.shared.id,
                    "the tmux server went away without an exit status"
                );
                let status = pipeline.final_status.take().unwrap_or(ExitStatus {
                    code: None,
                    signal: None,
                });
                finish(&self.connection, pipeline, status, None);
            }
        }
    }

    fn pane_of_window(&self, window: &str) -> Option<String> {
        self.terminals
            .iter()
            .find(|(_, p)| p.shared.window() == window && !p.shared.detached.load(Ordering::SeqCst))
            .map(|(pane, _)| pane.clone())
    }

    fn output(&mut self, rest: &[u8]) {
        let Some(space) = rest.iter().position(|&b| b == b' ') else {
            return;
        };
        let pane = String::from_utf8_lossy(&rest[..space]);
        let Some(pipeline) = self.terminals.get(pane.as_ref()) else {
            return;
        };
        if pipeline.shared.detached.load(Ordering::SeqCst) {
            // The app let go of it: its program runs on, unfollowed.
            self.terminals.remove(pane.as_ref());
            return;
        }
        if pipeline.skip_output {
            return;
        }
        let bytes = unescape(&rest[space + 1..]);
        if let Some(chunks) = &pipeline.chunks
            && !bytes.is_empty()
        {
            // Back-pressure: tmux keeps the output while the parser catches up.
            let _ = chunks.blocking_send(bytes);
        }
    }

    fn layout(&self, rest: &str) {
        // `@window layout visible-layout flags`, a layout being `csum,WxH,x,y…`.
        let mut fields = rest.split(' ');
        let Some(window) = fields.next() else {
            return;
        };
        let Some(pipeline) = self
            .terminals
            .values()
            .find(|p| p.shared.window() == window)
        else {
            return;
        };
        let size = fields
            .next()
            .and_then(|layout| layout.split(',').nth(1))
            .and_then(|size| size.split_once('x'))
            .and_then(|(c, r)| Some((c.parse::<u16>().ok()?, r.parse::<u16>().ok()?)));
        if let Some((cols, rows)) = size {
            pipeline.shared.screen.with(|screen| {
                if screen.size() != (cols, rows) {
                    screen.resize(cols, rows);
                }
            });
        }
    }

    /// An answer came: `ok` unless `%error`.
    fn answer(&mut self, ok: bool, lines: Vec<Vec<u8>>) {
        let (reply, skipped) = self.connection.control.next_reply(ok);
        for reply in skipped {
            reply.fail("tmux skipped it after an error");
        }
        let Some(reply) = reply else {
            return;
        };
        match reply {
            Reply::Ignore => {}
            Reply::Created(pipeline, sender) => {
                let result = if ok {
                    self.created(*pipeline, &lines)
                } else {
                    Err(lossy_lines(&lines))
                };
                let _ = sender.send(result);
            }
            Reply::Adopt(pipeline) => self.adopted(*pipeline, ok, &lines),
            Reply::Write { state, last } => written(&state, last, ok, &lines),
            Reply::Dead(pane) => self.dead(&pane, ok, &lines),
            Reply::SeedInfo(pane) => {
                let info = ok.then(|| parse_seed_info(&lines)).flatten();
                if let Some(pipeline) = self.terminals.get_mut(&pane) {
                    pipeline.seed = info;
                }
            }
            Reply::Seed(pane) => self.seed(&pane, ok.then_some(&lines[..])),
        }
    }

    /// A pane being taken back was described (its size, cursor and modes): its
    /// pipeline joins, skipping output until the capture that follows.
    fn adopted(&mut self, mut pipeline: Pipeline, ok: bool, lines: &[Vec<u8>]) {
        let info = ok.then(|| parse_seed_info(lines)).flatten();
        let Some(info) = info else {
            let why = format!("tmux could not describe the pane: {}", lossy_lines(lines));
            Reply::Adopt(Box::new(pipeline)).fail(&why);
            return;
        };
        pipeline.skip_output = true;
        pipeline.seed = Some(info);
        let pane = pipeline.shared.pane().to_owned();
        self.terminals.insert(pane, pipeline);
    }

    /// A program's window opened: `pane window pid`.
    fn created(&mut self, pipeline: Pipeline, lines: &[Vec<u8>]) -> Result<(), String> {
        let text = lines
            .first()
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .unwrap_or_default();
        let mut fields = text.split('\t');
        let (Some(pane), Some(window)) = (fields.next(), fields.next()) else {
            return Err(format!("tmux new-window printed {text:?}"));
        };
        let shared = &pipeline.shared;
        let _ = shared.pane.set(pane.to_owned());
        let _ = shared.window.set(window.to_owned());
        if let Some(pid) = fields.next().and_then(|p| p.parse().ok()) {
            let _ = shared.pid.set(pid);
            lock(&self.connection.followed).insert(pane.to_owned(), pid);
        }
        self.terminals.insert(pane.to_owned(), pipeline);
        Ok(())
    }

    /// A pane's exit status came: the final screen is asked for next.
    fn dead(&mut self, pane: &str, ok: bool, lines: &[Vec<u8>]) {
        let Some(status) = ok.then(|| dead_status(lines)).flatten() else {
            return;
        };
        let Some(pipeline) = self.terminals.get_mut(pane) else {
            return;
        };
        if pipeline.final_status.is_some() {
            return;
        }
        // tmux may see the end of the output before the process's status: ask
        // again, shortly.
        if ask_again(status, pipeline.exit_queries) {
            pipeline.exit_queries += 1;
            if ask_exit_soon(&self.connection, pane) {
                return;
            }
        }
        pipeline.final_status = Some(status);
        let scrollback_lines = pipeline.shared.scrollback_lines;
        if ask_final_screen(&self.connection, pane, scrollback_lines).is_err()
            && let Some(pipeline) = self.terminals.remove(pane)
        {
            finish(&self.connection, pipeline, status, None);
        }
    }

    /// A pane's screen, as tmux has it: in place of the one taken back (then its
    /// output follows), or as the final one once its program ended.
    fn seed(&mut self, pane: &str, lines: Option<&[Vec<u8>]>) {
        let Some(pipeline) = self.terminals.get_mut(pane) else {
            return;
        };
        let info = pipeline.seed.take();
        let scrollback_lines = pipeline.shared.scrollback_lines;
        let screen = info
            .as_ref()
            .zip(lines)
            .map(|(info, lines)| info.screen(lines, scrollback_lines));
        if let Some(pid) = info.as_ref().and_then(|i| i.pid) {
            let _ = pipeline.shared.pid.set(pid);
        }
        if let Some(seeded) = pipeline.seeded.take() {
            // Taking the pane back.
            let Some((size, bytes)) = screen else {
                let _ = seeded.send(Err("tmux could not capture the pane".into()));
                if let Some(pipeline) = self.terminals.remove(pane)
                    && let Some(home) = pipeline.home.clone()
                {
                    // On an SSH host: the next client tries again.
                    lock(&home).push(pipeline);
                }
                return;
            };
            // Reachable first: whoever sees the new screen can type into it.
            pipeline.shared.waiting.store(false, Ordering::SeqCst);
            pipeline.shared.replace_screen(size, &bytes);
            pipeline.skip_output = false;
            if let Some(pid) = pipeline.shared.pid.get() {
                lock(&self.connection.followed).insert(pane.to_owned(), *pid);
            }
            let _ = seeded.send(Ok(()));
            match info.and_then(|i| i.dead) {
                // tmux saw the end before the process's status: asked for
                // (again, shortly, if need be), as for a pane seen dying.
                Some(status) if status.code.is_none() && status.signal.is_none() => {
                    ask_exit(&self.connection, pane);
                }
                Some(status) => {
                    if let Some(pipeline) = self.terminals.remove(pane) {
                        finish(&self.connection, pipeline, status, None);
                    }
                }
                None => {}
            }
        } else if let Some(status) = pipeline.final_status.take()
            && let Some(pipeline) = self.terminals.remove(pane)
        {
            finish(&self.connection, pipeline, status, screen);
        }
    }
}

/// A terminal on an SSH host whose client ended with the link: it waits in
/// `orphans` for the next client (unless it ended, or the app let go of it),
/// its screen saying so.
fn orphan(
    connection: &Arc<Connection>,
    (host, orphans): (&str, &std::sync::Mutex<Vec<Pipeline>>),
    mut pipeline: Pipeline,
) {
    let shared = &pipeline.shared;
    if shared.exit.get().is_some() || shared.detached.load(Ordering::SeqCst) {
        return;
    }
    if let Some(status) = pipeline.final_status.take() {
        // Its end was seen; its final screen was not.
        finish(connection, pipeline, status, None);
        return;
    }
    pipeline.shared.waiting.store(true, Ordering::SeqCst);
    if let Some(chunks) = &pipeline.chunks {
        let notice = format!(
            "\r\n[krad: the link to host {host} is down; the program there goes on; taken \
             back once the link is up]\r\n"
        );
        let _ = chunks.blocking_send(notice.into_bytes());
    }
    pipeline.skip_output = false;
    pipeline.seed = None;
    pipeline.exit_queries = 0;
    lock(orphans).push(pipeline);
}

/// One command of a write was answered: an error answers the write; the last
/// command's success does.
fn written(state: &WriteState, last: bool, ok: bool, lines: &[Vec<u8>]) {
    if !ok {
        state.answer(Err(io::Error::other(format!(
            "tmux: {}",
            lossy_lines(lines)
        ))));
    } else if last {
        state.answer(Ok(()));
    }
}

/// Whether an answer that begins `%begin time number flags` answers this
/// client's own command (flags 1).
fn answers_us(rest: &[u8]) -> bool {
    rest.rsplit(|&b| b == b' ')
        .next()
        .and_then(|f| std::str::from_utf8(f).ok())
        .and_then(|f| f.parse::<u32>().ok())
        .is_some_and(|f| f & 1 == 1)
}

/// Logs a line from tmux. A pane's output is the program's (what a user typed,
/// a prompt): only its size is logged.
fn log_line(line: &[u8]) {
    match output_size(line) {
        Some((pane, bytes)) => tracing::trace!(pane, bytes, "from tmux: %output"),
        None => tracing::trace!(line = %String::from_utf8_lossy(line), "from tmux"),
    }
}
