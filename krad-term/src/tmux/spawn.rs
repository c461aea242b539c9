//! Opening a terminal's window (one command line through the control client,
//! so that it sees the program's first byte and the environment never shows on
//! a command line), and taking back a pane a previous run left — at once, or
//! (on an SSH host) once the link is up, with the terminals a lost link left
//! ([`take_back`]). The host passes in a [`Site`]: its server, its client's
//! slot, and how to get its control client (called once the spec was checked).

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc as std_mpsc;

use tokio::sync::mpsc;

use crate::program::{checked_program, names_term};
use crate::pty::DEFAULT_TERM;
use crate::{AdoptSpec, SpawnError, SpawnSpec, Terminal, TerminalEvent};

use super::codec::quote;
use super::common::{ID_OPTION, REPLY_TIMEOUT, SESSION, window_name};
use super::connection::{Connection, Slot};
use super::exit::finish_gone;
use super::reply::Reply;
use super::runner::runner_argv;
use super::seed::seed_line;
use super::server::{PaneInfo, Server};
use super::state::{Orphans, Pipeline};
use super::terminal::TmuxTerminal;

/// What the host gives a terminal: its client's slot, and (on an SSH host)
/// where the terminal waits while the link is down.
pub(super) type Room<'a> = (&'a Arc<Slot>, Option<&'a Orphans>);

/// Where a host opens its terminals: its tmux server, its room, and how to get
/// its control client (`connect`, called only once a spec was checked).
pub(super) struct Site<'a, C> {
    pub(super) server: &'a Server,
    pub(super) room: Room<'a>,
    pub(super) connect: C,
}

/// Starts `spec.argv` in a new window of the site's server, through its
/// control client.
pub(super) fn spawn_terminal(
    site: Site<'_, impl FnOnce() -> Result<Arc<Connection>, SpawnError>>,
    spec: SpawnSpec,
    events: mpsc::Sender<TerminalEvent>,
) -> Result<TmuxTerminal, SpawnError> {
    let (server, (slot, home)) = (site.server, site.room);
    let program = checked_program(&spec)?;
    if home.is_none() {
        // (On a host, the program is found there.)
        find_program(program, &spec.cwd, &spec.env)?;
    }
    let connection = (site.connect)()?;
    let (cols, rows) = (spec.cols.max(1), spec.rows.max(1));
    let terminal = TmuxTerminal::new(slot, home, spec.id, (cols, rows), spec.scrollback_lines);
    let pipeline = terminal.pipeline(spec.transcript.clone(), events)?;
    let window = window_name(spec.id);
    // A window of this id can only be an orphan of a run that died while
    // starting it (ids are never reused).
    let _ = server.run(&["kill-window", "-t", &format!("={SESSION}:={window}")]);
    let (created, created_rx) = std_mpsc::channel();
    let created = Reply::Created(Box::new(pipeline), created);
    let (line, replies) = open_window_line(&spec, &window, (cols, rows), created);
    connection
        .control
        .send(vec![(line, replies)])
        .map_err(|e| SpawnError::Host(format!("cannot talk to tmux: {e}")))?;
    created_rx
        .recv_timeout(REPLY_TIMEOUT)
        .unwrap_or_else(|_| Err("tmux did not answer in time".to_owned()))
        .map_err(|e| SpawnError::Host(format!("cannot start {program:?} in tmux: {e}")))?;
    crate::program::log_started("tmux terminal", spec.id, terminal.pid(), &spec.argv);
    Ok(terminal)
}

