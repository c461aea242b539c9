//! Many concurrent Waits: what each held connection costs the app, and how long
//! it takes from the agent stopping until every waiter has its answer — against
//! the `hold` baseline, which holds connections on a tokio watch channel.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use krad_bus::protocol::Response;
use krad_bus::request::report::{Report, ReportedState};
use krad_bus::request::stats::Stats;
use krad_bus::request::wait::Wait;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::Ctx;
use crate::baseline::{Baseline, Mode};
use crate::krad::{Krad, call_line, call_raw};
use crate::util::{Summary, percentile, rss_kib};

/// One round: memory before and with the waiters, and the release times.
struct Round {
    rss_before_kib: u64,
    rss_held_kib: u64,
    release_all_ms: f64,
    release_p50_ms: f64,
    answered: usize,
}

/// Opens `n` connections that each send `line` and read to EOF; returns the
/// handles (each yields when its answer arrived and whether it looked right).
async fn open_waiters(
    endpoint: SocketAddr,
    line: Arc<[u8]>,
    expect: &'static [u8],
    n: usize,
) -> anyhow::Result<Vec<tokio::task::JoinHandle<Option<Instant>>>> {
    let mut handles = Vec::with_capacity(n);
    for chunk in 0..n.div_ceil(250) {
        let mut batch = Vec::new();
        for _ in 0..250.min(n - chunk * 250) {
            batch.push(TcpStream::connect(endpoint));
        }
        for connect in batch {
            let mut stream = connect.await.context("connecting a waiter")?;
            let line = line.clone();
            handles.push(tokio::spawn(async move {
                stream.write_all(&line).await.ok()?;
                let mut answer = Vec::with_capacity(1024);
                stream.read_to_end(&mut answer).await.ok()?;
                let at = Instant::now();
                answer.starts_with(expect).then_some(at)
            }));
        }
    }
    Ok(handles)
}

/// The round, once every waiter released at `released` has its answer (or
/// failed): how many were answered, how long the last and the median took.
async fn collect(
    handles: Vec<tokio::task::JoinHandle<Option<Instant>>>,
    released: Instant,
    rss_before_kib: u64,
    rss_held_kib: u64,
) -> Round {
    let mut times = Vec::with_capacity(handles.len());
    for handle in handles {
        if let Ok(Some(at)) = handle.await {
            times.push(at.saturating_duration_since(released).as_micros() as u32);
        }
    }
    times.sort_unstable();
    let all = times.last().copied().unwrap_or(0);
    Round {
        rss_before_kib,
        rss_held_kib,
        release_all_ms: f64::from(all) / 1000.0,
        release_p50_ms: f64::from(percentile(&times, 50.0)) / 1000.0,
        answered: times.len(),
    }
}

