//! A terminal's output pipeline, whatever its host: a task takes the bytes the
//! program printed, feeds them to the terminal's [`Screen`], appends them to its
//! transcript and sends the coalesced events.
//!
//! Parsing is CPU work that can take seconds for a program printing flat out, so it
//! never runs on the app's runtime: every terminal's pipeline is a task on one
//! small runtime of this crate's (see [`parsers`]), whose few threads are shared
//! by all terminals — an idle terminal costs no thread. The host's reader only
//! moves chunks of bytes into a small bounded channel (its `send().await` is the
//! back-pressure that, through the terminal's buffer, slows the program down to
//! parsing speed); the pipeline parses at most [`BATCH_BYTES`] before it steps
//! aside for other terminals' pipelines. The screen's lock is held for one feed
//! (the chunks that were waiting, up to about [`FEED_BYTES`]) at a time, and the pipeline lets callers waiting for it in between chunks, so
//! a snapshot is never stuck behind a long parse.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use tokio::runtime::Runtime;
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::screen::{Screen, Signals};
use crate::transcript::Transcript;
use crate::{Attachment, TerminalEvent};

/// Chunks of output waiting for the parser, at most.
pub(crate) const CHUNKS_IN_FLIGHT: usize = 8;

/// Bytes parsed before events are sent, the transcript may be flushed and other
/// terminals' pipelines get their turn, at most.
const BATCH_BYTES: usize = 256 * 1024;

/// Bytes of chunks that were waiting fed to the screen at once, at least (the
/// screen's lock is held that long: a few milliseconds at most).
const FEED_BYTES: usize = 64 * 1024;

/// Chunks of output kept for an attacher that has not read them yet; one further
/// behind is told it lagged (see [`Attachment::output`]).
pub const ATTACH_BACKLOG: usize = 256;

/// A screen shared between the thread that parses output into it and the callers
/// that read it (snapshots) or resize it.
///
/// The screen itself is made on first use — the program's first output, or
/// a caller that reads or resizes it first: making one allocates and touches
/// its two grids (0.15–0.3 ms of CPU for 120 × 40), which a Spawn's answer
/// need not wait for and a terminal that never prints never needs
/// (docs/PERFORMANCE.md, seventh pass).
#[derive(Debug)]
pub(crate) struct SharedScreen {
    screen: OnceLock<Mutex<Screen>>,
    /// What the screen is made with: columns, rows, scrollback lines.
    made_with: (u16, u16, usize),
    /// Callers waiting for the lock; the parser lets them in between chunks.
    waiting: AtomicUsize,
    /// The screen's bracketed-paste mode, readable without the lock.
    bracketed_paste: AtomicBool,
    /// Attachers: each chunk parsed, sent under the screen's lock so that an
    /// attacher's redraw and its first chunk meet exactly. Made (under that
    /// lock) for the first attacher: most terminals are never attached to,
    /// and its ring of [`ATTACH_BACKLOG`] slots is allocated up front.
    tap: OnceLock<broadcast::Sender<Arc<[u8]>>>,
}

impl SharedScreen {
    /// A screen of `cols` × `rows` keeping `scrollback_lines`, made on first use.
    pub(crate) fn new(cols: u16, rows: u16, scrollback_lines: usize) -> Self {
        Self {
            screen: OnceLock::new(),
            made_with: (cols, rows, scrollback_lines),
            waiting: AtomicUsize::new(0),
            // A new screen's mode: off.
            bracketed_paste: AtomicBool::new(false),
            tap: OnceLock::new(),
        }
    }

    /// The screen, made now if no one did yet.
    fn make(&self) -> &Mutex<Screen> {
        self.screen.get_or_init(|| {
            let (cols, rows, scrollback_lines) = self.made_with;
            Mutex::new(Screen::new(cols, rows, scrollback_lines))
        })
    }

    /// The screen now and the output from here on, for an attacher.
    pub(crate) fn attach(&self) -> Attachment {
        self.with(|screen| Attachment {
            screen: screen.redraw(),
            size: screen.size(),
            output: self
                .tap
                .get_or_init(|| broadcast::channel(ATTACH_BACKLOG).0)
                .subscribe(),
        })
    }

    /// Runs `f` on the screen, ahead of the parser's next chunk (the plain
    /// lines that wait parsed first: see [`Screen::process_deferred`]).
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut Screen) -> R) -> R {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let mut screen = self.lock();
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        screen.flush();
        f(&mut screen)
    }

    /// Whether the program turned bracketed paste on (as of the last chunk parsed).
    pub(crate) fn bracketed_paste(&self) -> bool {
        self.bracketed_paste.load(Ordering::Relaxed)
    }

    /// Parses one chunk (for the pipeline), then lets waiting callers in.
    fn feed(&self, bytes: &[u8]) -> Signals {
        let signals = {
            let mut screen = self.lock();
            let signals = screen.process_deferred(bytes);
            self.bracketed_paste
                .store(screen.bracketed_paste(), Ordering::Relaxed);
            // Never waits: an attacher that lags loses its oldest chunks.
            if let Some(tap) = self.tap.get().filter(|tap| tap.receiver_count() > 0) {
                let _ = tap.send(Arc::from(bytes));
            }
            signals
        };
        self.let_waiting_in();
        signals
    }

    fn lock(&self) -> MutexGuard<'_, Screen> {
        // A panic while parsing leaves a screen that is still worth showing.
        self.make().lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Gives callers that wait for the lock a chance to take it before the parser
    /// takes it again (a mutex is not fair: the parser would win most races).
    fn let_waiting_in(&self) {
        for round in 0..200 {
            if self.waiting.load(Ordering::SeqCst) == 0 {
                return;
            }
            if round < 20 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }
}

