//! `krad-mcp-fixture`: a small MCP server over stdio that krad's tests run as an
//! extension. It is a real rmcp server, so the tests see what a real one does.
//!
//! Tools:
//!
//! * `echo {text}` — answers the text;
//! * `fail {message}` — a tool error (`isError: true`) carrying the message;
//! * `slow {ms, id?}` — sleeps `ms` milliseconds, then answers `slept <ms>`; with
//!   `--marker-dir` it writes `<id>.started`, then `<id>.completed` or, when the
//!   client cancels the call, `<id>.cancelled`;
//! * `crash {code?}` — exits the whole process in the middle of the call;
//! * `big {bytes}` — answers one text item of that many bytes;
//! * `mixed` — answers a text item and an image item;
//! * `annotated` — answers a result written as JSON, not through rmcp's typed
//!   model: a text item with `annotations` (`priority: 0.7`), `_meta` and a field
//!   MCP does not define (`x-extra`), plus `structuredContent`, `isError`,
//!   `_meta` and an unknown member (`x-top`) beside the content;
//! * `raw {result}` — answers `result` itself, whatever it is, as the call's
//!   JSON-RPC result (to send what no typed model would: bad results too).
//!
//! Flags:
//!
//! * `--marker-dir DIR` — where `slow` writes its markers;
//! * `--stderr TEXT` — prints TEXT on stderr at start (it must end in the app's log);
//! * `--exit-at-once` — exits with code 7 before reading anything;
//! * `--never-initialize` — reads its input but never answers (a server that
//!   never starts).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use std::borrow::Cow;

use krad_mcp_fixture::annotated;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientNotification, ClientRequest,
    ContentBlock, CustomResult, Implementation, JsonObject, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, ServerResult, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, Service};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

/// What the command line asked for.
#[derive(Debug, Default)]
struct Flags {
    marker_dir: Option<PathBuf>,
    stderr: Option<String>,
    exit_at_once: bool,
    never_initialize: bool,
}

fn flags() -> Result<Flags, String> {
    let mut flags = Flags::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--marker-dir" => {
                flags.marker_dir = Some(args.next().ok_or("--marker-dir needs a value")?.into());
            }
            "--stderr" => flags.stderr = Some(args.next().ok_or("--stderr needs a value")?),
            "--exit-at-once" => flags.exit_at_once = true,
            "--never-initialize" => flags.never_initialize = true,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(flags)
}

