//! The order of checks (line, token, version, caller and request) and the
//! exhaustive dispatch that runs each request under its deadline.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::net::TcpStream;

use super::bus_requests::ServedByBus;
use serde_json::Value;
use tokio::sync::watch;

use super::request_log::{Begin, Ticket};
use super::{
    App, AttachmentOf, Bus, CallContext, GaugeGuard, Handle, HandleEncoded, Open, Reply,
    SubscriptionOf, connection,
};
use crate::protocol::{
    ApiError, Caller, Envelope, ErrorCode, Response, TerminalRef, unsupported_version_message,
};
use crate::request::attach::Attach;
use crate::request::subscribe_agents::SubscribeAgents;
use crate::request::{Call, Request, Rights, for_each_request};
use crate::token::Principal;

/// A request's work, boxed on its own.
pub(crate) type Work<S, T> = Pin<Box<dyn Future<Output = Reply<S, T>> + Send>>;

/// What resolves once a terminal being started is recorded (or failed to start).
pub type StartSettled = Pin<Box<dyn Future<Output = ()> + Send>>;

/// What the order of checks made of a request line.
pub(crate) enum Prepared<'b, S, T> {
    /// Answer at once (an error, a replay).
    Reply(Reply<S, T>),
    /// Run this under its deadline ([`run`]).
    Run(Running<'b, S, T>),
    /// The caller is a terminal being started: wait for this, then prepare
    /// the line again (see [`App::terminal_starting`]).
    Starting(StartSettled),
}

/// A request to run: its work and what surrounds it.
pub(crate) struct Running<'b, S, T> {
    /// The work, its deadline included (see [`timed`]).
    pub(crate) work: Work<S, T>,
    /// Cancel it when the client leaves.
    pub(crate) cancels_on_leave: bool,
    /// Counts it in Stats' `waits_pending` while it runs.
    pub(crate) _waiting: Option<GaugeGuard<'b>>,
}

/// Takes a request line through the order of checks, and prepares what runs it.
///
/// Not async: the connection's task holds only the request's boxed work (and
/// [`run`]'s timer) while it runs — a held request (a Wait, for up to 30 min)
/// carries no copy of the line, the parsed request or the checks' state.
///
/// `waited`: the caller's terminal was being started, and that is over; it is
/// now known, or refused.
pub(crate) fn prepare<'b, A: App>(
    bus: &'b Arc<Bus>,
    app: &Arc<A>,
    line: &[u8],
    waited: bool,
) -> Prepared<'b, SubscriptionOf<A>, AttachmentOf<A>> {
    let (ctx, request) = match checked(bus, &**app, line, waited) {
        Ok(checked) => checked,
        Err(Refusal::Error(e)) => return Prepared::Reply(Reply::answer(e)),
        Err(Refusal::Starting(starting)) => return Prepared::Starting(starting),
    };
    tracing::debug!(request = request.kind().name(), caller = ?ctx.principal, "request");
    let deadline = request.deadline();
    let cancels_on_leave = request.cancels_when_client_leaves();
    let _waiting = request.is_wait().then(|| bus.counters.wait_guard());
    let mutates = request.kind().at_most_once();
    let running = |work, cancels_on_leave| {
        Prepared::Run(Running {
            work,
            cancels_on_leave,
            _waiting,
        })
    };

    let ticket = match begin_at_most_once(&**app, mutates, &ctx, &request) {
        Once::Run(ticket) => ticket,
        Once::Answer(reply) => return Prepared::Reply(reply),
        Once::AwaitFirst(first) => return running(timed(first_answer(first), deadline), true),
    };
    if !mutates {
        // Nothing to keep: the request's own future, and nothing around it.
        return running(dispatch(bus, app, ctx, request, deadline), cancels_on_leave);
    }
    let mut ctx = ctx;
    ctx.once = ticket.as_ref().map(Ticket::key);
    let work = run_and_keep(bus.clone(), app.clone(), ctx, request, ticket);
    if cancels_on_leave {
        return running(timed(work, deadline), true);
    }
    // A mutation runs to completion whatever becomes of its connection; its
    // record (and its request_id's answer) tells what it did.
    let task = tokio::spawn(work);
    let joined = async move {
        task.await.unwrap_or_else(|e| {
            tracing::error!("a request's task failed: {e}");
            Reply::answer(ApiError::internal("the request failed inside the app"))
        })
    };
    running(timed(joined, deadline), false)
}

