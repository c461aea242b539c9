//! The model double: a small HTTP/1.1 server on 127.0.0.1 that speaks the Anthropic
//! Messages API and the OpenAI Responses API (streaming SSE), so that the real Claude
//! Code and Codex CLI run offline. Tests script the main conversation's turns; the
//! CLIs' side requests (titles, token counts, model lists) get a harmless answer and
//! never consume the script.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// What the model does on one main-conversation request.
#[derive(Clone, Debug)]
pub(crate) enum Turn {
    /// Plain assistant text.
    Reply(String),
    /// A tool call: Claude's `tool_use` block, Codex's `function_call` item; `input`
    /// is the tool's arguments (for Claude's `Bash`: `{"command": …, "description": …}`,
    /// for Codex's `exec_command`: `{"cmd": …}`).
    ToolCall { name: String, input: Value },
    /// An API error: this HTTP status with the provider's JSON error body.
    Error { status: u16, message: String },
    /// The reply streamed over `secs` seconds, a delta (or a ping) every 0.25 s.
    Slow { text: String, secs: u64 },
    /// Headers and the first event, then nothing until the double is dropped.
    Hang,
}

impl Turn {
    /// A plain text reply.
    pub(crate) fn reply(text: impl Into<String>) -> Turn {
        Turn::Reply(text.into())
    }

    /// A tool call with JSON arguments.
    pub(crate) fn tool(name: impl Into<String>, input: Value) -> Turn {
        Turn::ToolCall {
            name: name.into(),
            input,
        }
    }

    /// An API error with this status.
    pub(crate) fn error(status: u16, message: impl Into<String>) -> Turn {
        Turn::Error {
            status,
            message: message.into(),
        }
    }
}

/// The tokens the double says a main request used: distinct for each (its
/// number `n` from 1), so that a sum shows which were counted. Anthropic's
/// `input` excludes the cache's; OpenAI's includes `cached`. Side requests
/// (titles) say [`SIDE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SentUsage {
    pub input: u64,
    pub output: u64,
    pub cache_write: u64,
    pub cache_read: u64,
}

impl SentUsage {
    /// What main request `n` (from 1) is told it used.
    pub(crate) fn of(api_openai: bool, n: u64) -> SentUsage {
        if api_openai {
            SentUsage {
                input: 2000 + 10 * n,
                output: 60 + n,
                cache_write: 0,
                cache_read: 500 + n,
            }
        } else {
            SentUsage {
                input: 1000 + 10 * n,
                output: 40 + n,
                cache_write: 200 + n,
                cache_read: 300 + n,
            }
        }
    }
}

/// What side requests are told they used.
pub(super) const SIDE: SentUsage = SentUsage {
    input: 7,
    output: 3,
    cache_write: 0,
    cache_read: 0,
};

/// Which API a request speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Api {
    Anthropic,
    OpenAi,
}

#[derive(Default)]
struct State {
    script: VecDeque<Turn>,
    /// Main-conversation request bodies, in arrival order.
    main: Vec<Value>,
    /// When each main request arrived and when its answer was written whole.
    main_times: Vec<(Instant, Option<Instant>)>,
    /// Every request as `(method path, body)`, for diagnostics.
    all: Vec<(String, Value)>,
    closed: bool,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    /// `KRAD_DOUBLE_LOG`: a directory where every request is written, for exploring.
    log: Option<PathBuf>,
    ids: AtomicU64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Waits at most `left` for a change to the state, then holds it again.
    fn wait_changed<'s>(
        &self,
        state: MutexGuard<'s, State>,
        left: Duration,
    ) -> MutexGuard<'s, State> {
        self.changed
            .wait_timeout(state, left)
            .unwrap_or_else(|e| e.into_inner())
            .0
    }
}

/// A running model double; dropping it stops it (and ends every hanging stream).
pub(crate) struct ModelDouble {
    shared: Arc<Shared>,
    addr: SocketAddr,
}