/// Takes back the pane of terminal `spec.id` from the site's server, through
/// its control client: its screen as tmux has it, then its output.
pub(super) fn adopt_terminal(
    site: Site<'_, impl FnOnce() -> Result<Arc<Connection>, SpawnError>>,
    spec: AdoptSpec,
    events: mpsc::Sender<TerminalEvent>,
) -> Result<TmuxTerminal, SpawnError> {
    let (server, (slot, home)) = (site.server, site.room);
    let Some(info) = server.panes()?.into_iter().find(|p| p.id == spec.id) else {
        return Err(SpawnError::Host(format!(
            "terminal {} is no longer in tmux",
            spec.id
        )));
    };
    let connection = (site.connect)()?;
    let terminal = TmuxTerminal::new(slot, home, spec.id, (80, 24), spec.scrollback_lines);
    let _ = terminal.shared.pane.set(info.pane.clone());
    let _ = terminal.shared.window.set(info.window.clone());
    let mut pipeline = terminal.pipeline(spec.transcript, events)?;
    let (seeded, seeded_rx) = std_mpsc::channel();
    pipeline.seeded = Some(seeded);
    let line = seed_line(&info.pane, spec.scrollback_lines);
    // The pipeline joins the reader with the first answer: what the pane
    // printed before it is in the capture.
    let replies = vec![
        Reply::Adopt(Box::new(pipeline)),
        Reply::Seed(info.pane.clone()),
    ];
    connection
        .control
        .send(vec![(line, replies)])
        .map_err(|e| SpawnError::Host(format!("cannot talk to tmux: {e}")))?;
    seeded_rx
        .recv_timeout(REPLY_TIMEOUT)
        .unwrap_or_else(|_| Err("tmux did not show the pane in time".into()))
        .map_err(|e| SpawnError::Host(format!("cannot take terminal {} back: {e}", spec.id)))?;
    tracing::debug!(terminal = spec.id, pid = ?terminal.pid(), dead = info.dead, "tmux terminal taken back");
    Ok(terminal)
}

/// The command line that opens a terminal's window, and the replies its
/// commands are owed (`created` for `new-window`). New windows take the
/// session's default size, so the program sees its own from its first instant;
/// the window is sized by hand too, so that tmux leaves it that size, and its
/// pane tagged with the terminal's id.
fn open_window_line(
    spec: &SpawnSpec,
    window: &str,
    (cols, rows): (u16, u16),
    created: Reply,
) -> (String, Vec<Reply>) {
    let target = format!(":={window}");
    let mut replies = vec![Reply::Ignore];
    let mut line = format!("set-option default-size {cols}x{rows} ; ");
    for key in &spec.env_remove {
        line.push_str(&format!("set-environment -r {} ; ", quote(key.as_bytes())));
        replies.push(Reply::Ignore);
    }
    line.push_str(&new_window(spec, window));
    replies.push(created);
    line.push_str(&format!(
        " ; resize-window -t {target} -x {cols} -y {rows} ; set-option -p -t {target} {ID_OPTION} {}",
        spec.id
    ));
    replies.push(Reply::Ignore);
    replies.push(Reply::Ignore);
    (line, replies)
}

/// The `new-window` command running `spec.argv` (through the pane's runner) in
/// its directory, with `TERM` and the spec's variables, printing `pane window
/// pid`.
fn new_window(spec: &SpawnSpec, window: &str) -> String {
    let cwd = spec.cwd.to_string_lossy().replace('#', "##");
    let mut line = format!(
        "new-window -d -n {window} -c {} -P -F {}",
        quote(cwd.as_bytes()),
        quote(b"#{pane_id}\t#{window_id}\t#{pane_pid}"),
    );
    if !names_term(spec) {
        line.push_str(&format!(" -e TERM={DEFAULT_TERM}"));
    }
    for (key, value) in &spec.env {
        line.push_str(" -e ");
        line.push_str(&quote(format!("{key}={value}").as_bytes()));
    }
    line.push_str(" --");
    // The runner runs the argv as it is (one argument is not given to a shell).
    for word in runner_argv() {
        line.push(' ');
        line.push_str(&quote(word.as_bytes()));
    }
    for arg in &spec.argv {
        line.push(' ');
        line.push_str(&quote(arg.as_bytes()));
    }
    line
}

/// Checks that `program` can be run, as the PTY host finds out by running it:
/// tmux would only show a dead pane.
fn find_program(program: &str, cwd: &Path, env: &[(String, String)]) -> Result<(), SpawnError> {
    use std::os::unix::fs::PermissionsExt as _;
    let runnable = |path: &Path| {
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let found = if program.contains('/') {
        runnable(&cwd.join(program))
    } else {
        let path = env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| std::ffi::OsString::from(v))
            .or_else(|| std::env::var_os("PATH"))
            .unwrap_or_default();
        std::env::split_paths(&path).any(|dir| runnable(&cwd.join(dir).join(program)))
    };
    if found {
        Ok(())
    } else {
        Err(SpawnError::Program {
            program: program.to_owned(),
            source: io::Error::new(io::ErrorKind::NotFound, "no such program"),
        })
    }
}