fn main() -> std::process::ExitCode {
    let flags = match flags() {
        Ok(flags) => flags,
        Err(e) => {
            eprintln!("krad-mcp-fixture: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    if let Some(text) = &flags.stderr {
        eprintln!("{text}");
    }
    if flags.exit_at_once {
        eprintln!("krad-mcp-fixture: exiting at once, as asked");
        return std::process::ExitCode::from(7);
    }
    if flags.never_initialize {
        // Swallow the input and never answer; end when the client closes it.
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        return std::process::ExitCode::SUCCESS;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("krad-mcp-fixture: cannot start a runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let fixture = Raw(Fixture {
        marker_dir: flags.marker_dir,
    });
    let served = runtime.block_on(async move {
        let server = fixture
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| e.to_string())?;
        server.waiting().await.map_err(|e| e.to_string())?;
        Ok::<(), String>(())
    });
    match served {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("krad-mcp-fixture: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The server.
struct Fixture {
    marker_dir: Option<PathBuf>,
}

fn schema(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "echo",
            "Answers the text it is given",
            schema(json!({
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"]
            })),
        ),
        Tool::new(
            "fail",
            "A tool error carrying the message",
            schema(json!({"type": "object", "properties": {"message": {"type": "string"}}})),
        ),
        Tool::new(
            "slow",
            "Sleeps ms milliseconds, then answers",
            schema(json!({
                "type": "object",
                "properties": {"ms": {"type": "integer"}, "id": {"type": "string"}},
                "required": ["ms"]
            })),
        ),
        Tool::new(
            "crash",
            "Exits the server in the middle of the call",
            schema(json!({"type": "object", "properties": {"code": {"type": "integer"}}})),
        ),
        Tool::new(
            "big",
            "Answers one text item of the given size",
            schema(json!({
                "type": "object",
                "properties": {"bytes": {"type": "integer"}},
                "required": ["bytes"]
            })),
        ),
        Tool::new(
            "mixed",
            "Answers a text item and an image item",
            schema(json!({"type": "object"})),
        ),
        Tool::new(
            "annotated",
            "Answers annotated content, structuredContent and fields MCP does not define",
            schema(json!({"type": "object"})),
        ),
        Tool::new(
            "raw",
            "Answers its result argument as the call's result, whatever it is",
            schema(json!({"type": "object", "properties": {"result": {}}})),
        ),
    ]
}

/// The fixture, with the tools whose results are written as JSON: they are
/// answered here, everything else by the [`ServerHandler`].
struct Raw(Fixture);

impl Service<RoleServer> for Raw {
    async fn handle_request(
        &self,
        request: ClientRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        if let ClientRequest::CallToolRequest(call) = &request {
            let args = call.params.arguments.clone().unwrap_or_default();
            match call.params.name.as_ref() {
                "annotated" => {
                    return Ok(ServerResult::CustomResult(CustomResult::new(annotated())));
                }
                "raw" => {
                    let result = args.get("result").cloned().unwrap_or(Value::Null);
                    return Ok(ServerResult::CustomResult(CustomResult::new(result)));
                }
                _ => {}
            }
        }
        Service::handle_request(&self.0, request, context).await
    }

    async fn handle_notification(
        &self,
        notification: ClientNotification,
        context: NotificationContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Service::handle_notification(&self.0, notification, context).await
    }

    fn get_info(&self) -> ServerConfig {
        Service::get_info(&self.0)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Service::supported_protocol_versions(&self.0)
    }
}

fn text_result(text: impl Into<String>) -> CallToolResponse {
    CallToolResult::success(vec![ContentBlock::text(text)]).into()
}

impl Fixture {
    fn marker(&self, id: &str, what: &str) {
        if let Some(dir) = &self.marker_dir {
            let _ = std::fs::write(dir.join(format!("{id}.{what}")), what);
        }
    }

    async fn slow(
        &self,
        args: &JsonObject,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let ms = args
            .get("ms")
            .and_then(Value::as_u64)
            .ok_or_else(|| ErrorData::invalid_params("slow needs ms", None))?;
        let id = args
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or("slow")
            .to_owned();
        self.marker(&id, "started");
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(ms)) => {
                self.marker(&id, "completed");
                Ok(text_result(format!("slept {ms}")))
            }
            () = context.ct.cancelled() => {
                self.marker(&id, "cancelled");
                Err(ErrorData::internal_error("cancelled", None))
            }
        }
    }
}

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_server_info(
            Implementation::new("krad-mcp-fixture", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        match request.name.as_ref() {
            "echo" => Ok(text_result(
                args.get("text").and_then(Value::as_str).unwrap_or_default(),
            )),
            "fail" => Ok(CallToolResult::error(vec![ContentBlock::text(
                args.get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("it failed"),
            )])
            .into()),
            "slow" => self.slow(&args, context).await,
            "crash" => {
                let code = args.get("code").and_then(Value::as_i64).unwrap_or(3);
                eprintln!("krad-mcp-fixture: crashing with code {code}, as asked");
                std::process::exit(code as i32);
            }
            "big" => {
                let bytes = args.get("bytes").and_then(Value::as_u64).unwrap_or(0);
                Ok(text_result("x".repeat(bytes as usize)))
            }
            "mixed" => Ok(CallToolResult::success(vec![
                ContentBlock::text("a picture:"),
                ContentBlock::image("iVBORw0KGgo=", "image/png"),
            ])
            .into()),
            other => Err(ErrorData::invalid_params(
                format!("no tool {other:?}"),
                None,
            )),
        }
    }
}