impl ModelDouble {
    /// Starts the double on 127.0.0.1 on a port the system picks.
    pub(crate) fn start() -> ModelDouble {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            state: Mutex::default(),
            changed: Condvar::new(),
            log: std::env::var_os("KRAD_DOUBLE_LOG").map(PathBuf::from),
            ids: AtomicU64::new(0),
        });
        let accept = shared.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if accept.lock().closed {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let conn = accept.clone();
                std::thread::spawn(move || serve(&conn, stream));
            }
        });
        ModelDouble { shared, addr }
    }

    /// `http://127.0.0.1:PORT`.
    pub(crate) fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Appends turns to the script that main-conversation requests consume in order;
    /// once it is empty they get the reply "ok".
    pub(crate) fn script(&self, turns: Vec<Turn>) {
        self.shared.lock().script.extend(turns);
    }

    /// Drops the turns no request has consumed yet, and scripts these.
    pub(crate) fn rescript(&self, turns: Vec<Turn>) {
        self.shared.lock().script = turns.into();
    }

    /// The main-conversation request bodies received so far.
    pub(crate) fn requests(&self) -> Vec<Value> {
        self.shared.lock().main.clone()
    }

    /// When the `n`th main request (from 1) came, and when it was answered whole.
    pub(crate) fn times(&self, n: usize) -> Option<(Instant, Option<Instant>)> {
        self.shared
            .lock()
            .main_times
            .get(n.checked_sub(1)?)
            .copied()
    }

    /// Waits until the `n`th main request (from 1) was answered whole; returns when
    /// it arrived and when it was answered.
    pub(crate) fn wait_answered(&self, n: usize, timeout: Duration) -> (Instant, Instant) {
        let until = Instant::now() + timeout;
        let mut state = self.shared.lock();
        loop {
            if let Some((start, Some(end))) = state.main_times.get(n - 1) {
                return (*start, *end);
            }
            let left = until
                .checked_duration_since(Instant::now())
                .unwrap_or_else(|| {
                    let got: Vec<String> = state.main.iter().map(last_user_text).collect();
                    panic!(
                        "main request {n} not answered within {timeout:?}; {} came: {got:#?}",
                        got.len()
                    )
                });
            state = self.shared.wait_changed(state, left);
        }
    }

    /// Every request so far as `"METHOD /path"` and its body (side requests too).
    pub(crate) fn all_requests(&self) -> Vec<(String, Value)> {
        self.shared.lock().all.clone()
    }

    /// Waits until a main request's last user message contains `text`; returns that
    /// request's body.
    pub(crate) fn wait_for_user_text(&self, text: &str, timeout: Duration) -> Value {
        self.wait_for(timeout, |body| last_user_text(body).contains(text))
            .unwrap_or_else(|| {
                panic!(
                    "no main request with {text:?} in its last user message within {timeout:?}; \
                     received: {:#?}",
                    self.all_requests()
                )
            })
    }

    /// Waits until a main request satisfies `check`; returns its body, or None on timeout.
    pub(crate) fn wait_for(
        &self,
        timeout: Duration,
        check: impl Fn(&Value) -> bool,
    ) -> Option<Value> {
        let until = Instant::now() + timeout;
        let mut state = self.shared.lock();
        loop {
            if let Some(body) = state.main.iter().find(|b| check(b)) {
                return Some(body.clone());
            }
            let left = until.checked_duration_since(Instant::now())?;
            state = self.shared.wait_changed(state, left);
        }
    }
}

impl Drop for ModelDouble {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.changed.notify_all();
        // Wakes the accept loop so that it sees `closed`.
        let _ = TcpStream::connect(self.addr);
    }
}

/// All the text of a request's last user message (Anthropic `messages`, OpenAI `input`).
pub(crate) fn last_user_text(body: &Value) -> String {
    let items = body["messages"]
        .as_array()
        .or_else(|| body["input"].as_array());
    let last = items.and_then(|items| items.iter().rev().find(|m| m["role"] == "user"));
    let mut out = String::new();
    if let Some(message) = last {
        collect_text(&message["content"], &mut out);
    }
    out
}

