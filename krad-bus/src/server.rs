//! The loopback server: accepts connections on 127.0.0.1, caps how many are open,
//! reads one request line from each, answers it and closes.
//!
//! The app behind the bus is an [`App`]; the bus answers `Hello` itself, so a busy
//! app never delays a handshake.
//!
//! It also holds what became of a request (`Reply`: the answer a connection
//! writes, or the stream or attachment it serves) and the [`Counters`] behind
//! `Stats`.

mod attach;
mod bus_requests;
mod connection;
mod dispatch;
pub mod request_log;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::protocol::{
    ApiError, EncodedAnswer, ErrorCode, MAX_LINE, RequestId, Response, StreamLine, TerminalRef,
    TypedAnswer,
};
use crate::request::stats::StatsInfo;
use crate::request::{Call, attach as attach_request, for_each_request, subscribe_agents};
use crate::token::{Principal, Secret};
use connection::LineRead;
use dispatch::Prepared;

pub use attach::Attachment;
pub use dispatch::StartSettled;

/// The app behind the bus: everything but the requests the bus answers itself
/// (Hello, Stats, Shutdown).
///
/// Each request the app answers is one [`Handle`] impl (see [`Handlers`]), and
/// each of the two streaming requests one [`Open`] impl. The bus has already checked the
/// envelope, the token, the version, the fields and the caller's rights of
/// section 4 (what a plain terminal may do inside its environment, and whom
/// Report is about, are the app's to check).
pub trait App:
    Handlers
    + Open<subscribe_agents::SubscribeAgents, Stream: Subscription>
    + Open<attach_request::Attach, Stream: Attachment>
    + 'static
{
    /// Whether a terminal that authenticated with its token is one the app
    /// hosts; a closed terminal's token stops working.
    fn knows_terminal(&self, terminal: &TerminalRef) -> bool;

    /// For a terminal the app does not know yet because it is still starting
    /// it (its program may call the bus in its first instant): what resolves
    /// once it is recorded, or its start failed. A request with its token
    /// waits for that, then is checked again, instead of being refused
    /// `unauthorized`. `None`: not being started.
    fn terminal_starting(&self, terminal: &TerminalRef) -> Option<StartSettled> {
        let _ = terminal;
        None
    }

    /// Whether `terminal` is one the app took over from its last run and has
    /// not given this run's token yet (an SSH host's terminal: its token file
    /// there is written again once the link is up). A call naming it with
    /// another token is refused `unauthorized` but retryable, so that its
    /// `krad` reads the token file again and retries; any other wrong token
    /// is refused for good.
    fn token_being_renewed(&self, terminal: &TerminalRef) -> bool {
        let _ = terminal;
        false
    }

    /// Where the answers of at-most-once requests are kept (section 8); `None`
    /// serves every request id as if it were new.
    fn request_log(&self) -> Option<&request_log::RequestLog>;

    /// How many agents the app knows, for Stats.
    fn agent_count(&self) -> impl Future<Output = u64> + Send;
}

/// The stream a SubscribeAgents request of app `A` reads from.
pub type SubscriptionOf<A> = <A as Open<subscribe_agents::SubscribeAgents>>::Stream;

/// What an Attach request's connection to app `A` serves.
pub type AttachmentOf<A> = <A as Open<attach_request::Attach>>::Stream;

/// How the app opens a request whose answer is a stream (SubscribeAgents,
/// Attach): what the connection then serves, or the error to answer instead.
/// The streaming counterpart of [`Handle`].
pub trait Open<R: Call> {
    /// What the connection serves once the request is accepted.
    type Stream;

    /// Opens `request` for the caller in `ctx`.
    fn open(
        &self,
        ctx: &CallContext,
        request: R,
    ) -> impl Future<Output = Result<Self::Stream, ApiError>> + Send;
}

