//! One extension: its server process, its MCP session, and the state Extensions
//! shows (stopped, running, failed).

use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use krad_bus::protocol::{
    ApiError, BUILD, ErrorCode, ExtensionInfo, ExtensionState, ToolInfo, ToolResultInfo,
};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientCapabilities, ClientConfig, ClientRequest,
    Implementation, JsonObject, Tool,
};
use rmcp::service::{Peer, PeerRequestOptions};
use rmcp::service::{RoleClient, RunningService, ServiceError, serve_client};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::content::{tool_info, tool_result};
use crate::process_group::ProcessGroup;
use crate::spec::{Limits, ServerSpec, unavailable};
use crate::tap::{Calls, Pending, TapTransport};

/// The longest stderr line logged whole; longer ones are cut.
const MAX_LOG_LINE: usize = 4096;

/// An extension and its server.
pub(crate) struct Extension {
    name: String,
    spec: ServerSpec,
    limits: Limits,
    state: Mutex<State>,
    /// Held while a server starts, so that concurrent calls start it once.
    starting: tokio::sync::Mutex<()>,
    /// Cancelled when the app stops: nothing starts any more.
    closed: CancellationToken,
    tasks: TaskTracker,
}

#[derive(Default)]
struct State {
    /// The running session, if any.
    session: Option<Arc<Session>>,
    /// Why the last server failed, if the extension is failed.
    failed: Option<Failed>,
    /// The tools the server listed when it last ran.
    tools: Vec<ToolInfo>,
    /// Failures (start failures and deaths) since the last completed call.
    failures: u32,
    /// How many servers were started.
    starts: u64,
    /// The generation of the next session.
    next_generation: u64,
}

struct Failed {
    error: String,
    at: Instant,
    generation: Option<u64>,
}

/// A running server's session.
pub(crate) struct Session {
    generation: u64,
    peer: Peer<RoleClient>,
    /// The results of its tool calls, as the server sent them.
    calls: Arc<Calls>,
    /// Tells the supervisor to stop the server.
    stop: CancellationToken,
}

impl Session {
    fn alive(&self) -> bool {
        !self.stop.is_cancelled() && !self.peer.is_transport_closed()
    }
}

