//! The durable facet: `krad serve` with a `[durable]` table answering HTTP/1.1
//! under `/session/v1` on its private Unix socket, driven the way Collie drives
//! it — one exchange per connection (`Connection: close`), `X-Collie-Session: 1`
//! on every call after the first hello.
//!
//! Three requests of the app, against two baselines the harness starts as
//! processes of their own on the same tokio runtime, each on a Unix socket:
//!
//! * the steady poll, `GET /snapshot` with a matching `If-None-Match` (304);
//! * the full snapshot of `--panes` agents (`sleep 3600`, exec profile), 200;
//! * an incremental read of a pane's events with nothing new
//!   (`GET /pane/p<id>/events?after=<cursor>&epoch=<epoch>`);
//! * `baseline-raw`: accept, read the request head, write the bytes of the app's
//!   own 304 answer, close — the physical limit of one exchange per connection;
//! * `baseline-hyper`: hyper 1's HTTP/1.1 server set up as the facet sets it up
//!   (same builder options, a `service_fn`) answering every request with a fixed
//!   304 and the app's ETag — the HTTP stack the facet stands on, without it.
//!
//! Every repeat runs the five back to back at 1 and 8 clients; besides
//! throughput and latency it reports the server's own CPU time per request
//! (`/proc/PID/stat`), which is what an ETag or a cursor saves.

use std::convert::Infallible;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{ETAG, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream as AsyncUnixStream};

use crate::Ctx;
use crate::krad::Krad;
use crate::load::{Run, closed_loop_unix};
use crate::util::{Summary, cpu_time};

/// Client counts of every point.
const CLIENTS: [usize; 2] = [1, 8];
/// The warm-up of each server before a client count's repeats, not counted.
const WARM_UP: Duration = Duration::from_millis(200);
/// How long the snapshot's ETag must stay the same before measuring.
const SETTLED: Duration = Duration::from_secs(2);

/// The kinds of baseline HTTP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum HttpKind {
    /// Read the head, write fixed bytes, close.
    Raw,
    /// hyper 1, HTTP/1.1, a fixed 304.
    Hyper,
}