/// How the app answers one request: its typed answer, or the error.
pub trait Handle<R: Call> {
    /// The handler answers by itself before the request's deadline (Wait:
    /// `"TimedOut"` at its own timeout, a second before the deadline), so the
    /// bus keeps no timer of its own for it: a held Wait then carries one
    /// timer, not two. Only for handlers that can never outlive the deadline;
    /// the client leaving still cancels the request.
    const ANSWERS_BEFORE_DEADLINE: bool = false;

    /// Answers `request` for the caller in `ctx`.
    fn handle(
        &self,
        ctx: &CallContext,
        request: R,
    ) -> impl Future<Output = Result<R::Answer, ApiError>> + Send;
}

/// How the app answers a request whose answer it keeps serialized (List and
/// Check, from each agent's JSON cached since its last change): the answer
/// line, byte for byte the one the typed `R::Answer` would serialize to, so that
/// a client decodes it as that.
pub trait HandleEncoded<R: Call> {
    /// Answers `request` for the caller in `ctx`.
    fn handle_encoded(
        &self,
        ctx: &CallContext,
        request: R,
    ) -> impl Future<Output = Result<EncodedAnswer, ApiError>> + Send;
}

/// Declares [`Handlers`] from the request list: a [`Handle`] for every request
/// served `by app`, a [`HandleEncoded`] for every one served `by encoded`.
macro_rules! declare_handlers {
    ($($kind:ident($module:ident) by $served:ident,)*) => {
        declare_handlers!(@pick [] $($kind($module) by $served,)*);
    };
    (@pick [$($bound:tt)*] $kind:ident($module:ident) by app, $($rest:tt)*) => {
        declare_handlers!(@pick [$($bound)* + Handle<crate::request::$module::$kind>] $($rest)*);
    };
    (@pick [$($bound:tt)*] $kind:ident($module:ident) by encoded, $($rest:tt)*) => {
        declare_handlers!(@pick [$($bound)* + HandleEncoded<crate::request::$module::$kind>] $($rest)*);
    };
    (@pick [$($bound:tt)*] $kind:ident($module:ident) by $other:ident, $($rest:tt)*) => {
        declare_handlers!(@pick [$($bound)*] $($rest)*);
    };
    (@pick [$($bound:tt)*]) => {
        /// A [`Handle`] (or [`HandleEncoded`]) for every request the app answers
        /// (those of the request list served `by app` or `by encoded`);
        /// implemented for every type that has them all.
        pub trait Handlers: Send + Sync $($bound)* {}

        impl<T: Send + Sync $($bound)*> Handlers for T {}
    };
}

for_each_request!(declare_handlers);

/// A stream of messages for one subscriber, pulled by the bus as fast as the
/// subscriber reads: a slow reader simply pulls less often.
pub trait Subscription: Send + 'static {
    /// The next message (agents as their cached JSON); `None` ends the stream.
    /// Cancel-safe: dropping the future before it is ready loses nothing.
    fn next(&mut self) -> impl Future<Output = Option<StreamLine>> + Send;
}

/// Who is calling and how, handed to every request's handler.
#[derive(Debug, Clone)]
pub struct CallContext {
    /// The authenticated caller.
    pub principal: Principal,
    /// The at-most-once id, if the envelope had one.
    pub request_id: Option<RequestId>,
    /// For a mutation run under a request id (first time): the id as the
    /// request log keeps it, for the intents the handler records.
    pub once: Option<request_log::OnceKey>,
}

/// Limits of the server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Connections open at once; the next is answered `busy` (default 1,024).
    pub max_connections: usize,
    /// Time for the request line to arrive after the accept (default 10 s).
    pub line_timeout: Duration,
    /// How long input is discarded after the answer before closing (default 500 ms).
    pub linger: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_connections: 1024,
            line_timeout: Duration::from_secs(10),
            linger: Duration::from_millis(500),
        }
    }
}

/// Refused connections answered `busy` at once; past this many in flight, the
/// newest are closed without an answer rather than queued.
const MAX_BUSY_RESPONDERS: usize = 256;