fn collect_text(value: &Value, out: &mut String) {
    match value {
        Value::String(s) => {
            out.push_str(s);
            out.push('\n');
        }
        Value::Array(items) => items.iter().for_each(|v| collect_text(v, out)),
        Value::Object(map) => ["text", "content"]
            .iter()
            .filter_map(|k| map.get(*k))
            .for_each(|v| collect_text(v, out)),
        _ => {}
    }
}

/// Whether a request belongs to the main conversation: it offers the agent's tools.
/// The CLIs' side requests offer none: Claude Code's session title (no tools,
/// `output_config.format` a JSON schema) and Codex's hidden title turn (`tools: []`,
/// `text.format` a JSON schema, its own thread id).
fn is_main(body: &Value) -> bool {
    body["tools"].as_array().is_some_and(|t| !t.is_empty())
}

struct Request {
    method: String,
    path: String,
    body: Value,
}

fn serve(shared: &Shared, stream: TcpStream) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut stream = stream;
    // Keep-alive: answer requests until the client closes or an answer needs a close.
    while let Some(request) = read_request(&mut reader) {
        let id = shared.next_id();
        if let Some(dir) = &shared.log {
            let name = format!("{}{}", request.method, request.path).replace(['/', '?'], "_");
            let _ = std::fs::create_dir_all(dir);
            let _ = std::fs::write(
                dir.join(format!("{id:03}-{name}.json")),
                serde_json::to_vec_pretty(&request.body).unwrap_or_default(),
            );
        }
        let (keep, main, last_write) = answer(shared, &mut stream, &request, id);
        if let Some(index) = main {
            let mut state = shared.lock();
            if let Some(times) = state.main_times.get_mut(index) {
                // When its last bytes started on their way: the CLI may act on
                // them (and report) before this thread runs again.
                times.1 = Some(last_write.unwrap_or_else(Instant::now));
            }
            shared.changed.notify_all();
        }
        if !keep {
            break;
        }
    }
}

/// Reads one request; None when the connection is over or not HTTP.
fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_owned();
    let path = parts.next()?.to_owned();
    let mut length = 0;
    let mut chunked = false;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).ok()? == 0 {
            return None;
        }
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        let value = value.trim();
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.parse().ok()?,
            "transfer-encoding" => chunked = value.eq_ignore_ascii_case("chunked"),
            _ => {}
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).ok()?;
            let size = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).ok()?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else {
        body.resize(length, 0);
        reader.read_exact(&mut body).ok()?;
    }
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    Some(Request { method, path, body })
}

/// Answers one request; returns whether the connection may serve another, the
/// index of the main request it was, and when its last write began.
fn answer(
    shared: &Shared,
    stream: &mut TcpStream,
    request: &Request,
    id: u64,
) -> (bool, Option<usize>, Option<Instant>) {
    let mut index = None;
    let mut last_write = None;
    let keep = answer_inner(shared, stream, request, id, &mut index, &mut last_write);
    (keep, index, last_write)
}