/// Why [`checked`] did not pass a request.
enum Refusal {
    /// Its answer.
    Error(ApiError),
    /// Its caller is a terminal being started: check again once that is over.
    Starting(StartSettled),
}

impl From<ApiError> for Refusal {
    fn from(e: ApiError) -> Self {
        Refusal::Error(e)
    }
}

/// `unauthorized`: the token does not name a caller the app knows.
pub(crate) fn unauthorized() -> ApiError {
    ApiError::new(
        ErrorCode::Unauthorized,
        "the token is not valid for the caller named in \"from\"",
    )
}

/// `unauthorized`, retryable: the caller names a terminal the app took over
/// from its last run and has not given this run's token yet.
fn token_being_renewed(terminal: &TerminalRef) -> ApiError {
    let mut error = ApiError::new(
        ErrorCode::Unauthorized,
        format!(
            "the app started again and has not given terminal {} its new token yet \
             (it is written to the terminal's token file once its host's link is up): \
             read the token file again and retry",
            terminal.terminal
        ),
    )
    .with_detail(json!({ "terminal": terminal.terminal }));
    error.retryable = true;
    error
}

/// Steps 1 to 4 of the order of checks: the line, the token, the version, then
/// the request and the caller's right to make it.
fn checked<A: App>(
    bus: &Bus,
    app: &A,
    line: &[u8],
    waited: bool,
) -> Result<(CallContext, Request), Refusal> {
    let envelope = Envelope::parse(line)?;
    let principal = bus
        .secret
        .authenticate(&envelope.from, &envelope.token)
        .ok_or_else(|| match &envelope.from {
            Caller::Terminal(terminal) if app.token_being_renewed(terminal) => {
                token_being_renewed(terminal)
            }
            _ => unauthorized(),
        })?;
    if let Some(terminal) = principal.terminal()
        && !app.knows_terminal(terminal)
    {
        return Err(match app.terminal_starting(terminal) {
            Some(starting) if !waited => Refusal::Starting(starting),
            _ => Refusal::Error(unauthorized()),
        });
    }
    // The version, before the request's name is even read.
    if !envelope.speaks_v1() {
        return Err(ApiError::new(
            ErrorCode::UnsupportedApiVersion,
            unsupported_version_message(&envelope.api_version),
        )
        .into());
    }
    let request = Request::parse(&envelope.request.name, envelope.request.fields)?;
    check_rights(&request, &principal)?;
    let ctx = CallContext {
        principal,
        request_id: envelope.request_id,
        once: None,
    };
    Ok((ctx, request))
}

/// What section 8 says to do with a request.
enum Once<S, T> {
    /// Run it (and keep its answer, when it has a ticket).
    Run(Option<Ticket>),
    /// Answer this instead (a replay, or `request_id_reused`).
    Answer(Reply<S, T>),
    /// The first request with this id still runs: answer what it answers.
    AwaitFirst(watch::Receiver<Option<Value>>),
}

/// Section 8: a mutating request with an id runs at most once.
fn begin_at_most_once<A: App>(
    app: &A,
    mutates: bool,
    ctx: &CallContext,
    request: &Request,
) -> Once<SubscriptionOf<A>, AttachmentOf<A>> {
    let (true, Some(id)) = (mutates, &ctx.request_id) else {
        return Once::Run(None);
    };
    let Some(log) = app.request_log() else {
        return Once::Run(None);
    };
    match log.begin(&ctx.principal, id.as_str(), &request.to_value()) {
        Begin::Fresh(ticket) => Once::Run(Some(ticket)),
        Begin::Replay(answer) => Once::Answer(Reply::Recorded(answer)),
        Begin::Reused => Once::Answer(Reply::answer(
            ApiError::new(
                ErrorCode::RequestIdReused,
                format!("request_id {:?} was used for another request", id.as_str()),
            )
            .with_detail(json!({ "request_id": id.as_str() })),
        )),
        Begin::Running(first) => Once::AwaitFirst(first),
    }
}

/// The answer of the first request with the same id, once it has one.
async fn first_answer<S, T>(mut first: watch::Receiver<Option<Value>>) -> Reply<S, T> {
    loop {
        if let Some(answer) = first.borrow_and_update().clone() {
            return Reply::Recorded(answer);
        }
        if first.changed().await.is_err() {
            return Reply::answer(ApiError::new(
                ErrorCode::Unavailable,
                "the first request with this request_id was cancelled; send it again",
            ));
        }
    }
}