/// The bus's shared state: its secret, limits, counters and shutdown signal.
pub struct Bus {
    secret: Arc<Secret>,
    config: ServerConfig,
    counters: Counters,
    started: Instant,
    connections: Arc<Semaphore>,
    busy_responders: Arc<Semaphore>,
    shutdown: CancellationToken,
    close_terminals: AtomicBool,
    /// Hello's answer, serialized once.
    hello: EncodedAnswer,
}

impl Bus {
    /// A bus that authenticates callers with `secret` (the app holds it too, to
    /// give terminals their tokens).
    pub fn new(secret: Arc<Secret>, config: ServerConfig) -> Bus {
        Bus {
            secret,
            connections: Arc::new(Semaphore::new(config.max_connections)),
            busy_responders: Arc::new(Semaphore::new(MAX_BUSY_RESPONDERS)),
            config,
            counters: Counters::default(),
            started: Instant::now(),
            shutdown: CancellationToken::new(),
            close_terminals: AtomicBool::new(true),
            hello: bus_requests::hello_line(),
        }
    }

    /// The app's secret, to give terminals their tokens.
    pub fn secret(&self) -> &Secret {
        &self.secret
    }

    /// The bus's counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Asks the server to stop: no new connections, then [`serve`] returns.
    pub fn request_shutdown(&self, close_terminals: bool) {
        self.close_terminals
            .store(close_terminals, Ordering::Relaxed);
        self.shutdown.cancel();
    }

    /// Resolves once a shutdown was requested.
    pub async fn shutdown_requested(&self) {
        self.shutdown.cancelled().await;
    }

    /// Whether the shutdown asked for the terminals to be closed.
    pub fn closes_terminals_on_shutdown(&self) -> bool {
        self.close_terminals.load(Ordering::Relaxed)
    }

    fn stats(&self, agents: u64) -> StatsInfo {
        StatsInfo {
            connections_open: (self.config.max_connections - self.connections.available_permits())
                as u64,
            requests_total: self.counters.requests_total(),
            errors_by_code: self.counters.errors_by_code(),
            waits_pending: self.counters.waits_pending(),
            subscribers: self.counters.subscribers(),
            agents,
            uptime_secs: self.started.elapsed().as_secs(),
        }
    }
}

// The counters behind the `Stats` request, kept with atomics so that counting
// never waits on anything.

/// What the bus counts while it serves.
#[derive(Debug, Default)]
pub struct Counters {
    requests_total: AtomicU64,
    errors: [AtomicU64; ErrorCode::ALL.len()],
    waits_pending: AtomicU64,
    subscribers: AtomicU64,
}

impl Counters {
    /// Counts one answered request, and its error code if it failed.
    pub fn answered(&self, error: Option<ErrorCode>) {
        self.requests_total.fetch_add(1, Ordering::Relaxed);
        if let Some(counter) = error.and_then(|code| self.errors.get(code.index())) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Requests answered so far.
    pub fn requests_total(&self) -> u64 {
        self.requests_total.load(Ordering::Relaxed)
    }

    /// Error answers by code; codes never seen are left out.
    pub fn errors_by_code(&self) -> std::collections::BTreeMap<String, u64> {
        ErrorCode::ALL
            .iter()
            .filter_map(|code| {
                let n = self.errors.get(code.index())?.load(Ordering::Relaxed);
                (n > 0).then(|| (code.as_str().to_owned(), n))
            })
            .collect()
    }

    /// Requests waiting right now.
    pub fn waits_pending(&self) -> u64 {
        self.waits_pending.load(Ordering::Relaxed)
    }

    /// Streams open right now.
    pub fn subscribers(&self) -> u64 {
        self.subscribers.load(Ordering::Relaxed)
    }

    /// Marks a waiting request for as long as the guard lives.
    pub fn wait_guard(&self) -> GaugeGuard<'_> {
        GaugeGuard::new(&self.waits_pending)
    }