fn answer_inner(
    shared: &Shared,
    stream: &mut TcpStream,
    request: &Request,
    id: u64,
    index: &mut Option<usize>,
    last_write: &mut Option<Instant>,
) -> bool {
    let path = request.path.split('?').next().unwrap_or_default();
    let api = if path.ends_with("/messages") || path.contains("/messages/") {
        Api::Anthropic
    } else {
        Api::OpenAi
    };
    let main = is_main(&request.body);
    let turn = {
        let mut state = shared.lock();
        state.all.push((
            format!("{} {}", request.method, request.path),
            request.body.clone(),
        ));
        let turn = if main && matches!(path, "/v1/messages" | "/v1/responses") {
            state.main.push(request.body.clone());
            state.main_times.push((Instant::now(), None));
            *index = Some(state.main.len() - 1);
            state.script.pop_front()
        } else {
            None
        };
        shared.changed.notify_all();
        turn
    };
    if request.method == "HEAD" {
        // Claude Code's warm-up of its connection.
        return stream
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
            .is_ok();
    }
    match path {
        "/v1/messages" | "/v1/responses" => {}
        "/v1/messages/count_tokens" => {
            return json_answer(stream, 200, &json!({"input_tokens": 42}));
        }
        "/v1/models" => {
            let data = json!({"object": "list", "data": [], "models": []});
            return json_answer(stream, 200, &data);
        }
        _ => {
            let body = json!({"type": "error", "error": {"type": "not_found_error", "message": "not here"}});
            return json_answer(stream, 404, &body);
        }
    }
    let model = request.body["model"]
        .as_str()
        .unwrap_or("double")
        .to_owned();
    let usage = match *index {
        Some(i) => SentUsage::of(api == Api::OpenAi, i as u64 + 1),
        None => SIDE,
    };
    let turn = turn.unwrap_or_else(|| {
        // Side requests that want JSON (both CLIs' title generation) get a title.
        let format = &request.body["output_config"]["format"];
        let format = if format.is_null() {
            &request.body["text"]["format"]
        } else {
            format
        };
        if format["type"] == "json_schema" {
            Turn::reply(r#"{"title":"Model double session"}"#)
        } else {
            Turn::reply("ok")
        }
    });
    *last_write = Some(Instant::now());
    if let Turn::Error { status, message } = &turn {
        // Claude Code's SDK honours `x-should-retry`; Codex is told not to retry in its
        // provider config: one scripted error is one error the user sees.
        let body = error_body(api, *status, message).to_string();
        let head = format!(
            "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
             x-should-retry: false\r\nrequest-id: req_double{id}\r\n\r\n",
            reason(*status),
            body.len()
        );
        return stream.write_all(head.as_bytes()).is_ok()
            && stream.write_all(body.as_bytes()).is_ok();
    }
    let reply = Reply {
        turn: &turn,
        model: &model,
        id,
        usage,
    };
    if request.body["stream"] != true {
        let body = match api {
            Api::Anthropic => anthropic_message(&reply),
            Api::OpenAi => openai_response(&reply, "completed"),
        };
        return json_answer(stream, 200, &body);
    }
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\
                connection: close\r\n\r\n";
    if stream.write_all(head.as_bytes()).is_err() {
        return false;
    }
    let mut sse = Sse {
        stream,
        api,
        last_write: None,
    };
    let _ = match api {
        Api::Anthropic => stream_anthropic(shared, &mut sse, &reply),
        Api::OpenAi => stream_openai(shared, &mut sse, &reply),
    };
    *last_write = sse.last_write.or(*last_write);
    false
}

fn json_answer(stream: &mut TcpStream, status: u16, body: &Value) -> bool {
    let body = body.to_string();
    let head = format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         request-id: req_double\r\n\r\n",
        reason(status),
        body.len()
    );
    stream.write_all(head.as_bytes()).is_ok() && stream.write_all(body.as_bytes()).is_ok()
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

fn error_body(api: Api, status: u16, message: &str) -> Value {
    let kind = match status {
        400 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    match api {
        Api::Anthropic => json!({"type": "error", "error": {"type": kind, "message": message}}),
        Api::OpenAi => {
            json!({"error": {"message": message, "type": kind, "param": null, "code": null}})
        }
    }
}

/// An SSE stream on a connection that closes when the answer is over.
struct Sse<'a> {
    stream: &'a mut TcpStream,
    api: Api,
    /// When the last event began to be written.
    last_write: Option<Instant>,
}

impl Sse<'_> {
    fn event(&mut self, data: Value) -> std::io::Result<()> {
        let name = data["type"].as_str().unwrap_or("message");
        let frame = format!("event: {name}\ndata: {data}\n\n");
        self.last_write = Some(Instant::now());
        self.stream.write_all(frame.as_bytes())?;
        self.stream.flush()
    }

    /// Something that keeps the stream alive without saying anything.
    fn keepalive(&mut self) -> std::io::Result<()> {
        match self.api {
            Api::Anthropic => self.event(json!({"type": "ping"})),
            Api::OpenAi => self.stream.write_all(b": keepalive\n\n"),
        }
    }

    /// Streams `text` as deltas: at once, or spread over `secs` seconds.
    fn text(
        &mut self,
        text: &str,
        secs: u64,
        mut delta: impl FnMut(&str) -> Value,
    ) -> std::io::Result<()> {
        if secs == 0 {
            return self.event(delta(text));
        }
        let tick = Duration::from_millis(250);
        let ticks = (secs * 4).max(1) as usize;
        let chars: Vec<char> = text.chars().collect();
        let mut sent = 0;
        for i in 1..=ticks {
            std::thread::sleep(tick);
            let upto = chars.len() * i / ticks;
            if upto > sent {
                let piece: String = chars[sent..upto].iter().collect();
                self.event(delta(&piece))?;
                sent = upto;
            } else {
                self.keepalive()?;
            }
        }
        Ok(())
    }

    /// Keeps the stream open, saying nothing useful, until the double is dropped.
    fn hang(&mut self, shared: &Shared) -> std::io::Result<()> {
        let mut state = shared.lock();
        while !state.closed {
            drop(state);
            self.keepalive()?;
            state = shared.lock();
            if state.closed {
                break;
            }
            state = shared.wait_changed(state, Duration::from_secs(5));
        }
        Ok(())
    }
}

