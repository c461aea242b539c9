//! The pseudo-terminal host: [`PtyHost`] runs each program on a pseudo-terminal of
//! its own, in its own session and process group, inside this process.
//!
//! Per terminal, on the tokio runtime that called [`TerminalHost::spawn`]:
//!
//! * a driver task reads the terminal's output, hands it to the output pipeline (see
//!   the `output` module: screen, transcript, events, on threads shared by all
//!   terminals) and reaps the program; once
//!   the program ended and all its output was parsed it records the exit status,
//!   closes the terminal and sends [`TerminalEvent::Exited`], last;
//! * a writer task, started at the first write, writes queued input, whole and
//!   in order;
//! * [`Terminal::close`] spawns a task that kills the process group after the grace;
//! * attachers ([`Terminal::attach`]) follow the output pipeline's broadcast, which
//!   never waits for them (see the `output` module).
//!
//! It holds the terminal pair too: opening a pseudo-terminal, and the two
//! halves of its master side (the app's end) that a terminal is used through,
//! `Reader` (the program's output, in chunks of what waits at once) and
//! `Writer` (input and resizes), each a descriptor of its own registered with
//! the runtime's event loop for its one direction only.

use std::collections::BTreeMap;
use std::ffi::{CString, OsString};
use std::fs::OpenOptions;
use std::io;
use std::os::fd::{AsFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use rustix::pty::OpenptFlags;
use rustix::termios::Winsize;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::runtime::Handle;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use crate::output::{self, SharedScreen};
use crate::program::{
    checked_program, ended, group_gone, log_grace_kill, log_started, names_term, pgid,
};
use crate::start::{self, Environment, Program, Start};
use crate::{
    Attachment, ExitStatus, Snapshot, SpawnError, SpawnSpec, Terminal, TerminalEvent, TerminalHost,
};

/// The `TERM` a program gets unless the spawn spec sets or removes it: the screen
/// model understands what xterm-compatible programs print.
pub const DEFAULT_TERM: &str = "xterm-256color";

/// Bytes read from the terminal into one chunk for the parser, at most: a PTY
/// gives at most 4 KiB per read, and what it holds already is read on into the
/// same chunk (see [`Reader::read_chunk`]).
const READ_BYTES: usize = 32 * 1024;

/// Once the program ended, how long to wait for more output from processes that
/// still hold its terminal open (before closing it on them)...
const DRAIN_IDLE: Duration = Duration::from_millis(200);
/// ...and for how long at most.
const DRAIN_MAX: Duration = Duration::from_secs(2);

/// Runs terminals on pseudo-terminals of this process.
///
/// [`TerminalHost::spawn`] must be called from within a tokio runtime (with I/O,
/// time and process support, e.g. `#[tokio::main]`): the terminal's tasks run on
/// that runtime; its output is parsed on a few threads all terminals share.
///
/// The program inherits this process's environment, minus `spec.env_remove`, plus
/// `spec.env`; `TERM` is [`DEFAULT_TERM`] unless the spec sets or removes it.
///
/// [`Terminal::close`] sends SIGHUP to the program's process group, and after the
/// grace SIGKILL to whatever is left of that group (the program, or processes it
/// left behind that ignore SIGHUP). Dropping a terminal's last handle does not end
/// its program: close it first.
///
/// Once the program ended, its terminal stays open while other processes still
/// write to it, for up to 2 s (with 200 ms of silence ending it sooner), then is
/// closed on them and `Exited` is sent.
#[derive(Debug, Default, Clone, Copy)]
pub struct PtyHost {
    _private: (),
}

impl PtyHost {
    /// A host.
    pub fn new() -> Self {
        Self::default()
    }
}

impl TerminalHost for PtyHost {
    fn spawn(
        &self,
        spec: SpawnSpec,
        events: mpsc::Sender<TerminalEvent>,
    ) -> Result<Arc<dyn Terminal>, SpawnError> {
        Ok(Arc::new(PtyTerminal::spawn(spec, events)?))
    }

    fn spawn_may_block(&self) -> bool {
        false
    }

    /// A PTY terminal ends with the app that made it.
    fn restart_safe(&self) -> bool {
        false
    }
}

/// What a terminal's handle, driver task and writer task share.
#[derive(Debug)]
struct Shared {
    screen: Arc<SharedScreen>,
    /// The write half of the terminal (it also resizes it); `None` once closed.
    pty: Mutex<Option<Writer>>,
    exit: OnceLock<ExitStatus>,
    /// Whether the terminal is over: program reaped, output parsed, terminal closed.
    over: watch::Sender<bool>,
    /// Input bytes queued and not yet taken by the program.
    queued_input: AtomicUsize,
}

impl Shared {
    fn pty(&self) -> MutexGuard<'_, Option<Writer>> {
        self.pty.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

type WriteRequest = (Vec<u8>, oneshot::Sender<io::Result<()>>);

/// A terminal of a [`PtyHost`].
#[derive(Debug)]
struct PtyTerminal {
    id: u64,
    pid: Option<u32>,
    shared: Arc<Shared>,
    /// The writer task's queue, made with the task at the first write.
    writes: OnceLock<mpsc::UnboundedSender<WriteRequest>>,
    runtime: Handle,
}

impl PtyTerminal {
    fn spawn(spec: SpawnSpec, events: mpsc::Sender<TerminalEvent>) -> Result<Self, SpawnError> {
        let runtime = Handle::try_current().map_err(|_| {
            SpawnError::Host("terminals must be spawned within a tokio runtime".into())
        })?;
        let program = checked_program(&spec)?;
        let cols = spec.cols.max(1);
        let rows = spec.rows.max(1);

        let opened = open(cols, rows)
            .map_err(|e| SpawnError::Host(format!("cannot open a terminal: {e}")))?;
        // The program leads a session of its own with the terminal as its
        // controlling terminal (so its process group is its pid).
        let env = environment(&spec).map_err(|error| spawn_error(program, error))?;
        let child = start::start(&Start {
            argv: &spec.argv,
            cwd: &spec.cwd,
            env: &env,
            terminal: &opened.name,
        })
        .map_err(|error| spawn_error(program, error))?;
        // The program opened the terminal for itself.
        drop(opened.program_side);
        let pid = Some(child.id());

        let screen = Arc::new(SharedScreen::new(cols, rows, spec.scrollback_lines));
        let started = opened.master.try_clone().and_then(|reader| {
            let reader = Reader::new(reader)?;
            let writer = Writer::new(opened.master);
            let output = output::later(
                spec.id,
                Arc::clone(&screen),
                spec.transcript.clone(),
                events.clone(),
            )?;
            Ok((reader, writer, output))
        });
        let (reader, writer, output) = match started {
            Ok(started) => started,
            Err(error) => {
                if let Some(pgid) = pid.and_then(pgid) {
                    let _ = killpg(pgid, Signal::SIGKILL);
                }
                child.kill();
                let mut child = child;
                runtime.spawn(async move { child.wait().await });
                return Err(SpawnError::Host(format!(
                    "cannot start the output pipeline: {error}"
                )));
            }
        };

        let shared = Arc::new(Shared {
            screen,
            pty: Mutex::new(Some(writer)),
            exit: OnceLock::new(),
            over: watch::Sender::new(false),
            queued_input: AtomicUsize::new(0),
        });
        runtime.spawn(drive(
            spec.id,
            reader,
            child,
            output,
            Arc::clone(&shared),
            events,
        ));
        log_started("terminal", spec.id, pid, &spec.argv);
        Ok(Self {
            id: spec.id,
            pid,
            shared,
            writes: OnceLock::new(),
            runtime,
        })
    }
}

impl Terminal for PtyTerminal {
    fn id(&self) -> u64 {
        self.id
    }

    fn pid(&self) -> Option<u32> {
        self.pid
    }

    fn write(&self, bytes: Vec<u8>) -> oneshot::Receiver<io::Result<()>> {
        let (reply, receiver) = oneshot::channel();
        // A program that does not read its input holds its writers up to a
        // bound, not the app's memory: past it, writes are refused at once.
        let queued = self.shared.queued_input.load(Ordering::Acquire);
        if queued.saturating_add(bytes.len()) > crate::MAX_QUEUED_INPUT && queued > 0 {
            let _ = reply.send(Err(input_full(queued)));
            return receiver;
        }
        self.shared
            .queued_input
            .fetch_add(bytes.len(), Ordering::AcqRel);
        let writes = self.writes.get_or_init(|| {
            let (writes, requests) = mpsc::unbounded_channel();
            self.runtime
                .spawn(write_loop(Arc::clone(&self.shared), requests));
            writes
        });
        if let Err(mpsc::error::SendError((bytes, reply))) = writes.send((bytes, reply)) {
            self.shared
                .queued_input
                .fetch_sub(bytes.len(), Ordering::AcqRel);
            let _ = reply.send(Err(ended()));
        }
        receiver
    }

    fn resize(&self, cols: u16, rows: u16) -> io::Result<()> {
        let (cols, rows) = (cols.max(1), rows.max(1));
        if self.shared.pty().is_none() {
            return Err(ended());
        }
        // The screen first: what the program prints for the new size (after its
        // SIGWINCH) must land on a screen of that size. (Not under the terminal's
        // lock: the writer task must not wait for the parser.)
        self.shared.screen.with(|screen| screen.resize(cols, rows));
        match self.shared.pty().as_ref() {
            Some(pty) => pty.resize(cols, rows),
            None => Err(ended()),
        }
    }

    fn snapshot(&self, scrollback_lines: usize) -> Snapshot {
        self.shared
            .screen
            .with(|screen| screen.snapshot(scrollback_lines))
    }

    fn bracketed_paste(&self) -> bool {
        self.shared.screen.bracketed_paste()
    }

    fn close(&self, grace: Duration) {
        let mut over = self.shared.over.subscribe();
        if *over.borrow_and_update() {
            return;
        }
        let Some(pgid) = self.pid.and_then(pgid) else {
            return;
        };
        let id = self.id;
        tracing::debug!(terminal = id, "closing the terminal: SIGHUP");
        if let Err(error) = killpg(pgid, Signal::SIGHUP) {
            tracing::debug!(terminal = id, %error, "cannot send SIGHUP");
        }
        self.runtime.spawn(async move {
            let deadline = Instant::now() + grace;
            let ended = tokio::time::timeout_at(deadline, over.wait_for(|over| *over))
                .await
                .is_ok();
            // Over before the grace, with nothing left of the group: done early.
            if ended && group_gone(pgid) {
                return;
            }
            tokio::time::sleep_until(deadline).await;
            // The program, or what it left in its group (a process ignoring SIGHUP).
            log_grace_kill(id, killpg(pgid, Signal::SIGKILL));
        });
    }

    fn exit_status(&self) -> Option<ExitStatus> {
        self.shared.exit.get().copied()
    }

    fn attach(&self) -> Option<Attachment> {
        Some(self.shared.screen.attach())
    }
}

/// The environment of the program: the app's, minus `spec.env_remove`, plus
/// `spec.env`, with `TERM` set to [`DEFAULT_TERM`] unless the spec names it.
fn environment(spec: &SpawnSpec) -> io::Result<Environment> {
    let mut given: BTreeMap<OsString, OsString> = BTreeMap::new();
    if !names_term(spec) {
        given.insert("TERM".into(), DEFAULT_TERM.into());
    }
    for (key, value) in &spec.env {
        given.insert(key.into(), value.into());
    }
    Environment::of_app(&spec.env_remove, &given)
}

/// Reads the terminal until the program ended and its output is all read, reaps
/// the program, waits for the output to be parsed, closes the terminal and sends
/// `Exited`.
async fn drive(
    id: u64,
    reader: Reader,
    mut child: Program,
    output: output::Unstarted,
    shared: Arc<Shared>,
    events: mpsc::Sender<TerminalEvent>,
) {
    let mut pipeline = Pipeline::Unstarted(Some(output));
    let mut open = true;
    let mut status = None;
    while open && status.is_none() {
        tokio::select! {
            chunk = reader.read_chunk(READ_BYTES) => open = forward(chunk, &mut pipeline).await,
            waited = child.wait() => status = Some(exit_status(id, waited)),
        }
    }
    let status = match status {
        Some(status) => status,
        None => exit_status(id, child.wait().await),
    };
    if open {
        drain(id, &reader, &mut pipeline).await;
    }
    drop(reader);
    if let Pipeline::Started(output::Output { chunks, parsed }) = pipeline {
        drop(chunks);
        // Resolves with an error when the output pipeline is done (it drops its sender).
        let _ = parsed.await;
    }
    shared.pty().take();
    let _ = shared.exit.set(status);
    shared.over.send_replace(true);
    tracing::debug!(terminal = id, ?status, "terminal ended");
    let _ = events.send(TerminalEvent::Exited(status)).await;
}

/// Once the program ended: reads what is left, until every process let go of the
/// terminal (EIO), or it stays quiet for [`DRAIN_IDLE`], or [`DRAIN_MAX`] passed.
async fn drain(id: u64, reader: &Reader, pipeline: &mut Pipeline) {
    let deadline = Instant::now() + DRAIN_MAX;
    loop {
        let until = deadline.min(Instant::now() + DRAIN_IDLE);
        match tokio::time::timeout_at(until, reader.read_chunk(READ_BYTES)).await {
            Ok(chunk) => {
                if !forward(chunk, pipeline).await {
                    return;
                }
            }
            Err(_) => {
                tracing::debug!(
                    terminal = id,
                    "the program ended but its terminal is still held open; closing it"
                );
                return;
            }
        }
    }
}

/// A terminal's output pipeline: started at the program's first output (see
/// [`output::Unstarted`]).
enum Pipeline {
    /// Nothing printed yet (`None` only while it starts).
    Unstarted(Option<output::Unstarted>),
    Started(output::Output),
}

impl Pipeline {
    /// Where chunks go, the pipeline started if it was not.
    fn chunks(&mut self) -> Option<&mpsc::Sender<Vec<u8>>> {
        if let Pipeline::Unstarted(unstarted) = self {
            *self = Pipeline::Started(unstarted.take()?.start());
        }
        match self {
            Pipeline::Started(output) => Some(&output.chunks),
            Pipeline::Unstarted(_) => None,
        }
    }
}

/// Hands a chunk read to the output pipeline; false when the terminal's output
/// ended.
async fn forward(chunk: Option<Vec<u8>>, pipeline: &mut Pipeline) -> bool {
    match chunk {
        Some(chunk) => {
            // Fails only if the output pipeline died; then output is read and dropped.
            if let Some(chunks) = pipeline.chunks() {
                let _ = chunks.send(chunk).await;
            }
            true
        }
        None => false,
    }
}

fn exit_status(id: u64, waited: io::Result<ExitStatus>) -> ExitStatus {
    match waited {
        Ok(status) => status,
        Err(error) => {
            tracing::warn!(terminal = id, %error, "cannot get the program's exit status");
            ExitStatus {
                code: None,
                signal: None,
            }
        }
    }
}

/// Writes queued input, whole and in order, until the terminal's handle is dropped.
async fn write_loop(shared: Arc<Shared>, mut requests: mpsc::UnboundedReceiver<WriteRequest>) {
    let mut over = shared.over.subscribe();
    while let Some((bytes, reply)) = requests.recv().await {
        let result = tokio::select! {
            result = write_all(&shared, &bytes) => result,
            _ = over.wait_for(|over| *over) => Err(ended()),
        };
        shared.queued_input.fetch_sub(bytes.len(), Ordering::AcqRel);
        let _ = reply.send(result);
    }
}

async fn write_all(shared: &Shared, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        // The lock is held for one non-blocking write attempt, never across a wait.
        let written = std::future::poll_fn(|cx| match shared.pty().as_mut() {
            Some(pty) => pty.poll_write(cx, bytes),
            None => Poll::Ready(Err(ended())),
        })
        .await?;
        if written == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        bytes = &bytes[written..];
    }
    Ok(())
}

/// The error of a write refused because the program has not read its input.
fn input_full(queued: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::WouldBlock,
        format!(
            "the program has not read the {queued} bytes of input already sent to it \
             (the limit is {} bytes); send again once it reads",
            crate::MAX_QUEUED_INPUT
        ),
    )
}