    /// Marks an open stream for as long as the guard lives.
    pub fn subscriber_guard(&self) -> GaugeGuard<'_> {
        GaugeGuard::new(&self.subscribers)
    }
}

/// Adds one to a gauge while it lives.
#[derive(Debug)]
pub struct GaugeGuard<'a>(&'a AtomicU64);

impl<'a> GaugeGuard<'a> {
    fn new(gauge: &'a AtomicU64) -> Self {
        gauge.fetch_add(1, Ordering::Relaxed);
        GaugeGuard(gauge)
    }
}

impl Drop for GaugeGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Binds the bus's listener: always 127.0.0.1, on `port` (0: the system picks).
pub async fn bind(port: u16) -> std::io::Result<TcpListener> {
    TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port))).await
}

/// Serves until [`Bus::request_shutdown`], then waits (at most a few seconds) for
/// the connections still open to finish.
pub async fn serve<A: App>(listener: TcpListener, bus: Arc<Bus>, app: Arc<A>) {
    let tracker = TaskTracker::new();
    let mut backoff = Duration::from_millis(5);
    // A descriptor held in reserve: out of descriptors, the app gives it up to
    // accept a waiting connection and answer it `busy`, rather than leave it
    // hanging in the backlog until descriptors free up.
    let mut reserve = spare_descriptor();
    loop {
        if reserve.is_none() {
            reserve = spare_descriptor();
        }
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = bus.shutdown.cancelled() => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => {
                backoff = Duration::from_millis(5);
                stream
            }
            Err(e) => {
                if out_of_descriptors(&e) && reserve.take().is_some() {
                    let retried =
                        tokio::time::timeout(Duration::from_millis(10), listener.accept()).await;
                    if let Ok(Ok((stream, _))) = retried {
                        refuse_out_of_descriptors(stream, &bus);
                        backoff = Duration::from_millis(5);
                        continue;
                    }
                }
                // Out of descriptors and the like: the listener is fine, wait and retry.
                tracing::warn!("accept failed, retrying in {backoff:?}: {e}");
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    () = bus.shutdown.cancelled() => break,
                }
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        // No TCP_NODELAY here: an answer is one write followed by a close, which
        // pushes it out at once; streams turn it on (`connection::stream`).
        match bus.connections.clone().try_acquire_owned() {
            Ok(permit) => {
                tracker.spawn(connection_task(stream, bus.clone(), app.clone(), permit));
            }
            Err(_) => refuse_busy(stream, &bus, &tracker),
        }
    }
    drop(listener);
    tracker.close();
    if tokio::time::timeout(Duration::from_secs(3), tracker.wait())
        .await
        .is_err()
    {
        tracing::info!(
            "{} connections still open at shutdown; closing them",
            tracker.len()
        );
    }
}

/// A descriptor to keep in reserve (see [`serve`]).
fn spare_descriptor() -> Option<std::fs::File> {
    std::fs::File::open("/dev/null").ok()
}

fn out_of_descriptors(error: &std::io::Error) -> bool {
    use nix::errno::Errno;
    matches!(error.raw_os_error(), Some(n) if n == Errno::EMFILE as i32 || n == Errno::ENFILE as i32)
}

/// Answers `busy` at once, without a task or a linger: the connection holds the
/// reserve descriptor, which must be free again for the next one. What the client
/// already sent is read first, so that closing sends a FIN rather than a reset.
fn refuse_out_of_descriptors(stream: TcpStream, bus: &Bus) {
    bus.counters.answered(Some(ErrorCode::Busy));
    tracing::warn!("out of file descriptors: answering a connection busy");
    let line = Response::from(ApiError::new(
        ErrorCode::Busy,
        "the app is out of file descriptors; try again shortly",
    ))
    .to_line();
    let _ = stream.try_write(&line);
    let mut sink = [0u8; 4096];
    for _ in 0..16 {
        match stream.try_read(&mut sink) {
            Ok(n) if n > 0 => {}
            _ => break,
        }
    }
    if let Ok(stream) = stream.into_std() {
        let _ = stream.shutdown(std::net::Shutdown::Write);
    }
}