impl Extension {
    pub(crate) fn new(
        name: String,
        spec: ServerSpec,
        limits: Limits,
        closed: CancellationToken,
        tasks: TaskTracker,
    ) -> Extension {
        Extension {
            name,
            spec,
            limits,
            state: Mutex::new(State::default()),
            starting: tokio::sync::Mutex::new(()),
            closed,
            tasks,
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What Extensions shows.
    pub(crate) fn info(&self) -> ExtensionInfo {
        let mut state = self.state();
        if let Some(session) = state.session.clone()
            && !session.alive()
        {
            self.died(
                &mut state,
                session.generation,
                "the server closed its connection".into(),
            );
        }
        let (status, error) = match (&state.session, &state.failed) {
            (Some(_), _) => (ExtensionState::Running, None),
            (None, Some(failed)) => (ExtensionState::Failed, Some(failed.error.clone())),
            (None, None) => (ExtensionState::Stopped, None),
        };
        ExtensionInfo {
            name: self.name.clone(),
            state: status,
            tools: state.tools.clone(),
            error,
            restarts: state.starts.saturating_sub(1),
        }
    }

    /// Stops the running server, if any.
    pub(crate) fn stop(&self) {
        let session = self.state().session.take();
        if let Some(session) = session {
            session.stop.cancel();
        }
    }

    /// Calls a tool. The answer is made of the result's JSON as the server
    /// sent it (see [`crate::tap`]), not of rmcp's typed model of it.
    pub(crate) async fn call(
        self: &Arc<Self>,
        tool: &str,
        arguments: JsonObject,
    ) -> Result<ToolResultInfo, ApiError> {
        let session = self.session().await?;
        self.ensure_tool(&session, tool).await?;
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = session
            .peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
            .map_err(|error| self.call_failed(&session, tool, error))?;
        // Dropped with this future, it cancels the call on the server.
        let pending = Pending::new(&session.peer, &session.calls, handle.id.clone());
        let answered = handle.await_response().await;
        let sent = pending.done();
        let typed = answered.map_err(|error| self.call_failed(&session, tool, error))?;
        self.state().failures = 0;
        let result = sent.unwrap_or_else(|| {
            // Only a server that sends what the tap cannot read gets here.
            tracing::debug!(extension = %self.name, tool, "no result JSON seen; using rmcp's");
            serde_json::to_value(&typed).unwrap_or(serde_json::Value::Null)
        });
        tool_result(result, self.limits.max_content).map_err(|why| {
            ApiError::new(
                ErrorCode::Failed,
                format!(
                    "extension {:?}: the call to {tool:?} failed: {why}",
                    self.name
                ),
            )
            .with_detail(json!({ "extension": self.name, "tool": tool }))
        })
    }

    /// Checks that the server has `tool`, asking it for its tools again when
    /// the ones it listed lack it; else the error naming the tools it has.
    async fn ensure_tool(&self, session: &Session, tool: &str) -> Result<(), ApiError> {
        if self.knows_tool(tool) {
            return Ok(());
        }
        // The server may have more tools than it listed at start.
        if let Ok(tools) = session.peer.list_all_tools().await {
            self.state().tools = tools.iter().map(tool_info).collect();
        }
        if self.knows_tool(tool) {
            return Ok(());
        }
        let tools: Vec<String> = self.state().tools.iter().map(|t| t.name.clone()).collect();
        Err(ApiError::new(
            ErrorCode::NotFound,
            format!(
                "extension {:?} has no tool {tool:?}; its tools: {}",
                self.name,
                if tools.is_empty() {
                    "none".to_owned()
                } else {
                    tools.join(", ")
                }
            ),
        )
        .with_detail(json!({ "extension": self.name, "tool": tool })))
    }

    /// The error a call to `tool` that failed with `error` answers; a closed
    /// connection is recorded as the server's death.
    fn call_failed(&self, session: &Session, tool: &str, error: ServiceError) -> ApiError {
        match error {
            ServiceError::McpError(e) => {
                self.state().failures = 0;
                ApiError::new(
                    ErrorCode::Failed,
                    format!(
                        "extension {:?} refused the call to {tool:?}: {} (MCP error {})",
                        self.name, e.message, e.code.0
                    ),
                )
                .with_detail(json!({
                    "extension": self.name,
                    "tool": tool,
                    "mcp_code": e.code.0,
                    "mcp_data": e.data,
                }))
            }
            e @ (ServiceError::TransportClosed | ServiceError::TransportSend(_)) => {
                self.closed_during_call(session.generation, tool, &e)
            }
            e => ApiError::new(
                ErrorCode::Failed,
                format!(
                    "extension {:?}: the call to {tool:?} failed: {e}",
                    self.name
                ),
            )
            .with_detail(json!({ "extension": self.name, "tool": tool })),
        }
    }

    /// The server's connection closed during a call to `tool`: records its
    /// death and answers that it is started again on the next call.
    fn closed_during_call(&self, generation: u64, tool: &str, error: &ServiceError) -> ApiError {
        let mut state = self.state();
        self.died(
            &mut state,
            generation,
            format!("the server's connection closed during a call to {tool:?}"),
        );
        drop(state);
        tracing::warn!(extension = %self.name, tool, "call failed: {error}");
        if self.closed.is_cancelled() {
            return unavailable(
                &self.name,
                format!("extension {:?}: the app is stopping", self.name),
            );
        }
        unavailable(
            &self.name,
            format!(
                "extension {:?}: the server exited or closed its connection during the call to {tool:?}; \
                 it is started again on the next call",
                self.name
            ),
        )
    }

    fn knows_tool(&self, tool: &str) -> bool {
        self.state().tools.iter().any(|t| t.name == tool)
    }

    /// The live session, if there is one; a dead one is recorded as failed.
    fn live_session(&self) -> Option<Arc<Session>> {
        let mut state = self.state();
        let session = state.session.clone()?;
        if session.alive() {
            return Some(session);
        }
        self.died(
            &mut state,
            session.generation,
            "the server closed its connection".into(),
        );
        None
    }

    /// Records that a session's server died (once per session).
    fn died(&self, state: &mut State, generation: u64, error: String) {
        let Some(session) = state.session.as_ref() else {
            return;
        };
        if session.generation != generation {
            return;
        }
        session.stop.cancel();
        state.session = None;
        state.failures += 1;
        tracing::warn!(extension = %self.name, "server failed: {error}");
        state.failed = Some(Failed {
            error,
            at: Instant::now(),
            generation: Some(generation),
        });
    }

    /// The supervisor saw the server exit.
    fn exited(&self, generation: u64, status: &str) {
        let mut state = self.state();
        let error = format!("the server exited ({status})");
        match &mut state.failed {
            Some(failed) if failed.generation == Some(generation) => {
                failed.error = format!("{}; {error}", failed.error);
            }
            _ => self.died(&mut state, generation, error),
        }
    }

    /// How long after a failure the next start may be tried.
    fn backoff(&self, failures: u32) -> Duration {
        match failures {
            0 | 1 => Duration::ZERO,
            n => Duration::from_secs(1u64 << (n - 2).min(16)).min(self.limits.backoff_max),
        }
    }

    /// The running session, starting the server when there is none.
    async fn session(self: &Arc<Self>) -> Result<Arc<Session>, ApiError> {
        if let Some(session) = self.live_session() {
            return Ok(session);
        }
        let _starting = self.starting.lock().await;
        if let Some(session) = self.live_session() {
            return Ok(session);
        }
        if self.closed.is_cancelled() {
            return Err(unavailable(
                &self.name,
                format!("extension {:?}: the app is stopping", self.name),
            ));
        }
        {
            let state = self.state();
            if let Some(failed) = &state.failed {
                let wait = self.backoff(state.failures);
                let elapsed = failed.at.elapsed();
                if elapsed < wait {
                    let left = wait - elapsed;
                    return Err(ApiError::new(
                        ErrorCode::Unavailable,
                        format!(
                            "extension {:?} failed ({}); it is tried again in {} ms",
                            self.name,
                            failed.error,
                            left.as_millis()
                        ),
                    )
                    .with_detail(json!({
                        "extension": self.name,
                        "retry_after_ms": left.as_millis() as u64,
                    })));
                }
            }
        }
        let generation = {
            let mut state = self.state();
            state.next_generation += 1;
            // Every launch counts, the ones that fail too.
            state.starts += 1;
            state.next_generation
        };
        match self.start(generation).await {
            Ok((session, tools)) => {
                let mut state = self.state();
                state.session = Some(session.clone());
                state.failed = None;
                state.tools = tools;
                Ok(session)
            }
            Err(error) => {
                let mut state = self.state();
                state.failures += 1;
                tracing::warn!(extension = %self.name, "server failed to start: {error}");
                state.failed = Some(Failed {
                    error: error.clone(),
                    at: Instant::now(),
                    generation: None,
                });
                Err(unavailable(
                    &self.name,
                    format!("extension {:?} is not available: {error}", self.name),
                ))
            }
        }
    }

    /// Starts the server: spawns it in its own process group, runs the MCP
    /// handshake, lists its tools, and hands the process to a supervisor task.
    async fn start(
        self: &Arc<Self>,
        generation: u64,
    ) -> Result<(Arc<Session>, Vec<ToolInfo>), String> {
        let (mut child, group) = self.spawn_server()?;
        let calls = Arc::new(Calls::default());
        let (running, tools) = self.handshake(&mut child, calls.clone()).await?;
        let session = Arc::new(Session {
            generation,
            peer: running.peer().clone(),
            calls,
            stop: CancellationToken::new(),
        });
        let tools = tools.iter().map(tool_info).collect();
        self.tasks.spawn(supervise(
            self.clone(),
            generation,
            child,
            running,
            group,
            session.stop.clone(),
        ));
        Ok((session, tools))
    }

    /// Spawns the server in its own process group, its stderr copied into the
    /// log; returns it and its group.
    fn spawn_server(&self) -> Result<(Child, ProcessGroup), String> {
        let spec = &self.spec;
        let mut command = Command::new(&spec.command);
        command
            .args(&spec.args)
            .envs(&spec.env)
            .current_dir(&spec.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = command.spawn().map_err(|e| {
            format!(
                "cannot start {:?} in {}: {e}",
                spec.command,
                spec.cwd.display()
            )
        })?;
        let group = ProcessGroup::of(child.id());
        tracing::info!(extension = %self.name, pid = child.id(), "server started");
        if let Some(stderr) = child.stderr.take() {
            self.tasks.spawn(log_stderr(self.name.clone(), stderr));
        }
        Ok((child, group))
    }

    /// Runs the MCP handshake on the server's stdio (through the tap, which
    /// keeps tool results in `calls`) and lists its tools, within
    /// the start timeout; fails early, saying how, if the server exits.
    async fn handshake(
        &self,
        child: &mut Child,
        calls: Arc<Calls>,
    ) -> Result<(RunningService<RoleClient, ClientConfig>, Vec<Tool>), String> {
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("its stdio could not be connected".into());
        };
        let client = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("krad", BUILD),
        );
        let handshake = async {
            let running = serve_client(client, TapTransport::new(stdout, stdin, calls))
                .await
                .map_err(|e| format!("the MCP handshake failed: {e}"))?;
            let tools = running
                .peer()
                .list_all_tools()
                .await
                .map_err(|e| format!("it did not list its tools: {e}"))?;
            Ok::<(RunningService<RoleClient, ClientConfig>, Vec<Tool>), String>((running, tools))
        };
        let timeout = self.limits.start_timeout;
        let outcome = tokio::select! {
            outcome = tokio::time::timeout(timeout, handshake) => outcome,
            status = child.wait() => {
                return Err(format!("it exited ({}) before it answered", describe(status)));
            }
        };
        match outcome {
            Ok(Ok(done)) => Ok(done),
            Ok(Err(error)) => {
                // It probably exited: say how, if it says soon.
                let status = tokio::time::timeout(Duration::from_millis(500), child.wait()).await;
                Err(match status {
                    Ok(status) => format!("it exited ({}) before it answered", describe(status)),
                    Err(_) => error,
                })
            }
            Err(_) => Err(format!(
                "it did not answer the MCP handshake within {} s",
                timeout.as_secs()
            )),
        }
    }
}

/// Owns a running server until it exits or is told to stop.
async fn supervise(
    ext: Arc<Extension>,
    generation: u64,
    mut child: Child,
    mut running: RunningService<RoleClient, ClientConfig>,
    group: ProcessGroup,
    stop: CancellationToken,
) {
    let name = ext.name.clone();
    tokio::select! {
        status = child.wait() => {
            // Whatever it left in its group goes with it.
            group.kill();
            let status = describe(status);
            tracing::warn!(extension = %name, "server exited ({status})");
            ext.exited(generation, &status);
            drop(running);
        }
        () = stop.cancelled() => {
            // Close its stdin (the MCP way to stop a stdio server), then kill.
            let grace = ext.limits.stop_grace;
            let _ = running.close_with_timeout(grace).await;
            let status = match tokio::time::timeout(grace, child.wait()).await {
                Ok(status) => {
                    let status = describe(status);
                    tracing::info!(extension = %name, "server stopped ({status})");
                    status
                }
                Err(_) => {
                    group.kill();
                    let status = describe(child.wait().await);
                    tracing::warn!(
                        extension = %name,
                        "server did not exit within {grace:?} of its stdin closing; killed ({status})"
                    );
                    status
                }
            };
            group.kill();
            // When it was stopped because it died, the failure says how.
            ext.exited(generation, &status);
        }
    }
}

/// How a process ended, in words.
fn describe(status: std::io::Result<ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => format!("exit code {code}"),
            (None, Some(signal)) => format!("killed by signal {signal}"),
            (None, None) => "ended".to_owned(),
        },
        Err(e) => format!("its status is unknown: {e}"),
    }
}

/// Copies a server's stderr into the log, line by line.
async fn log_stderr(name: String, stderr: impl AsyncRead + Unpin) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader)
            .take(MAX_LOG_LINE as u64)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line);
                let text = text.trim_end();
                if !text.is_empty() {
                    tracing::info!(target: "krad_ext::server", extension = %name, "{text}");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn ext(limits: Limits) -> Extension {
        Extension::new(
            "t".into(),
            ServerSpec::default(),
            limits,
            CancellationToken::new(),
            TaskTracker::new(),
        )
    }

    #[test]
    fn backoff_starts_after_the_second_failure_and_is_capped() {
        let ext = ext(Limits {
            backoff_max: Duration::from_secs(30),
            ..Limits::default()
        });
        let waits: Vec<u64> = (0..9).map(|n| ext.backoff(n).as_secs()).collect();
        assert_eq!(waits, [0, 0, 1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(ext.backoff(u32::MAX).as_secs(), 30);
    }
}