fn spawn_error(program: &str, error: io::Error) -> SpawnError {
    let not_a_program = matches!(
        error.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied
    ) || error.raw_os_error() == Some(Errno::ENOEXEC as i32);
    if not_a_program {
        SpawnError::Program {
            program: program.to_owned(),
            source: error,
        }
    } else {
        SpawnError::Host(format!("cannot start {program:?}: {error}"))
    }
}

// The terminal pair: opening a pseudo-terminal, and the two halves of its
// master side (the app's end), each a descriptor of its own, registered with
// the runtime's event loop for its one direction only (the writing half at its
// first write).

/// A freshly opened terminal.
struct Opened {
    /// The master side (non-blocking, close-on-exec).
    master: OwnedFd,
    /// The program side, held open until the program opened it for itself.
    program_side: OwnedFd,
    /// The program side's path (`/dev/pts/N`).
    name: CString,
}

/// Opens a new terminal of `cols` × `rows`.
fn open(cols: u16, rows: u16) -> io::Result<Opened> {
    let master =
        rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    rustix::pty::grantpt(&master)?;
    rustix::pty::unlockpt(&master)?;
    let name = rustix::pty::ptsname(&master, Vec::new())?;
    let program_side = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(std::ffi::OsStr::from_bytes(name.as_bytes()))?
        .into();
    rustix::io::ioctl_fionbio(&master, true)?;
    resize(&master, cols, rows)?;
    Ok(Opened {
        master,
        program_side,
        name,
    })
}