/// Runs the request and keeps its answer under its request id.
async fn run_and_keep<A: App>(
    bus: Arc<Bus>,
    app: Arc<A>,
    ctx: CallContext,
    request: Request,
    ticket: Option<Ticket>,
) -> Reply<SubscriptionOf<A>, AttachmentOf<A>> {
    // Its deadline is kept around this whole future (see `prepare`).
    let reply = dispatch(&bus, &app, ctx, request, None).await;
    if let Some(ticket) = ticket
        && let Some(log) = app.request_log()
    {
        let answer = match &reply {
            Reply::Answer(response) => serde_json::to_value(&**response).ok(),
            Reply::Recorded(value) => Some(value.clone()),
            Reply::Encoded(answer) => serde_json::from_slice(answer.as_bytes()).ok(),
            Reply::Stream(_) | Reply::Attach(_) | Reply::Left => None,
        };
        if let Some(answer) = answer {
            log.finish(ticket, answer);
        }
    }
    reply
}

/// Declares [`dispatch`] from the request list: every request, each with who
/// serves it. Each request's future is boxed on its own, with the context and
/// the request it owns and the timer of its deadline: awaited inline, the
/// largest of them would size every request's future (~18 KB, held by each
/// waiting connection); boxed, a request carries only its own.
macro_rules! declare_dispatch {
    ($($kind:ident($module:ident) by $served:ident,)*) => {
        fn dispatch<A: App>(
            bus: &Arc<Bus>,
            app: &Arc<A>,
            ctx: CallContext,
            request: Request,
            deadline: Option<Duration>,
        ) -> Work<SubscriptionOf<A>, AttachmentOf<A>> {
            match request {
                $(Request::$kind(request) => serve_by!($served, bus, app, ctx, request, deadline),)*
            }
        }
    };
}

/// One arm of [`dispatch`], by who serves the request.
macro_rules! serve_by {
    (app, $bus:ident, $app:ident, $ctx:ident, $request:ident, $deadline:ident) => {
        by_app($app.clone(), $ctx, $request, $deadline)
    };
    (encoded, $bus:ident, $app:ident, $ctx:ident, $request:ident, $deadline:ident) => {{
        let app = $app.clone();
        timed(
            async move {
                match HandleEncoded::handle_encoded(&*app, &$ctx, $request).await {
                    Ok(answer) => Reply::Encoded(answer),
                    Err(e) => Reply::answer(e),
                }
            },
            $deadline,
        )
    }};
    (bus, $bus:ident, $app:ident, $ctx:ident, $request:ident, $deadline:ident) => {{
        let (bus, app) = ($bus.clone(), $app.clone());
        timed(
            async move { ServedByBus::reply($request, &bus, &*app).await },
            $deadline,
        )
    }};
    (stream, $bus:ident, $app:ident, $ctx:ident, $request:ident, $deadline:ident) => {{
        let app = $app.clone();
        timed(
            async move {
                match Open::<SubscribeAgents>::open(&*app, &$ctx, $request).await {
                    Ok(subscription) => Reply::Stream(Box::new(subscription)),
                    Err(e) => Reply::answer(e),
                }
            },
            $deadline,
        )
    }};
    (attach, $bus:ident, $app:ident, $ctx:ident, $request:ident, $deadline:ident) => {{
        let app = $app.clone();
        timed(
            async move {
                match Open::<Attach>::open(&*app, &$ctx, $request).await {
                    Ok(attachment) => Reply::Attach(Box::new(attachment)),
                    Err(e) => Reply::answer(e),
                }
            },
            $deadline,
        )
    }};
}

/// A request the app answers through [`Handle`], boxed with what it owns. A
/// handler that answers before the deadline by itself gets no timer here.
fn by_app<A, R, S, T>(
    app: Arc<A>,
    ctx: CallContext,
    request: R,
    deadline: Option<Duration>,
) -> Work<S, T>
where
    A: Handle<R> + Send + Sync + 'static,
    R: Call + Send + 'static,
    S: Send + 'static,
    T: Send + 'static,
{
    // The request is captured boxed and leaves its box before the handler
    // runs: captured as it is, its room would stay in the future for as long
    // as the request is held (a Wait: 88 bytes more per held connection).
    let request = Box::new(request);
    let work = async move { Reply::answered(app.handle(&ctx, unboxed(request)).await) };
    if <A as Handle<R>>::ANSWERS_BEFORE_DEADLINE {
        Box::pin(work)
    } else {
        timed(work, deadline)
    }
}

