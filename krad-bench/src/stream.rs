//! SubscribeAgents with many subscribers while agents change state fast: delivery
//! latency, how much of the change stream each subscriber saw (the app conflates
//! for slow readers), the app's memory and CPU — against the `fanout` baseline
//! (a tokio broadcast channel written to every subscriber).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use krad_bus::request::check::Check;
use krad_bus::request::report::{Report, ReportedState};
use krad_bus::request::shutdown::Shutdown;
use krad_bus::request::stats::Stats;
use krad_bus::request::subscribe_agents::SubscribeAgents;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::Ctx;
use crate::baseline::{Baseline, Mode};
use crate::krad::{Krad, call_raw};
use crate::util::{Summary, cpu_time, percentile, rss_kib};

const MARK: &[u8] = b"\"message\":\"m:";

struct Round {
    sent: u64,
    send_secs: f64,
    received: u64,
    p50_us: u32,
    p99_us: u32,
    rss_before_kib: u64,
    rss_peak_kib: u64,
    cpu_pct: f64,
}

/// One subscriber: reads lines until told to stop; returns (lines with a mark,
/// their latencies in µs).
async fn subscriber(endpoint: SocketAddr, line: Arc<[u8]>, epoch: Instant) -> (u64, Vec<u32>) {
    let mut latencies = Vec::new();
    let mut received = 0;
    let Ok(mut stream) = TcpStream::connect(endpoint).await else {
        return (0, latencies);
    };
    if stream.write_all(&line).await.is_err() {
        return (0, latencies);
    }
    let mut buf = vec![0u8; 64 * 1024];
    let mut filled = 0;
    // Reads until the server ends the stream (krad: Shutdown; the baseline: killed).
    loop {
        let n = match stream.read(&mut buf[filled..]).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        filled += n;
        let now = epoch.elapsed().as_micros() as u64;
        let mut start = 0;
        while let Some(i) = memchr::memchr(b'\n', &buf[start..filled]) {
            let message = &buf[start..start + i];
            if let Some(at) = memchr::memmem::find(message, MARK) {
                let digits = &message[at + MARK.len()..];
                let end = digits.iter().position(|b| !b.is_ascii_digit()).unwrap_or(0);
                if let Some(sent) = std::str::from_utf8(&digits[..end])
                    .ok()
                    .and_then(|d| d.parse::<u64>().ok())
                {
                    received += 1;
                    latencies.push(now.saturating_sub(sent).min(u64::from(u32::MAX)) as u32);
                }
            }
            start += i + 1;
        }
        buf.copy_within(start..filled, 0);
        filled -= start;
        if filled == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
    }
    (received, latencies)
}

/// Sends `total` changes at `rate` per second from 4 threads; `request(i, now_us)`
/// makes the i-th. Returns how long sending took.
fn generate(rate: u64, total: u64, epoch: Instant, request: Changes) -> f64 {
    const THREADS: u64 = 16;
    let started = Instant::now();
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let request = request.clone();
            std::thread::spawn(move || {
                let mut i = t;
                while i < total {
                    let due = started + Duration::from_secs_f64(i as f64 / rate as f64);
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    request(i, epoch.elapsed().as_micros() as u64);
                    i += THREADS;
                }
            })
        })
        .collect();
    for w in workers {
        let _ = w.join();
    }
    started.elapsed().as_secs_f64()
}