/// Sets the terminal's size (the program gets SIGWINCH).
fn resize(master: &OwnedFd, cols: u16, rows: u16) -> io::Result<()> {
    let size = Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    Ok(rustix::termios::tcsetwinsize(master.as_fd(), size)?)
}

/// Registers `fd` with the current runtime's event loop for `interest`.
#[allow(unsafe_code)]
fn register(fd: OwnedFd, interest: Interest) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: the `AsyncFd` owns the descriptor: it stays open, and the same
    // descriptor, until the `AsyncFd` is dropped.
    unsafe { AsyncFd::register_with_interest(fd, interest) }.map_err(Into::into)
}

/// The reading half: registered on the runtime it is made on, for readability only.
#[derive(Debug)]
struct Reader {
    fd: AsyncFd<OwnedFd>,
}

impl Reader {
    /// Registers `master` (a descriptor of its own) on the current runtime.
    fn new(master: OwnedFd) -> io::Result<Self> {
        Ok(Self {
            fd: register(master, Interest::READABLE)?,
        })
    }

    /// Waits for output, then reads all that waits, up to `max` bytes, into one
    /// chunk (a PTY gives 4 KiB per read at most: a program printing flat out
    /// reaches the parser in fewer, larger chunks). `None` once the terminal's
    /// output ended (EOF, or EIO: every process closed the terminal).
    ///
    /// Cancel-safe: it waits only before it reads.
    async fn read_chunk(&self, max: usize) -> Option<Vec<u8>> {
        loop {
            let mut ready = match self.fd.readable().await {
                Ok(ready) => ready,
                Err(error) => {
                    tracing::warn!(%error, "cannot wait for the terminal's output; its output ends here");
                    return None;
                }
            };
            let mut chunk = vec![0; max];
            let mut filled = 0;
            let ended = loop {
                if filled == max {
                    break false;
                }
                match rustix::io::read(self.fd.get_ref(), &mut chunk[filled..]) {
                    Ok(0) => break true,
                    Ok(n) => filled += n,
                    Err(rustix::io::Errno::INTR) => {}
                    Err(rustix::io::Errno::AGAIN) => {
                        // Wait for the next readiness event (one that came
                        // since `ready` was given is kept).
                        ready.clear_ready();
                        break false;
                    }
                    Err(error) => {
                        if error != rustix::io::Errno::IO {
                            tracing::warn!(%error, "cannot read the terminal; its output ends here");
                        }
                        break true;
                    }
                }
            };
            if filled > 0 {
                // An end is found again by the next read.
                chunk.truncate(filled);
                return Some(chunk);
            }
            if ended {
                return None;
            }
        }
    }
}