/// One HTTP answer, as read to EOF.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// The whole answer, head and body.
    raw: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> anyhow::Result<Value> {
        serde_json::from_slice(&self.body).with_context(|| {
            format!(
                "status {}, body {:?}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

/// A GET request as Collie writes it: the version header (but on the first
/// hello), `Connection: close`, and `extra` headers.
fn get(path: &str, versioned: bool, extra: &[(&str, &str)]) -> Vec<u8> {
    let mut head = format!("GET /session/v1{path} HTTP/1.1\r\nHost: durable\r\n");
    if versioned {
        head.push_str("X-Collie-Session: 1\r\n");
    }
    for (name, value) in extra {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("Connection: close\r\n\r\n");
    head.into_bytes()
}

/// One exchange on a new connection.
fn exchange(socket: &Path, request: &[u8]) -> anyhow::Result<Answer> {
    let mut stream = UnixStream::connect(socket)
        .with_context(|| format!("cannot connect to {}", socket.display()))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    stream.write_all(request)?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        bail!("no HTTP answer: {:?}", String::from_utf8_lossy(&raw));
    };
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let body = raw[end + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("no status line in {head:?}"))?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    Ok(Answer {
        status,
        headers,
        body,
        raw,
    })
}

/// The snapshot's ETag now.
fn etag(socket: &Path) -> anyhow::Result<String> {
    let answer = exchange(socket, &get("/snapshot", true, &[]))?;
    anyhow::ensure!(
        answer.status == 200,
        "the snapshot answered {}: {}",
        answer.status,
        String::from_utf8_lossy(&answer.body)
    );
    answer
        .header("etag")
        .map(str::to_owned)
        .context("the snapshot has no ETag")
}

/// Waits until the snapshot's ETag stays the same for [`SETTLED`] (the agents
/// have started and their states settled), and returns it.
fn settled_etag(socket: &Path) -> anyhow::Result<String> {
    let until = Instant::now() + Duration::from_secs(60);
    let mut tag = etag(socket)?;
    let mut since = Instant::now();
    while since.elapsed() < SETTLED {
        anyhow::ensure!(
            Instant::now() < until,
            "the snapshot kept changing for 60 s (last ETag {tag})"
        );
        std::thread::sleep(Duration::from_millis(200));
        let now = etag(socket)?;
        if now != tag {
            tag = now;
            since = Instant::now();
        }
    }
    Ok(tag)
}

/// How many processes the app's caller check reads per connection: the
/// facet walks the caller's parents (`/proc/PID/stat`) until it finds itself
/// or pid 1, and the harness is the app's parent, not its descendant.
fn caller_depth() -> usize {
    let mut current = std::process::id();
    let mut depth = 0;
    while current > 1 && depth < 1000 {
        depth += 1;
        let stat = std::fs::read_to_string(format!("/proc/{current}/stat")).unwrap_or_default();
        let parent = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse().ok());
        match parent {
            Some(parent) => current = parent,
            None => break,
        }
    }
    depth
}

/// Every pane of a snapshot.
fn pane_count(snapshot: &Value) -> usize {
    snapshot["workspaces"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|w| w["tabs"].as_array().into_iter().flatten())
        .flat_map(|t| t["panes"].as_array().into_iter().flatten())
        .count()
}

/// A baseline HTTP server process on a Unix socket of its own.
struct HttpBaseline {
    child: Child,
    socket: PathBuf,
    pid: u32,
}

impl HttpBaseline {
    /// Starts `krad-bench durable-baseline` answering `etag` (hyper) or the
    /// bytes of `reply_file` (raw) on a socket in `dir`.
    fn start(
        kind: HttpKind,
        dir: &Path,
        etag: &str,
        reply_file: &Path,
    ) -> anyhow::Result<HttpBaseline> {
        let (name, socket) = match kind {
            HttpKind::Raw => ("raw", dir.join("raw.sock")),
            HttpKind::Hyper => ("hyper", dir.join("hyper.sock")),
        };
        let (child, first) = crate::util::start_server(
            Command::new(std::env::current_exe()?)
                .args(["durable-baseline", "--kind", name, "--etag", etag])
                .arg("--socket")
                .arg(&socket)
                .arg("--reply-file")
                .arg(reply_file),
        )?;
        let pid = child.id();
        let baseline = HttpBaseline { child, socket, pid };
        anyhow::ensure!(
            first.trim() == "ready",
            "the {name} baseline printed {first:?}"
        );
        Ok(baseline)
    }
}

impl Drop for HttpBaseline {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// Runs a baseline server until killed: binds `socket`, prints `ready`, serves.
pub(crate) fn serve_baseline(
    kind: HttpKind,
    socket: &Path,
    etag: &str,
    reply_file: &Path,
) -> anyhow::Result<()> {
    let reply: Arc<[u8]> = std::fs::read(reply_file)
        .with_context(|| format!("reading {}", reply_file.display()))?
        .into();
    let etag = HeaderValue::from_str(etag).context("not an ETag")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let _ = std::fs::remove_file(socket);
        let listener = UnixListener::bind(socket)
            .with_context(|| format!("cannot listen on {}", socket.display()))?;
        println!("ready");
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            match kind {
                HttpKind::Raw => {
                    tokio::spawn(raw_conn(stream, reply.clone()));
                }
                HttpKind::Hyper => {
                    tokio::spawn(hyper_conn(stream, etag.clone()));
                }
            }
        }
    })
}

/// Reads up to the end of the request's head, writes `reply`, closes.
async fn raw_conn(mut stream: AsyncUnixStream, reply: Arc<[u8]>) {
    let mut buf = Vec::with_capacity(512);
    loop {
        if buf.len() > 64 * 1024 {
            return;
        }
        match stream.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if memchr::memmem::find(&buf, b"\r\n\r\n").is_some() {
            break;
        }
    }
    let _ = stream.write_all(&reply).await;
}

/// One hyper HTTP/1.1 connection, set up as the facet's, answering 304.
async fn hyper_conn(stream: AsyncUnixStream, etag: HeaderValue) {
    let service = service_fn(move |_request| {
        let etag = etag.clone();
        async move {
            let mut reply = Response::new(Full::new(Bytes::new()));
            *reply.status_mut() = StatusCode::NOT_MODIFIED;
            reply.headers_mut().insert(ETAG, etag);
            Ok::<_, Infallible>(reply)
        }
    });
    // Every option the facet's connections are built with
    // (`krad-durable/src/server.rs`), so that only the facet differs.
    let _ = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(10))
        .keep_alive(true)
        .half_close(true)
        .max_buf_size(64 * 1024)
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

/// One thing measured: a server and the request sent to it.
struct Target {
    label: &'static str,
    socket: PathBuf,
    request: Vec<u8>,
    expect: &'static [u8],
    /// The server's pid, for its CPU time.
    pid: u32,
    /// The length of one whole answer.
    answer_bytes: usize,
}

/// One run of the load generator and the server's CPU time meanwhile.
struct Measured {
    run: Run,
    /// Server CPU time (user + system) per answered request, µs.
    cpu_us: f64,
}

fn measure(target: &Target, clients: usize, duration: Duration) -> Measured {
    let before = cpu_time(target.pid);
    let run = closed_loop_unix(
        &target.socket,
        &target.request,
        target.expect,
        clients,
        duration,
    );
    let spent = cpu_time(target.pid).saturating_sub(before);
    let cpu_us = spent.as_secs_f64() * 1e6 / run.answered.max(1) as f64;
    Measured { run, cpu_us }
}

const HEADER: &str = "| clients | server and request | answer bytes | req/s median (min–max) | p50 µs | p99 µs | server CPU µs/req | errors | steal % | busy % |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|";

fn row(clients: usize, target: &Target, runs: &[Measured]) -> String {
    let of = |f: &dyn Fn(&Measured) -> f64| Summary::of(&runs.iter().map(f).collect::<Vec<_>>());
    let per_sec = of(&|m| m.run.per_sec);
    let p50 = of(&|m| f64::from(m.run.p50_us));
    let p99 = of(&|m| f64::from(m.run.p99_us));
    let cpu = of(&|m| m.cpu_us);
    let steal = of(&|m| m.run.cpu.steal_pct);
    let busy = of(&|m| m.run.cpu.busy_pct);
    let errors: u64 = runs.iter().map(|m| m.run.errors).sum();
    format!(
        "| {clients} | {} | {} | {} | {:.0} | {:.0} | {} | {errors} | {:.1} | {:.0} |",
        target.label,
        target.answer_bytes,
        per_sec.show(0),
        p50.median,
        p99.median,
        cpu.show(1),
        steal.median,
        busy.median
    )
}

/// Per back-to-back repeat, `a / b` of `value`, summarized.
fn ratios(a: &[Measured], b: &[Measured], value: fn(&Measured) -> f64) -> Summary {
    Summary::of(
        &a.iter()
            .zip(b)
            .map(|(a, b)| value(a) / value(b).max(1e-9))
            .collect::<Vec<_>>(),
    )
}

fn throughput(m: &Measured) -> f64 {
    m.run.per_sec
}

fn server_cpu(m: &Measured) -> f64 {
    m.cpu_us
}

/// The app with the facet on a socket in `dir`, `panes` agents, and what a
/// client learned of it: the settled ETag, the epoch, a pane and its cursor.
struct App {
    krad: Krad,
    socket: PathBuf,
    etag: String,
    epoch: String,
    pane: u64,
    cursor: u64,
}

fn start_app(ctx: &Ctx, dir: &Path) -> anyhow::Result<App> {
    let socket = dir.join("facet").join("durable.sock");
    anyhow::ensure!(
        socket.as_os_str().len() <= 103,
        "the socket path {} is too long for a Unix socket",
        socket.display()
    );
    let config = format!(
        "[durable]\nname = \"krad-bench\"\nsocket = {}\n",
        json!(socket.to_string_lossy())
    );
    let krad = Krad::start_config(&ctx.krad, &[], Some(&config))?;
    // Collie's first hello carries no version header.
    let hello = exchange(&socket, &get("/hello", false, &[]))?;
    anyhow::ensure!(
        hello.status == 200,
        "hello answered {}",
        String::from_utf8_lossy(&hello.raw)
    );
    let hello = hello.json()?;
    anyhow::ensure!(hello["ready"] == true, "the facet is not ready: {hello}");
    let epoch = hello["epoch"]
        .as_str()
        .context("hello has no epoch")?
        .to_owned();
    let mut pane = None;
    for _ in 0..ctx.panes {
        let id = krad.spawn_exec(&["sleep", "3600"])?;
        pane.get_or_insert(id);
    }
    let pane = pane.context("--panes must be at least 1")?;
    let etag = settled_etag(&socket)?;
    let snapshot = exchange(&socket, &get("/snapshot", true, &[]))?.json()?;
    anyhow::ensure!(
        pane_count(&snapshot) == ctx.panes,
        "the snapshot shows {} panes, not {}",
        pane_count(&snapshot),
        ctx.panes
    );
    let first = exchange(&socket, &get(&format!("/pane/p{pane}/events"), true, &[]))?.json()?;
    let cursor = first["cursor"]
        .as_u64()
        .with_context(|| format!("the events have no cursor: {first}"))?;
    Ok(App {
        krad,
        socket,
        etag,
        epoch,
        pane,
        cursor,
    })
}

impl App {
    fn events_path(&self) -> String {
        format!(
            "/pane/p{}/events?after={}&epoch={}",
            self.pane, self.cursor, self.epoch
        )
    }

    /// Checks that the incremental read has nothing new and the snapshot is
    /// unchanged (what every request of the run assumes).
    fn check_quiet(&self) -> anyhow::Result<()> {
        let read = exchange(&self.socket, &get(&self.events_path(), true, &[]))?.json()?;
        anyhow::ensure!(
            read["reset"] == false && read["events"].as_array().is_some_and(Vec::is_empty),
            "the incremental read is not empty: {read}"
        );
        let now = etag(&self.socket)?;
        anyhow::ensure!(
            now == self.etag,
            "the snapshot changed: {} became {now}",
            self.etag
        );
        Ok(())
    }
}

/// The durable facet against its baselines.
pub(crate) fn durable(ctx: &Ctx) -> anyhow::Result<()> {
    let started = Instant::now();
    let dir = tempfile::Builder::new().prefix("kb").tempdir()?;
    let app = start_app(ctx, dir.path())?;
    let requests = AppRequests::of(&app)?;
    let reply_file = dir.path().join("304.http");
    std::fs::write(&reply_file, &requests.not_modified)?;
    let raw = HttpBaseline::start(HttpKind::Raw, dir.path(), &app.etag, &reply_file)?;
    let hyper = HttpBaseline::start(HttpKind::Hyper, dir.path(), &app.etag, &reply_file)?;
    let targets = targets(&app, &raw, &hyper, requests)?;
    let run = ctx.durable_run();
    ctx.out(&intro(ctx, &app, run));
    let notes = measure_all(ctx, &targets, run);
    app.check_quiet()?;
    ctx.out(
        "\nThroughput ratios per back-to-back repeat (and the server's CPU time per request):\n",
    );
    for note in notes {
        ctx.out(&note);
    }
    ctx.out(&format!(
        "\nThe whole benchmark took {:.0} s.\n",
        started.elapsed().as_secs_f64()
    ));
    Ok(())
}

/// The app's three requests, and the whole answer (or its length) of each.
struct AppRequests {
    /// The snapshot with the settled ETag in `If-None-Match`.
    poll: Vec<u8>,
    /// The poll's answer, a 304.
    not_modified: Vec<u8>,
    full: Vec<u8>,
    full_len: usize,
    events: Vec<u8>,
    events_len: usize,
}

impl AppRequests {
    /// Makes the requests and sends each once; the poll must answer 304.
    fn of(app: &App) -> anyhow::Result<AppRequests> {
        let poll = get("/snapshot", true, &[("If-None-Match", &app.etag)]);
        let full = get("/snapshot", true, &[]);
        let events = get(&app.events_path(), true, &[]);
        let not_modified = exchange(&app.socket, &poll)?;
        anyhow::ensure!(
            not_modified.status == 304,
            "the poll answered {}",
            String::from_utf8_lossy(&not_modified.raw)
        );
        let full_len = exchange(&app.socket, &full)?.raw.len();
        let events_len = exchange(&app.socket, &events)?.raw.len();
        Ok(AppRequests {
            poll,
            not_modified: not_modified.raw,
            full,
            full_len,
            events,
            events_len,
        })
    }
}

/// The five things measured: the baselines' fixed 304s, then the app's poll,
/// full snapshot and events read.
fn targets(
    app: &App,
    raw: &HttpBaseline,
    hyper: &HttpBaseline,
    requests: AppRequests,
) -> anyhow::Result<[Target; 5]> {
    let hyper_len = exchange(&hyper.socket, &requests.poll)?.raw.len();
    let pid = app.krad.pid;
    Ok([
        Target {
            label: "baseline-raw, fixed 304",
            socket: raw.socket.clone(),
            request: requests.poll.clone(),
            expect: b"HTTP/1.1 304 ",
            pid: raw.pid,
            answer_bytes: requests.not_modified.len(),
        },
        Target {
            label: "baseline-hyper, fixed 304",
            socket: hyper.socket.clone(),
            request: requests.poll.clone(),
            expect: b"HTTP/1.1 304 ",
            pid: hyper.pid,
            answer_bytes: hyper_len,
        },
        Target {
            label: "krad, snapshot poll (304)",
            socket: app.socket.clone(),
            request: requests.poll,
            expect: b"HTTP/1.1 304 ",
            pid,
            answer_bytes: requests.not_modified.len(),
        },
        Target {
            label: "krad, full snapshot (200)",
            socket: app.socket.clone(),
            request: requests.full,
            expect: b"HTTP/1.1 200 ",
            pid,
            answer_bytes: requests.full_len,
        },
        Target {
            label: "krad, events, nothing new (200)",
            socket: app.socket.clone(),
            request: requests.events,
            expect: b"HTTP/1.1 200 ",
            pid,
            answer_bytes: requests.events_len,
        },
    ])
}

/// The report's heading: how the facet is driven, then the table's header.
fn intro(ctx: &Ctx, app: &App, run: Duration) -> String {
    format!(
        "### Durable facet\n\nThe app serves `[durable]` on its Unix socket with {} agents (`sleep 3600`, exec \
         profile); one exchange per connection (`Connection: close`), as Collie polls. The poll sends the \
         snapshot's ETag in `If-None-Match`; the events read is pane p{}'s `after=<cursor>&epoch=<epoch>` \
         with nothing new. {} s per run, {} repeats per point, the five back to back in each repeat. \
         The harness is {} processes deep below pid 1 (the app walks that many `/proc/PID/stat` \
         once per caller process to tell that it is not one of its own agents, then remembers the \
         verdict).\n\n{HEADER}",
        ctx.panes,
        app.pane,
        run.as_secs_f64(),
        ctx.repeats,
        caller_depth()
    )
}

/// Measures the targets at each client count: a warm-up, then `ctx.repeats`
/// repeats of the five back to back. Prints a row per target and client count;
/// returns a note of ratios per client count.
fn measure_all(ctx: &Ctx, targets: &[Target; 5], run: Duration) -> Vec<String> {
    let mut notes = Vec::new();
    for clients in CLIENTS {
        for target in targets {
            measure(target, clients, WARM_UP);
        }
        let mut runs: [Vec<Measured>; 5] = Default::default();
        for _ in 0..ctx.repeats {
            for (target, runs) in targets.iter().zip(runs.iter_mut()) {
                runs.push(measure(target, clients, run));
            }
        }
        for (target, runs) in targets.iter().zip(&runs) {
            ctx.out(&row(clients, target, runs));
        }
        notes.push(ratio_note(clients, &runs));
    }
    notes
}

/// The ratios of one client count's runs (of the targets in [`targets`]'s order).
fn ratio_note(clients: usize, runs: &[Vec<Measured>; 5]) -> String {
    let [r, h, p, f, e] = runs;
    format!(
        "* {clients} client{}: poll / baseline-hyper {}, poll / baseline-raw {}; \
         full snapshot / poll {} (server CPU per request {}); events / poll {} (server CPU {})",
        if clients == 1 { "" } else { "s" },
        ratios(p, h, throughput).show(2),
        ratios(p, r, throughput).show(2),
        ratios(f, p, throughput).show(2),
        ratios(f, p, server_cpu).show(1),
        ratios(e, p, throughput).show(2),
        ratios(e, p, server_cpu).show(1),
    )
}