fn refuse_busy(stream: TcpStream, bus: &Arc<Bus>, tracker: &TaskTracker) {
    bus.counters.answered(Some(ErrorCode::Busy));
    let Ok(permit) = bus.busy_responders.clone().try_acquire_owned() else {
        return; // dropping the stream closes it
    };
    let line = Response::from(ApiError::new(
        ErrorCode::Busy,
        format!(
            "the app has {} connections open, its limit; try again shortly",
            bus.config.max_connections
        ),
    ))
    .to_line();
    let linger = bus.config.linger.min(Duration::from_millis(200));
    tracker.spawn(async move {
        connection::finish(stream, &line, linger).await;
        drop(permit);
    });
}

// What became of a request: the answer the connection writes (typed, spliced
// or replayed), the stream or attachment it serves, or nothing when the client
// left. Made by the dispatch and by the requests the bus answers itself.

/// What became of a request.
///
/// Its larger payloads are boxed, so a `Reply` is a few words: every future
/// that will hold one (a connection's task while its request is held, a
/// request's boxed work) reserves room for it from the start, for as long as
/// the request runs — a Wait, up to 30 minutes.
pub(crate) enum Reply<S, T> {
    /// Write this answer.
    Answer(Box<Response>),
    /// Write this answer line, spliced by the app from cached JSON.
    Encoded(EncodedAnswer),
    /// Write this answer, as recorded earlier (a replay).
    Recorded(serde_json::Value),
    /// Serve this stream.
    Stream(Box<S>),
    /// Serve this attachment (lines both ways).
    Attach(Box<T>),
    /// The client left while its request waited; nothing is written.
    Left,
}

impl<S, T> Reply<S, T> {
    /// Write this answer (an error, `"TimedOut"` …).
    pub(crate) fn answer(response: impl Into<Response>) -> Self {
        Reply::Answer(Box::new(response.into()))
    }

    /// A handler's typed result, as the response on the wire.
    pub(crate) fn answered<R: TypedAnswer>(result: Result<R, ApiError>) -> Self {
        match result {
            Ok(answer) => Reply::answer(answer.into_response()),
            Err(e) => Reply::answer(e),
        }
    }
}

/// One connection, in three steps: reading its line and the order of checks
/// ([`read_request`]) and writing the answer ([`respond`]) are boxed, each
/// allocated only while it runs. What stays in the task itself is what a
/// request needs while it runs — its boxed work (the timer of its deadline
/// inside) and the watch on its client — since a task is sized for its
/// largest state and a held request (a Wait, for up to 30 minutes) keeps the
/// whole of it.
async fn connection_task<A: App>(
    mut stream: TcpStream,
    bus: Arc<Bus>,
    app: Arc<A>,
    _permit: OwnedSemaphorePermit,
) {
    let (reply, whole_line) = match Box::pin(read_request(&mut stream, &bus, &app)).await {
        Step::Gone => return,
        Step::Answer(reply, whole_line) => (reply, whole_line),
        Step::Run(running, whole_line) => {
            let dispatch::Running {
                work,
                cancels_on_leave,
                _waiting,
            } = running;
            let watch = cancels_on_leave.then_some(&mut stream);
            let reply = dispatch::run(work, watch).await;
            drop(_waiting);
            (reply, whole_line)
        }
    };
    Box::pin(respond(&bus, stream, reply, whole_line)).await;
}

/// What [`read_request`] made of a connection.
enum Step<'b, S, T> {
    /// The client closed without sending anything; nothing to answer.
    Gone,
    /// Answer this (`whole_line`: after a complete request line).
    Answer(Reply<S, T>, bool),
    /// Run this request, then answer what it gives.
    Run(dispatch::Running<'b, S, T>, bool),
}