/// A terminal of an SSH host's server to be taken back once the link is up
/// (a restarted app's, before its link is): its handle at once, its pipeline
/// waiting in `home` for [`take_back`].
pub(super) fn adopt_later(
    (slot, home): (&Arc<Slot>, &Orphans),
    spec: AdoptSpec,
    events: mpsc::Sender<TerminalEvent>,
) -> Result<TmuxTerminal, SpawnError> {
    let terminal = TmuxTerminal::new(slot, Some(home), spec.id, (80, 24), spec.scrollback_lines);
    let pipeline = terminal.pipeline(spec.transcript, events)?;
    terminal
        .shared
        .waiting
        .store(true, std::sync::atomic::Ordering::SeqCst);
    super::common::lock(home).push(pipeline);
    Ok(terminal)
}

/// Takes back, through `connection`, the terminals waiting in `orphans`: each
/// one's pane, if `server` still has it, with its screen as tmux has it now
/// (what the program printed meanwhile shows), then its output (a pane that
/// died meanwhile ends with its status); a terminal whose pane is gone (the
/// host's tmux server was killed, or the host restarted) ends without a status.
pub(super) fn take_back(
    server: &Server,
    connection: &Arc<Connection>,
    orphans: &Orphans,
) -> Result<(), SpawnError> {
    let panes = server.panes()?;
    let waiting = std::mem::take(&mut *super::common::lock(orphans));
    let mut seeds = Vec::new();
    for pipeline in waiting {
        let shared = Arc::clone(&pipeline.shared);
        if shared.detached.load(std::sync::atomic::Ordering::SeqCst) || shared.exit.get().is_some()
        {
            continue;
        }
        match pane_of(&panes, &pipeline) {
            Some(info) => {
                let _ = shared.pane.set(info.pane.clone());
                let _ = shared.window.set(info.window.clone());
                seeds.push((shared.id, send_seed(connection, pipeline, info)));
            }
            None => {
                tracing::info!(
                    terminal = shared.id,
                    "the terminal's pane is gone from tmux on its host"
                );
                finish_gone(connection, pipeline);
            }
        }
    }
    for (id, seeded) in seeds {
        match seeded.recv_timeout(REPLY_TIMEOUT) {
            Ok(Ok(())) => tracing::debug!(terminal = id, "tmux terminal on its host taken back"),
            Ok(Err(error)) => {
                tracing::info!(terminal = id, %error, "cannot take the terminal back yet")
            }
            Err(_) => tracing::info!(terminal = id, "tmux did not show the pane in time"),
        }
    }
    Ok(())
}

/// The pane of a waiting terminal, if the server has it (the same pane it had,
/// when it had one).
fn pane_of<'a>(panes: &'a [PaneInfo], pipeline: &Pipeline) -> Option<&'a PaneInfo> {
    let shared = &pipeline.shared;
    panes
        .iter()
        .find(|p| p.id == shared.id)
        .filter(|p| shared.pane.get().is_none_or(|pane| *pane == p.pane))
}

/// Asks for a waiting terminal's pane and screen: its pipeline joins the reader
/// with the answer. Told once the screen is in place (or why not: a pipeline
/// that could not join waits again in its home).
fn send_seed(
    connection: &Connection,
    mut pipeline: Pipeline,
    info: &PaneInfo,
) -> std_mpsc::Receiver<Result<(), String>> {
    let (seeded, seeded_rx) = std_mpsc::channel();
    pipeline.seeded = Some(seeded);
    let line = seed_line(&info.pane, pipeline.shared.scrollback_lines);
    let replies = vec![
        Reply::Adopt(Box::new(pipeline)),
        Reply::Seed(info.pane.clone()),
    ];
    // A failure fails the replies: the pipeline waits again.
    let _ = connection.control.send(vec![(line, replies)]);
    seeded_rx
}