/// The writing half: registered for writability only, on the runtime of its
/// first write (a terminal never written to costs no registration).
#[derive(Debug)]
enum Writer {
    /// Not written to yet.
    Unregistered(OwnedFd),
    Registered(AsyncFd<OwnedFd>),
    /// Only while a registration fails (the descriptor is then closed).
    Lost,
}

impl Writer {
    /// The writing half on `master` (a descriptor of its own).
    fn new(master: OwnedFd) -> Self {
        Self::Unregistered(master)
    }

    /// Writes some of `bytes` once the terminal takes input. Must be called
    /// within a tokio runtime.
    fn poll_write(&mut self, cx: &mut Context<'_>, bytes: &[u8]) -> Poll<io::Result<usize>> {
        if matches!(self, Self::Unregistered(_))
            && let Self::Unregistered(master) = std::mem::replace(self, Self::Lost)
        {
            *self = Self::Registered(register(master, Interest::WRITABLE)?);
        }
        let Self::Registered(fd) = self else {
            return Poll::Ready(Err(io::Error::other(
                "the terminal's input could not be registered",
            )));
        };
        loop {
            let mut guard = ready!(fd.poll_write_ready(cx))?;
            match guard.try_io(|fd| Ok(rustix::io::write(fd.get_ref(), bytes)?)) {
                Ok(written) => return Poll::Ready(written),
                // Not writable after all: readiness cleared, wait again.
                Err(_would_block) => {}
            }
        }
    }