/// Reads the request line within its limits and takes it through the order of
/// checks. The line is gone once the request is prepared.
async fn read_request<'b, A: App>(
    stream: &mut TcpStream,
    bus: &'b Arc<Bus>,
    app: &Arc<A>,
) -> Step<'b, SubscriptionOf<A>, AttachmentOf<A>> {
    let read = tokio::time::timeout(bus.config.line_timeout, connection::read_line(stream)).await;
    // After a whole line, a client that sent nothing more need not be lingered on.
    let whole_line = matches!(read, Ok(Ok(LineRead::Line(_))));
    let reply = match read {
        Ok(Ok(LineRead::Line(line))) => {
            let mut prepared = dispatch::prepare(bus, app, &line, false);
            if let Prepared::Starting(starting) = prepared {
                // A terminal being started: checked again once it is recorded.
                starting.await;
                prepared = dispatch::prepare(bus, app, &line, true);
            }
            match prepared {
                Prepared::Reply(reply) => reply,
                Prepared::Run(running) => return Step::Run(running, whole_line),
                // Not after the wait: `prepare` then refuses instead.
                Prepared::Starting(_) => Reply::answer(dispatch::unauthorized()),
            }
        }
        Ok(Ok(LineRead::TooLong)) => Reply::answer(ApiError::bad_request(format!(
            "the request line is longer than {MAX_LINE} bytes (the limit, its \\n included)"
        ))),
        Ok(Ok(LineRead::Closed { partial: true })) => Reply::answer(ApiError::bad_request(
            "the connection was closed before the request line ended (end it with \\n)",
        )),
        Ok(Ok(LineRead::Closed { partial: false })) | Ok(Err(_)) => return Step::Gone,
        Err(_) => Reply::answer(ApiError::bad_request(format!(
            "no complete request line within {} s of connecting",
            bus.config.line_timeout.as_secs_f64()
        ))),
    };
    Step::Answer(reply, whole_line)
}

/// Writes a request's answer, or serves its stream or attachment.
async fn respond<S: Subscription, T: Attachment>(
    bus: &Bus,
    stream: TcpStream,
    reply: Reply<S, T>,
    whole_line: bool,
) {
    match reply {
        Reply::Answer(response) => {
            let (code, line) = (response.error_code(), response.to_line());
            drop(response);
            answer_with(bus, stream, code, &line, whole_line).await;
        }
        Reply::Recorded(answer) => {
            let code = ErrorCode::of_answer(&answer);
            let mut line = serde_json::to_vec(&answer).unwrap_or_default();
            line.push(b'\n');
            answer_with(bus, stream, code, &line, whole_line).await;
        }
        Reply::Encoded(answer) => {
            answer_with(bus, stream, None, answer.as_bytes(), whole_line).await;
        }
        Reply::Stream(subscription) => {
            bus.counters.answered(None);
            let _subscriber = bus.counters.subscriber_guard();
            Box::pin(connection::stream(stream, *subscription, &bus.shutdown)).await;
        }
        Reply::Attach(attachment) => {
            bus.counters.answered(None);
            // Boxed, like the stream: most connections never attach.
            Box::pin(attach::serve(stream, *attachment, &bus.shutdown)).await;
        }
        Reply::Left => tracing::debug!("client left; its request was cancelled"),
    }
}

/// Counts an answer (its error code, if any) and writes `line`, boxed: the task
/// of every connection is sized for its largest state, and a held request (a
/// Wait) should not carry room for writing (and lingering) while it waits.
async fn answer_with(
    bus: &Bus,
    stream: TcpStream,
    code: Option<ErrorCode>,
    line: &[u8],
    whole_line: bool,
) {
    bus.counters.answered(code);
    Box::pin(connection::answer(
        stream,
        line,
        bus.config.linger,
        whole_line,
    ))
    .await;
}
