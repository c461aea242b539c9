//! The order of checks (line, token, version, caller and request) and the
//! exhaustive dispatch that runs each request under its deadline.

use std::future::Future;
use std::time::Duration;

use serde_json::json;
use tokio::net::TcpStream;

use super::{App, Bus, CallContext, connection};
use crate::protocol::{ApiError, Envelope, ErrorCode, Response, unsupported_version_message};
use crate::request::hello::HelloInfo;
use crate::request::{Request, Rights};
use crate::token::Principal;

/// What became of a request.
pub(crate) enum Reply<S> {
    /// Write this answer.
    Answer(Response),
    /// Serve this stream.
    Stream(S),
    /// The client left while its request waited; nothing is written.
    Left,
}

/// Takes a request line through the order of checks and runs it.
pub(crate) async fn handle<A: App>(
    bus: &Bus,
    app: &A,
    line: &[u8],
    stream: &mut TcpStream,
) -> Reply<A::Subscription> {
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
    let work = dispatch(bus, app, &ctx, request);
    run(work, deadline, cancels_on_leave.then_some(stream)).await
}

/// Every request, each with its handler. No `_` arm: a new request does not
/// compile until it is handled here.
async fn dispatch<A: App>(
    bus: &Bus,
    app: &A,
    ctx: &CallContext,
    request: Request,
) -> Reply<A::Subscription> {
    let answer = match request {
        Request::Hello(_) => Response::Hello(HelloInfo::of_this_process()),
        Request::List(r) => app.list(ctx, r).await,
        Request::Check(r) => app.check(ctx, r).await,
        Request::Wait(r) => app.wait(ctx, r).await,
        Request::Spawn(r) => app.spawn(ctx, r).await,
        Request::Send(r) => app.send(ctx, r).await,
        Request::Output(r) => app.output(ctx, r).await,
        Request::Close(r) => app.close(ctx, r).await,
        Request::Report(r) => app.report(ctx, r).await,
        Request::SubscribeAgents(r) => match app.subscribe(ctx, r).await {
            Ok(subscription) => return Reply::Stream(subscription),
            Err(e) => e.into(),
        },
        Request::Environments(r) => app.environments(ctx, r).await,
        Request::CreateWorktree(r) => app.create_worktree(ctx, r).await,
        Request::Changes(r) => app.changes(ctx, r).await,
        Request::RunVariants(r) => app.run_variants(ctx, r).await,
        Request::PickVariant(r) => app.pick_variant(ctx, r).await,
        Request::Code(r) => app.code(ctx, r).await,
        Request::Extensions(r) => app.extensions(ctx, r).await,
        Request::ExtensionTool(r) => app.extension_tool(ctx, r).await,
        Request::Stats(_) => Response::Stats(bus.stats(app.agent_count().await)),
        Request::Shutdown(shutdown) => {
            bus.request_shutdown(shutdown.closes_terminals());
            Response::Ok
        }
    };
    Reply::Answer(answer)
}

fn check_rights(request: &Request, principal: &Principal) -> Result<(), ApiError> {
    let kind = request.kind();
    let allowed = match (kind.rights(), principal) {
        (Rights::Anyone, _) => true,
        (Rights::ClientOnly, Principal::Client) => true,
        (Rights::ClientOnly, _) => false,
        (Rights::TerminalsAboutThemselves, Principal::Client) => false,
        (Rights::TerminalsAboutThemselves, _) => true,
        // The bus lets every caller through; the app checks a plain terminal's scope.
        (Rights::Scoped, _) => true,
    };
    if allowed {
        return Ok(());
    }
    let who = match principal {
        Principal::Client => "Client",
        Principal::Lead(_) => "a lead terminal",
        Principal::Terminal(_) => "a terminal",
    };
    let rule = match kind.rights() {
        Rights::ClientOnly => "only Client (outside the app's terminals) may make it",
        Rights::TerminalsAboutThemselves => "only a terminal may make it, about itself",
        Rights::Anyone | Rights::Scoped => "this caller may not make it",
    };
    Err(ApiError::new(
        ErrorCode::Forbidden,
        format!("{who} may not make {}: {rule}", kind.name()),
    )
    .with_detail(json!({ "request": kind.name() })))
}

/// Runs a request under its deadline, and cancels it if its client leaves.
async fn run<F, S>(work: F, deadline: Option<Duration>, watch: Option<&mut TcpStream>) -> Reply<S>
where
    F: Future<Output = Reply<S>>,
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