/// The value out of its box, the box freed at once (the box is the point:
/// see [`by_app`]).
#[allow(clippy::boxed_local)]
fn unboxed<R>(boxed: Box<R>) -> R {
    *boxed
}

/// `work` boxed with its deadline: past it, the answer is `"TimedOut"` (and
/// `work` is dropped). The timer lives in the work's own box, so a request
/// without one (see [`Handle::ANSWERS_BEFORE_DEADLINE`]) carries none.
fn timed<S, T>(
    work: impl Future<Output = Reply<S, T>> + Send + 'static,
    deadline: Option<Duration>,
) -> Work<S, T> {
    let Some(deadline) = deadline else {
        return Box::pin(work);
    };
    Box::pin(async move {
        tokio::select! {
            biased;
            reply = work => reply,
            () = tokio::time::sleep(deadline) => Reply::answer(Response::TimedOut),
        }
    })
}

for_each_request!(declare_dispatch);

fn check_rights(request: &Request, principal: &Principal) -> Result<(), ApiError> {
    let kind = request.kind();
    let allowed = match (kind.rights(), principal) {
        (Rights::Anyone, _) => true,
        (Rights::ClientOnly, Principal::Client) => true,
        (Rights::ClientOnly, _) => false,
        (Rights::TerminalsAboutThemselves, Principal::Client | Principal::Durable) => false,
        (Rights::TerminalsAboutThemselves, _) => true,
        // The bus lets every caller through; the app checks a plain terminal's scope.
        (Rights::Scoped, _) => true,
        (Rights::ClientAndLeads, Principal::Terminal(_)) => false,
        (Rights::ClientAndLeads, _) => true,
    };
    if allowed {
        return Ok(());
    }
    let who = match principal {
        Principal::Client => "Client",
        Principal::Durable => "the durable facet",
        Principal::Lead(_) => "a lead terminal",
        Principal::Terminal(_) => "a terminal",
    };
    let rule = match kind.rights() {
        Rights::ClientOnly => "only Client (outside the app's terminals) may make it",
        Rights::TerminalsAboutThemselves => "only a terminal may make it, about itself",
        Rights::ClientAndLeads => "only Client and lead terminals may make it",
        Rights::Anyone | Rights::Scoped => "this caller may not make it",
    };
    Err(ApiError::new(
        ErrorCode::Forbidden,
        format!("{who} may not make {}: {rule}", kind.name()),
    )
    .with_detail(json!({ "request": kind.name() })))
}

/// Runs a request (its deadline is in its work: [`timed`]), and cancels it if
/// its client leaves.
pub(crate) async fn run<S, T>(work: Work<S, T>, watch: Option<&mut TcpStream>) -> Reply<S, T> {
    let Some(stream) = watch else {
        return work.await;
    };
    tokio::select! {
        biased;
        reply = work => reply,
        () = connection::client_left(stream) => Reply::Left,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::request::hello::Hello;
    use crate::request::wait::Wait;

    /// An app whose every answer is held forever.
    struct Holding;

    impl<R: Call> Handle<R> for Holding {
        fn handle(
            &self,
            _: &CallContext,
            _: R,
        ) -> impl Future<Output = Result<R::Answer, ApiError>> + Send {
            std::future::pending()
        }
    }

    fn held<R: Call + Send + 'static>(request: R) -> Work<(), ()> {
        let ctx = CallContext {
            principal: Principal::Client,
            request_id: None,
            once: None,
        };
        by_app(
            Arc::new(Holding),
            ctx,
            request,
            Some(Duration::from_secs(60)),
        )
    }

    /// A held request keeps no room for itself in its work (the work of a
    /// Wait, which is held for as long as it waits, is that of an empty
    /// request): the request leaves its box before the handler runs.
    #[test]
    fn a_held_request_keeps_no_room_for_itself() {
        let wait: Wait = serde_json::from_value(json!({"targets": [1, 2]})).unwrap();
        assert!(std::mem::size_of::<Wait>() >= 64);
        let (wait, hello) = (held(wait), held(Hello {}));
        assert_eq!(
            std::mem::size_of_val(&*wait),
            std::mem::size_of_val(&*hello)
        );
    }
}