fn until<F: Fn() -> anyhow::Result<bool>>(limit: Duration, what: &str, f: F) -> anyhow::Result<()> {
    let end = Instant::now() + limit;
    while !f()? {
        if Instant::now() > end {
            bail!("{what} did not happen within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

fn krad_round(ctx: &Ctx, rt: &tokio::runtime::Runtime) -> anyhow::Result<Round> {
    let krad = Krad::start(&ctx.krad, &["--max-connections", "20000"])?;
    let id = krad.spawn_exec(&["sleep", "3600"])?;
    let token = krad.terminal_token(id)?;
    // Warm the app's paths once, so that the baseline memory includes them.
    krad.answered(wait_for(id, 1))?;
    std::thread::sleep(Duration::from_millis(200));
    let rss_before_kib = rss_kib(krad.pid);
    let line: Arc<[u8]> = krad.line(wait_for(id, 600)).into();
    let handles = rt.block_on(open_waiters(
        krad.endpoint,
        line,
        b"{\"Agent\"",
        ctx.waiters,
    ))?;
    until(Duration::from_secs(60), "all waits pending", || {
        let stats = krad.call(Stats::default())?;
        Ok(stats.waits_pending == ctx.waiters as u64)
    })?;
    std::thread::sleep(Duration::from_millis(200));
    let rss_held_kib = rss_kib(krad.pid);
    let report = krad.line_as(
        id,
        &token,
        Report {
            state: ReportedState::Idle,
            message: Some("done".to_owned()),
            title: None,
            session: None,
            transcript: None,
        },
    );
    let released = Instant::now();
    let answer = call_line(krad.endpoint, &report)?;
    let ok = Response::decode(answer.clone()).is_ok_and(|d| d.response == Response::Ok);
    anyhow::ensure!(ok, "Report: {answer}");
    Ok(rt.block_on(collect(handles, released, rss_before_kib, rss_held_kib)))
}

fn baseline_round(ctx: &Ctx, rt: &tokio::runtime::Runtime, reply: usize) -> anyhow::Result<Round> {
    let baseline = Baseline::start(Mode::Hold, reply)?;
    std::thread::sleep(Duration::from_millis(100));
    let rss_before_kib = rss_kib(baseline.pid);
    let line: Arc<[u8]> = b"WAIT\n".as_slice().into();
    let handles = rt.block_on(open_waiters(baseline.endpoint, line, b"{", ctx.waiters))?;
    until(Duration::from_secs(60), "all baseline waits held", || {
        let n = call_raw(baseline.endpoint, b"COUNT\n")?;
        Ok(String::from_utf8_lossy(&n).trim() == ctx.waiters.to_string())
    })?;
    std::thread::sleep(Duration::from_millis(200));
    let rss_held_kib = rss_kib(baseline.pid);
    let released = Instant::now();
    call_raw(baseline.endpoint, b"RELEASE\n")?;
    Ok(rt.block_on(collect(handles, released, rss_before_kib, rss_held_kib)))
}

/// The Waits benchmark.
pub(crate) fn waits(ctx: &Ctx) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    // The answer's length, for the baseline's reply.
    let reply = {
        let krad = Krad::start(&ctx.krad, &[])?;
        let id = krad.spawn_exec(&["true"])?;
        call_raw(krad.endpoint, &krad.line(wait_for(id, 10)))?.len()
    };
    let repeats = ctx.repeats.div_ceil(2).max(2);
    let (mut b, mut k) = (Vec::new(), Vec::new());
    for _ in 0..repeats {
        b.push(baseline_round(ctx, &rt, reply)?);
        k.push(krad_round(ctx, &rt)?);
    }
    let n = ctx.waiters;
    let show = |name: &str, rounds: &[Round]| {
        let before = Summary::of(
            &rounds
                .iter()
                .map(|r| r.rss_before_kib as f64 / 1024.0)
                .collect::<Vec<_>>(),
        );
        let held = Summary::of(
            &rounds
                .iter()
                .map(|r| r.rss_held_kib as f64 / 1024.0)
                .collect::<Vec<_>>(),
        );
        let per = Summary::of(
            &rounds
                .iter()
                .map(|r| {
                    (r.rss_held_kib.saturating_sub(r.rss_before_kib)) as f64 * 1024.0 / n as f64
                })
                .collect::<Vec<_>>(),
        );
        let all = Summary::of(&rounds.iter().map(|r| r.release_all_ms).collect::<Vec<_>>());
        let p50 = Summary::of(&rounds.iter().map(|r| r.release_p50_ms).collect::<Vec<_>>());
        let answered: usize = rounds.iter().map(|r| r.answered).min().unwrap_or(0);
        format!(
            "| {name} | {} | {} | {} | {} | {} | {answered} |",
            before.show(1),
            held.show(1),
            per.show(0),
            p50.show(1),
            all.show(1)
        )
    };
    ctx.out(&format!(
        "### {n} concurrent Waits\n\n{repeats} rounds of each, alternated, each on a fresh process. \
         The app runs with `--max-connections 20000`; the baseline (`hold`) keeps each connection \
         in a task waiting on a tokio watch channel. Released by a Report (krad) or a `RELEASE` \
         line (baseline); times from sending it until the answers arrived.\n\n\
         | server | RSS before, MiB | RSS with {n} held, MiB | bytes per held connection | release p50, ms | release all, ms | answered (min) |\n\
         |---|---:|---:|---:|---:|---:|---:|\n{}\n{}\n",
        show("baseline", &b),
        show("krad", &k)
    ));
    Ok(())
}

/// Wait on one agent for at most `timeout_secs`.
fn wait_for(id: u64, timeout_secs: u64) -> Wait {
    Wait {
        target: Some(id),
        timeout_secs: Some(timeout_secs),
        ..Wait::default()
    }
}