#[allow(clippy::too_many_arguments)]
fn round(
    ctx: &Ctx,
    rt: &tokio::runtime::Runtime,
    endpoint: SocketAddr,
    pid: u32,
    sub_line: Arc<[u8]>,
    ready: &dyn Fn() -> anyhow::Result<bool>,
    request: Changes,
    epoch: Instant,
    end_streams: &dyn Fn(),
) -> anyhow::Result<Round> {
    let rss_before_kib = rss_kib(pid);
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..ctx.subscribers)
        .map(|_| rt.spawn(subscriber(endpoint, sub_line.clone(), epoch)))
        .collect();
    let until = Instant::now() + Duration::from_secs(60);
    while !ready()? {
        anyhow::ensure!(Instant::now() < until, "the subscribers never all got in");
        std::thread::sleep(Duration::from_millis(50));
    }
    let total = ctx.rate * 5;
    let cpu = cpu_time(pid);
    let started = Instant::now();
    let peak = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let sampler = {
        let (peak, stop) = (peak.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(rss_kib(pid), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let send_secs = generate(ctx.rate, total, epoch, request);
    std::thread::sleep(Duration::from_secs(1));
    let cpu_pct = 100.0 * (cpu_time(pid) - cpu).as_secs_f64() / started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    end_streams();
    let mut received = 0;
    let mut latencies = Vec::new();
    for handle in handles {
        if let Ok((n, l)) = rt.block_on(handle) {
            received += n;
            latencies.extend(l);
        }
    }
    latencies.sort_unstable();
    Ok(Round {
        sent: total,
        send_secs,
        received,
        p50_us: percentile(&latencies, 50.0),
        p99_us: percentile(&latencies, 99.0),
        rss_before_kib,
        rss_peak_kib: peak.load(Ordering::Relaxed),
        cpu_pct,
    })
}

/// The agents of each krad round.
const AGENTS: u64 = 10;

/// A change sender: makes the i-th change, stamped `now` (µs since the epoch).
type Changes = Arc<dyn Fn(u64, u64) + Send + Sync>;

/// The SubscribeAgents benchmark.
pub(crate) fn subscribe(ctx: &Ctx) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let epoch = Instant::now();
    let repeats = ctx.repeats.div_ceil(2).max(2);
    let (mut b, mut k) = (Vec::new(), Vec::new());
    let mut record_len = 0;
    for _ in 0..repeats {
        // krad: 10 agents, each told by Report (as itself) what it is doing.
        let krad = Arc::new(Krad::start(&ctx.krad, &["--max-connections", "20000"])?);
        let ids = Arc::new(start_agents(&krad)?);
        let check = Check {
            target: ids[0].0,
            ..Check::default()
        };
        record_len = serde_json::to_vec(&krad.answered(check)?.raw)?.len();
        b.push(baseline_round(ctx, &rt, record_len, epoch)?);
        k.push(krad_round(ctx, &rt, &krad, &ids, epoch).context("krad round")?);
    }
    ctx.out(&report(ctx, repeats, record_len, &b, &k));
    Ok(())
}

/// Starts [`AGENTS`] agents (`sleep 3600`); returns their ids and tokens.
fn start_agents(krad: &Krad) -> anyhow::Result<Vec<(u64, String)>> {
    let mut ids = Vec::new();
    for _ in 0..AGENTS {
        let id = krad.spawn_exec(&["sleep", "3600"])?;
        ids.push((id, krad.terminal_token(id)?));
    }
    Ok(ids)
}

/// The state the i-th change gives its agent.
fn state_of(i: u64) -> ReportedState {
    if (i / AGENTS).is_multiple_of(2) {
        ReportedState::Working
    } else {
        ReportedState::Idle
    }
}

/// A round of the fan-out baseline, publishing records of about `record_len`
/// bytes (the size of krad's).
fn baseline_round(
    ctx: &Ctx,
    rt: &tokio::runtime::Runtime,
    record_len: usize,
    epoch: Instant,
) -> anyhow::Result<Round> {
    let baseline = Baseline::start(Mode::Fanout, 64)?;
    let pad = "x".repeat(record_len.saturating_sub(60));
    let bend = baseline.endpoint;
    let publish: Changes = Arc::new(move |i, now| {
        let line = format!(
            "PUB {{\"Agent\":{{\"terminal\":{},\"state\":{},\"message\":\"m:{now}\",\"pad\":\"{pad}\"}}}}\n",
            i % AGENTS,
            // The state as the wire spells it, quotes included.
            serde_json::to_string(&state_of(i)).unwrap_or_default()
        );
        let _ = call_raw(bend, line.as_bytes());
    });
    let ready = || -> anyhow::Result<bool> {
        let n = call_raw(baseline.endpoint, b"COUNT\n")?;
        Ok(String::from_utf8_lossy(&n).trim() == ctx.subscribers.to_string())
    };
    round(
        ctx,
        rt,
        baseline.endpoint,
        baseline.pid,
        b"SUB\n".as_slice().into(),
        &ready,
        publish,
        epoch,
        &|| {
            let _ = std::process::Command::new("kill")
                .arg(baseline.pid.to_string())
                .status();
        },
    )
}

/// A round of krad: each change is a Report by the agent's own terminal; the
/// round ends with a Shutdown.
fn krad_round(
    ctx: &Ctx,
    rt: &tokio::runtime::Runtime,
    krad: &Arc<Krad>,
    ids: &Arc<Vec<(u64, String)>>,
    epoch: Instant,
) -> anyhow::Result<Round> {
    let report: Changes = {
        let (krad, ids) = (krad.clone(), ids.clone());
        Arc::new(move |i, now| {
            let (id, token) = &ids[(i % AGENTS) as usize];
            let line = krad.line_as(
                *id,
                token,
                Report {
                    state: state_of(i),
                    message: Some(format!("m:{now}")),
                    title: None,
                    session: None,
                    transcript: None,
                },
            );
            let _ = call_raw(krad.endpoint, &line);
        })
    };
    let ready = || -> anyhow::Result<bool> {
        let stats = krad.call(Stats::default())?;
        Ok(stats.subscribers == ctx.subscribers as u64)
    };
    round(
        ctx,
        rt,
        krad.endpoint,
        krad.pid,
        krad.line(SubscribeAgents::default()).into(),
        &ready,
        report,
        epoch,
        &|| {
            let _ = krad.answered(Shutdown::default());
        },
    )
}

/// The report: what was measured, and a row each for the baseline's rounds `b`
/// and krad's `k`.
fn report(ctx: &Ctx, repeats: usize, record_len: usize, b: &[Round], k: &[Round]) -> String {
    let subs = ctx.subscribers as f64;
    let show = |name: &str, rounds: &[Round]| {
        let s = |f: &dyn Fn(&Round) -> f64| Summary::of(&rounds.iter().map(f).collect::<Vec<_>>());
        format!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} |",
            s(&|r| r.sent as f64 / r.send_secs).show(0),
            s(&|r| 100.0 * r.received as f64 / (r.sent as f64 * subs)).show(1),
            s(&|r| f64::from(r.p50_us) / 1000.0).show(1),
            s(&|r| f64::from(r.p99_us) / 1000.0).show(1),
            s(&|r| r.rss_before_kib as f64 / 1024.0).show(1),
            s(&|r| r.rss_peak_kib as f64 / 1024.0).show(1),
            s(&|r| r.cpu_pct).show(0),
        )
    };
    format!(
        "### SubscribeAgents: {} subscribers, {AGENTS} agents changing {} times a second\n\n\
         {repeats} rounds of each, alternated, fresh processes; 5 s of changes per round. Each change \
         is a Report made by the agent's own terminal (one connection each, paced from 16 threads); the \
         baseline gets a `PUB` line of the same size ({record_len} bytes) instead. Latency is from \
         sending the change to a subscriber reading it; `seen` is the share of (changes × \
         subscribers) that reached subscribers (krad conflates updates for a reader that falls behind, \
         so below 100 % is by design; the baseline drops what a lagging reader missed).\n\n\
         | server | changes/s sent | seen % | latency p50, ms | p99, ms | RSS before, MiB | RSS peak, MiB | server CPU % of a core |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|\n{}\n{}\n",
        ctx.subscribers,
        ctx.rate,
        show("baseline", b),
        show("krad", k)
    )
}
