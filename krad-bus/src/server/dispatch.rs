//! The order of checks (line, token, version, caller and request) and the
//! exhaustive dispatch that runs each request under its deadline.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::net::TcpStream;

use super::bus_requests::ServedByBus;
use super::request_log::Begin;
use super::{App, Bus, CallContext, Handle, connection};
use crate::protocol::{
    Answer, ApiError, Envelope, ErrorCode, Response, unsupported_version_message,
};
use crate::request::{Request, Rights, for_each_request};
use crate::token::Principal;

/// What became of a request.
pub(crate) enum Reply<S, T> {
    /// Write this answer.
    Answer(Response),
    /// Write this answer, as recorded earlier (a replay).
    Recorded(serde_json::Value),
    /// Serve this stream.
    Stream(S),
    /// Serve this attachment (lines both ways).
    Attach(T),
    /// The client left while its request waited; nothing is written.
    Left,
}

impl<S, T> Reply<S, T> {
    /// A handler's typed result, as the response on the wire.
    fn answered<R: Answer>(result: Result<R, ApiError>) -> Self {
        Reply::Answer(match result {
            Ok(answer) => answer.into_response(),
            Err(e) => e.into(),
        })
    }
}

/// Takes a request line through the order of checks and runs it.
pub(crate) async fn handle<A: App>(
    bus: &Arc<Bus>,
    app: &Arc<A>,
    line: &[u8],
    stream: &mut TcpStream,
) -> Reply<A::Subscription, A::Attachment> {
    // 1. The line.
    let envelope = match Envelope::parse(line) {
        Ok(envelope) => envelope,
        Err(e) => return Reply::Answer(e.into()),
    };
    // 2. The token.
    let principal = bus
        .secret
        .authenticate(&envelope.from, &envelope.token)
        .filter(|p| p.terminal().is_none_or(|t| app.knows_terminal(t)));
    let Some(principal) = principal else {
        return Reply::Answer(
            ApiError::new(
                ErrorCode::Unauthorized,
                "the token is not valid for the caller named in \"from\"",
            )
            .into(),
        );
    };
    // 3. The version, before the request's name is even read.
    if !envelope.speaks_v1() {
        return Reply::Answer(
            ApiError::new(
                ErrorCode::UnsupportedApiVersion,
                unsupported_version_message(&envelope.api_version),
            )
            .into(),
        );
    }
    // 4. The request, then the caller's right to make it.
    let request = match Request::parse(&envelope.request.name, envelope.request.fields) {
        Ok(request) => request,
        Err(e) => return Reply::Answer(e.into()),
    };
    if let Err(e) = check_rights(&request, &principal) {
        return Reply::Answer(e.into());
    }
    tracing::debug!(request = request.kind().name(), caller = ?principal, "request");
    let ctx = CallContext {
        principal,
        request_id: envelope.request_id,
    };
    let deadline = request.deadline();
    let cancels_on_leave = request.cancels_when_client_leaves();
    let _waiting = request.is_wait().then(|| bus.counters.wait_guard());
    let mutates = request.kind().mutates();

    // Section 8: a mutating request with an id runs at most once.
    let mut ticket = None;
    if let (true, Some(id), Some(log)) = (mutates, &ctx.request_id, app.request_log()) {
        match log.begin(&ctx.principal, id.as_str(), &request.to_value()) {
            Begin::Fresh(t) => ticket = Some(t),
            Begin::Replay(answer) => return Reply::Recorded(answer),
            Begin::Reused => {
                return Reply::Answer(
                    ApiError::new(
                        ErrorCode::RequestIdReused,
                        format!("request_id {:?} was used for another request", id.as_str()),
                    )
                    .with_detail(json!({ "request_id": id.as_str() }))
                    .into(),
                );
            }
            Begin::Running(mut first) => {
                let replay = async move {
                    loop {
                        if let Some(answer) = first.borrow_and_update().clone() {
                            return Reply::Recorded(answer);
                        }
                        if first.changed().await.is_err() {
                            return Reply::Answer(
                                ApiError::new(
                                    ErrorCode::Unavailable,
                                    "the first request with this request_id was cancelled; send it again",
                                )
                                .into(),
                            );
                        }
                    }
                };
                return run(replay, deadline, Some(stream)).await;
            }
        }
    }

    let work = {
        let (bus, app) = (bus.clone(), app.clone());
        async move {
            let reply = dispatch(&bus, &*app, &ctx, request).await;
            if let (Some(ticket), Some(log)) = (ticket, app.request_log()) {
                let answer = match &reply {
                    Reply::Answer(response) => serde_json::to_value(response).ok(),
                    Reply::Recorded(value) => Some(value.clone()),
                    Reply::Stream(_) | Reply::Attach(_) | Reply::Left => None,
                };
                if let Some(answer) = answer {
                    log.finish(ticket, answer);
                }
            }
            reply
        }
    };
    if mutates && !cancels_on_leave {
        // A mutation runs to completion whatever becomes of its connection; its
        // record (and its request_id's answer) tells what it did.
        let task = tokio::spawn(work);
        let joined = async move {
            task.await.unwrap_or_else(|e| {
                tracing::error!("a request's task failed: {e}");
                Reply::Answer(ApiError::internal("the request failed inside the app").into())
            })
        };
        return run(joined, deadline, None).await;
    }
    run(work, deadline, cancels_on_leave.then_some(stream)).await
}

/// Declares [`dispatch`] from the request list: every request, each with who
/// serves it. Each handler's future is boxed: awaited inline, the largest of
/// them would size every request's future (~18 KB, held by each waiting
/// connection); boxed, a request carries only its own.
macro_rules! declare_dispatch {
    ($($kind:ident($module:ident) by $served:ident,)*) => {
        async fn dispatch<A: App>(
            bus: &Bus,
            app: &A,
            ctx: &CallContext,
            request: Request,
        ) -> Reply<A::Subscription, A::Attachment> {
            match request {
                $(Request::$kind(request) => serve_by!($served, bus, app, ctx, request),)*
            }
        }
    };
}

/// One arm of [`dispatch`], by who serves the request.
macro_rules! serve_by {
    (app, $bus:ident, $app:ident, $ctx:ident, $request:ident) => {
        Reply::answered(Box::pin(Handle::handle($app, $ctx, $request)).await)
    };
    (bus, $bus:ident, $app:ident, $ctx:ident, $request:ident) => {
        Reply::answered(ServedByBus::serve($request, $bus, $app).await)
    };
    (stream, $bus:ident, $app:ident, $ctx:ident, $request:ident) => {
        match Box::pin($app.subscribe($ctx, $request)).await {
            Ok(subscription) => Reply::Stream(subscription),
            Err(e) => Reply::Answer(e.into()),
        }
    };
    (attach, $bus:ident, $app:ident, $ctx:ident, $request:ident) => {
        match $app.attach($ctx, $request).await {
            Ok(attachment) => Reply::Attach(attachment),
            Err(e) => Reply::Answer(e.into()),
        }
    };
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

/// Runs a request under its deadline, and cancels it if its client leaves.
async fn run<F, S, T>(
    work: F,
    deadline: Option<Duration>,
    watch: Option<&mut TcpStream>,
) -> Reply<S, T>
where
    F: Future<Output = Reply<S, T>>,
{
    let expiry = async {
        match deadline {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    let left = async {
        match watch {
            Some(stream) => connection::client_left(stream).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        biased;
        reply = work => reply,
        () = expiry => Reply::Answer(Response::TimedOut),
        () = left => Reply::Left,
    }
}