/// Anthropic's usage object: `output` tokens so far.
fn usage_anthropic(usage: SentUsage, output: u64) -> Value {
    json!({"input_tokens": usage.input, "output_tokens": output,
           "cache_creation_input_tokens": usage.cache_write,
           "cache_read_input_tokens": usage.cache_read})
}

/// The blocks of an Anthropic answer for a (non-error) turn.
fn anthropic_blocks(turn: &Turn, id: u64) -> (Vec<Value>, &'static str) {
    match turn {
        Turn::ToolCall { name, input } => (
            vec![
                json!({"type": "tool_use", "id": format!("toolu_double{id}"), "name": name, "input": input}),
            ],
            "tool_use",
        ),
        Turn::Reply(text) | Turn::Slow { text, .. } => {
            (vec![json!({"type": "text", "text": text})], "end_turn")
        }
        Turn::Hang | Turn::Error { .. } => (vec![json!({"type": "text", "text": ""})], "end_turn"),
    }
}

/// What one answer of the double says: its turn, as which model, its number
/// and the usage it reports.
#[derive(Clone, Copy)]
struct Reply<'a> {
    turn: &'a Turn,
    model: &'a str,
    id: u64,
    usage: SentUsage,
}

fn anthropic_message(reply: &Reply<'_>) -> Value {
    let (id, usage) = (reply.id, reply.usage);
    let (content, stop) = anthropic_blocks(reply.turn, id);
    json!({"id": format!("msg_double{id}"), "type": "message", "role": "assistant",
           "model": reply.model, "content": content, "stop_reason": stop, "stop_sequence": null,
           "usage": usage_anthropic(usage, usage.output)})
}