    /// Sets the terminal's size.
    fn resize(&self, cols: u16, rows: u16) -> io::Result<()> {
        match self {
            Self::Unregistered(master) => resize(master, cols, rows),
            Self::Registered(fd) => resize(fd.get_ref(), cols, rows),
            Self::Lost => Err(io::Error::other(
                "the terminal's input could not be registered",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    /// What the program side printed, then the end once it is closed.
    #[tokio::test]
    async fn a_chunk_holds_what_was_printed_and_the_end_follows_it() {
        let opened = open(80, 24).unwrap();
        let reader = Reader::new(opened.master.try_clone().unwrap()).unwrap();
        let mut program_side = std::fs::File::from(opened.program_side);
        program_side.write_all(b"hello").unwrap();
        drop(program_side);
        let mut read = Vec::new();
        while let Some(chunk) = reader.read_chunk(32 * 1024).await {
            assert!(!chunk.is_empty() && chunk.len() <= 32 * 1024);
            read.extend_from_slice(&chunk);
        }
        assert_eq!(read, b"hello");
        // The end stays the end.
        assert_eq!(reader.read_chunk(32 * 1024).await, None);
    }

    /// Input written to the master side reaches the program side; the size set
    /// is the terminal's.
    #[tokio::test]
    async fn input_reaches_the_program_side_and_resizes_hold() {
        let opened = open(80, 24).unwrap();
        let mut writer = Writer::new(opened.master);
        // Before the first write (not registered yet) and after it.
        writer.resize(90, 20).unwrap();
        let size = rustix::termios::tcgetwinsize(&opened.program_side).unwrap();
        assert_eq!((size.ws_col, size.ws_row), (90, 20));
        // A whole line: the program side reads lines (canonical mode).
        let written = std::future::poll_fn(|cx| writer.poll_write(cx, b"x\n")).await;
        assert_eq!(written.unwrap(), 2);
        assert!(matches!(writer, Writer::Registered(_)));
        writer.resize(100, 30).unwrap();
        let size = rustix::termios::tcgetwinsize(&opened.program_side).unwrap();
        assert_eq!((size.ws_col, size.ws_row), (100, 30));
        let mut line = [0u8; 8];
        let n = rustix::io::read(&opened.program_side, &mut line).unwrap();
        assert_eq!(&line[..n], b"x\n");
    }
}