/// The running output pipeline of a terminal.
#[derive(Debug)]
pub(crate) struct Output {
    /// Where the host sends the chunks the program printed. Drop it once the
    /// program's output ended.
    pub(crate) chunks: mpsc::Sender<Vec<u8>>,
    /// Resolves (with an error: the sender is dropped) once every chunk sent was
    /// parsed, its events sent and the transcript flushed.
    pub(crate) parsed: oneshot::Receiver<()>,
}

/// Threads that parse every terminal's output, at most.
const PARSE_THREADS: usize = 2;

/// The runtime every terminal's pipeline runs on, started at the first terminal:
/// as many threads as cores, up to [`PARSE_THREADS`], whatever the number of
/// terminals.
fn parsers() -> std::io::Result<&'static Runtime> {
    static PARSERS: OnceLock<std::io::Result<Runtime>> = OnceLock::new();
    PARSERS
        .get_or_init(|| {
            // Asked once: it reads the cgroup's files each time.
            let threads = std::thread::available_parallelism()
                .map_or(1, usize::from)
                .min(PARSE_THREADS);
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(threads)
                .max_blocking_threads(1)
                .thread_name("krad-parse")
                .build()
        })
        .as_ref()
        .map_err(|error| std::io::Error::new(error.kind(), error.to_string()))
}

/// Starts the output pipeline of terminal `id` (callable from any thread, within
/// a tokio runtime or not).
pub(crate) fn start(
    id: u64,
    screen: Arc<SharedScreen>,
    transcript: Option<PathBuf>,
    events: mpsc::Sender<TerminalEvent>,
) -> std::io::Result<Output> {
    Ok(later(id, screen, transcript, events)?.start())
}

/// The output pipeline of terminal `id`, to start at its first output (see
/// [`Unstarted`]). Fails as [`start`] would (the parsers' threads cannot be
/// made); once this succeeded, starting cannot fail.
pub(crate) fn later(
    id: u64,
    screen: Arc<SharedScreen>,
    transcript: Option<PathBuf>,
    events: mpsc::Sender<TerminalEvent>,
) -> std::io::Result<Unstarted> {
    Ok(Unstarted {
        parsers: parsers()?,
        id,
        screen,
        transcript,
        events,
    })
}

/// An output pipeline not started yet. A PTY terminal starts its own when the
/// program first prints: starting one wakes a parser thread, which a Spawn's
/// answer need not wait for (on two cores it competes with the new program
/// for the CPU), and a terminal that never prints never needs.
#[derive(Debug)]
pub(crate) struct Unstarted {
    parsers: &'static Runtime,
    id: u64,
    screen: Arc<SharedScreen>,
    transcript: Option<PathBuf>,
    events: mpsc::Sender<TerminalEvent>,
}

impl Unstarted {
    /// Starts the pipeline.
    pub(crate) fn start(self) -> Output {
        let Unstarted {
            parsers,
            id,
            screen,
            transcript,
            events,
        } = self;
        let (chunks, receiver) = mpsc::channel(CHUNKS_IN_FLIGHT);
        let (done, parsed) = oneshot::channel();
        parsers.spawn(async move {
            run(id, &screen, transcript, receiver, &events).await;
            drop(done);
        });
        Output { chunks, parsed }
    }
}

async fn run(
    id: u64,
    screen: &SharedScreen,
    transcript: Option<PathBuf>,
    mut chunks: mpsc::Receiver<Vec<u8>>,
    events: &mpsc::Sender<TerminalEvent>,
) {
    // Opened at the first output, as the screen is made at the first (see
    // [`SharedScreen`]): a terminal that never prints costs neither.
    let mut unopened = transcript;
    let mut transcript = None;
    while let Some(first) = chunks.recv().await {
        if let Some(path) = unopened.take() {
            transcript = Some(Transcript::open(&path, id));
        }
        let mut signals = Signals::default();
        let mut batch = 0;
        let mut next = Some(first);
        while let Some(mut bytes) = next {
            // Chunks already waiting are parsed together: fewer, longer runs
            // of plain lines pass by the parser (see the screen's plain lines).
            while bytes.len() < FEED_BYTES {
                let Ok(more) = chunks.try_recv() else {
                    break;
                };
                bytes.extend_from_slice(&more);
            }
            if let Some(transcript) = &mut transcript {
                transcript.write(&bytes);
            }
            signals.merge(screen.feed(&bytes));
            batch += bytes.len();
            next = if batch < BATCH_BYTES {
                chunks.try_recv().ok()
            } else {
                None
            };
        }
        if chunks.is_empty()
            && let Some(transcript) = &mut transcript
        {
            transcript.flush();
        }
        send_events(signals, events).await;
        if batch >= BATCH_BYTES {
            // Other terminals' pipelines first.
            tokio::task::yield_now().await;
        }
    }
    if let Some(transcript) = &mut transcript {
        transcript.flush();
    }
}

/// Sends the events of a batch parsed (the screen is up to date).
async fn send_events(signals: Signals, events: &mpsc::Sender<TerminalEvent>) {
    // An event dropped because the app is behind is covered by the snapshot it
    // takes for an earlier one still queued (output, bells and titles are
    // coalesced so). A notification or an announced state says something no
    // snapshot keeps: it waits for room (holding no lock).
    let _ = events.try_send(TerminalEvent::Output);
    for event in signals.into_events() {
        let kept = matches!(
            event,
            TerminalEvent::Notification { .. } | TerminalEvent::AgentState(_)
        );
        if kept {
            if events.send(event).await.is_err() {
                return;
            }
        } else {
            let _ = events.try_send(event);
        }
    }
}