fn stream_anthropic(shared: &Shared, sse: &mut Sse<'_>, reply: &Reply<'_>) -> std::io::Result<()> {
    let Reply {
        turn,
        model,
        id,
        usage,
    } = *reply;
    sse.event(json!({"type": "message_start", "message": {
        "id": format!("msg_double{id}"), "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage_anthropic(usage, 1)}}))?;
    if let Turn::Hang = turn {
        return sse.hang(shared);
    }
    let (blocks, stop) = anthropic_blocks(turn, id);
    let secs = match turn {
        Turn::Slow { secs, .. } => *secs,
        _ => 0,
    };
    for (index, block) in blocks.iter().enumerate() {
        if block["type"] == "tool_use" {
            let mut start = block.clone();
            start["input"] = json!({});
            sse.event(
                json!({"type": "content_block_start", "index": index, "content_block": start}),
            )?;
            sse.event(json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "input_json_delta", "partial_json": block["input"].to_string()}}))?;
        } else {
            sse.event(json!({"type": "content_block_start", "index": index,
                "content_block": {"type": "text", "text": ""}}))?;
            let text = block["text"].as_str().unwrap_or_default();
            sse.text(text, secs, |piece| {
                json!({"type": "content_block_delta", "index": index,
                       "delta": {"type": "text_delta", "text": piece}})
            })?;
        }
        sse.event(json!({"type": "content_block_stop", "index": index}))?;
    }
    sse.event(
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
        "usage": usage_anthropic(usage, usage.output)}),
    )?;
    sse.event(json!({"type": "message_stop"}))
}

/// The output item of an OpenAI answer for a (non-error) turn.
fn openai_item(turn: &Turn, id: u64, status: &str) -> Value {
    match turn {
        Turn::ToolCall { name, input } => json!({
            "type": "function_call", "id": format!("fc_double{id}"), "call_id": format!("call_double{id}"),
            "name": name, "arguments": input.to_string(), "status": status}),
        Turn::Reply(text) | Turn::Slow { text, .. } => json!({
            "type": "message", "id": format!("msg_double{id}"), "role": "assistant", "status": status,
            "content": [{"type": "output_text", "text": text, "annotations": []}]}),
        Turn::Hang | Turn::Error { .. } => json!({
            "type": "message", "id": format!("msg_double{id}"), "role": "assistant", "status": status,
            "content": []}),
    }
}

fn openai_response(reply: &Reply<'_>, status: &str) -> Value {
    let (id, usage) = (reply.id, reply.usage);
    let output = if status == "completed" {
        vec![openai_item(reply.turn, id, "completed")]
    } else {
        vec![]
    };
    json!({"id": format!("resp_double{id}"), "object": "response", "created_at": 0, "status": status,
           "model": reply.model, "output": output,
           "usage": {"input_tokens": usage.input,
                     "input_tokens_details": {"cached_tokens": usage.cache_read},
                     "output_tokens": usage.output,
                     "output_tokens_details": {"reasoning_tokens": 0},
                     "total_tokens": usage.input + usage.output}})
}

fn stream_openai(shared: &Shared, sse: &mut Sse<'_>, reply: &Reply<'_>) -> std::io::Result<()> {
    let (turn, id) = (reply.turn, reply.id);
    sse.event(json!({"type": "response.created",
        "response": openai_response(reply, "in_progress")}))?;
    if let Turn::Hang = turn {
        return sse.hang(shared);
    }
    let mut item = openai_item(turn, id, "in_progress");
    if item["type"] == "message" {
        item["content"] = json!([]);
    }
    sse.event(json!({"type": "response.output_item.added", "output_index": 0, "item": item}))?;
    if let Turn::Reply(text) | Turn::Slow { text, .. } = turn {
        let secs = match turn {
            Turn::Slow { secs, .. } => *secs,
            _ => 0,
        };
        let item_id = format!("msg_double{id}");
        sse.event(
            json!({"type": "response.content_part.added", "item_id": item_id, "output_index": 0,
            "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}),
        )?;
        sse.text(text, secs, |piece| {
            json!({"type": "response.output_text.delta", "item_id": item_id, "output_index": 0,
                   "content_index": 0, "delta": piece})
        })?;
    }
    sse.event(
        json!({"type": "response.output_item.done", "output_index": 0,
        "item": openai_item(turn, id, "completed")}),
    )?;
    sse.event(json!({"type": "response.completed",
        "response": openai_response(reply, "completed")}))
}
