//! The bus: Hello and List throughput and latency against the `line` baseline,
//! and `krad api` as a whole process against a minimal client and `nc`.

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use krad_bus::request::hello::Hello;
use krad_bus::request::list::List;

use crate::Ctx;
use crate::baseline::{Baseline, Mode};
use crate::krad::{Krad, call_raw};
use crate::load::{Run, closed_loop};
use crate::util::Summary;

const HEADER: &str = "| clients | server | req/s median (min–max) | p50 µs | p99 µs | errors | steal % | busy % |\n|---:|---|---:|---:|---:|---:|---:|---:|";

fn row(clients: usize, server: &str, runs: &[Run]) -> String {
    let per_sec = Summary::of(&runs.iter().map(|r| r.per_sec).collect::<Vec<_>>());
    let p50 = Summary::of(&runs.iter().map(|r| f64::from(r.p50_us)).collect::<Vec<_>>());
    let p99 = Summary::of(&runs.iter().map(|r| f64::from(r.p99_us)).collect::<Vec<_>>());
    let errors: u64 = runs.iter().map(|r| r.errors).sum();
    let steal = Summary::of(&runs.iter().map(|r| r.cpu.steal_pct).collect::<Vec<_>>());
    let busy = Summary::of(&runs.iter().map(|r| r.cpu.busy_pct).collect::<Vec<_>>());
    format!(
        "| {clients} | {server} | {} | {:.0} | {:.0} | {errors} | {:.1} | {:.0} |",
        per_sec.show(0),
        p50.median,
        p99.median,
        steal.median,
        busy.median
    )
}

/// The ratio of each back-to-back pair (krad / baseline), summarized.
pub(crate) fn pair_ratios(krad: &[Run], baseline: &[Run]) -> Summary {
    Summary::of(
        &krad
            .iter()
            .zip(baseline)
            .map(|(k, b)| k.per_sec / b.per_sec.max(1e-9))
            .collect::<Vec<_>>(),
    )
}

/// Hello at each client count: baseline and krad alternated, `repeats` pairs.
pub(crate) fn hello(ctx: &Ctx) -> anyhow::Result<()> {
    let krad = Krad::start(&ctx.krad, &[])?;
    let line = krad.line(Hello::default());
    let answer_len = call_raw(krad.endpoint, &line)?.len();
    let baseline = Baseline::start(Mode::Line, answer_len)?;
    ctx.out(&format!(
        "### Hello, one connection per request\n\nThe baseline answers a fixed line of the same length ({answer_len} bytes). \
         {} s per run, {} pairs per point, baseline and krad back to back.\n\n{HEADER}",
        ctx.secs, ctx.repeats
    ));
    let mut ratios = Vec::new();
    for &clients in &ctx.clients {
        // A short warm-up of both, not counted.
        warm(baseline.endpoint, &line, clients);
        warm(krad.endpoint, &line, clients);
        let mut b = Vec::new();
        let mut k = Vec::new();
        for _ in 0..ctx.repeats {
            b.push(measured(
                ctx,
                baseline.endpoint,
                &line,
                b"{\"Hello\"",
                clients,
            ));
            k.push(measured(ctx, krad.endpoint, &line, b"{\"Hello\"", clients));
        }
        ctx.out(&row(clients, "baseline", &b));
        ctx.out(&row(clients, "krad", &k));
        ratios.push((clients, pair_ratios(&k, &b)));
    }
    ctx.out("\nkrad / baseline throughput, per back-to-back pair (goal at 16 clients ≥ 0.95):\n");
    for (clients, ratio) in ratios {
        ctx.out(&format!("* {clients} clients: {}", ratio.show(2)));
    }
    ctx.out("");
    Ok(())
}

/// List of 100 agents at 16 clients (and 1), against a baseline answering a line
/// of the same length and against the Hello-sized baseline.
pub(crate) fn list(ctx: &Ctx) -> anyhow::Result<()> {
    let krad = Krad::start(&ctx.krad, &[])?;
    for _ in 0..ctx.agents {
        krad.spawn_exec(&["sleep", "3600"])?;
    }
    let line = krad.line(List::default());
    let answer = call_raw(krad.endpoint, &line)?;
    let hello_len = call_raw(krad.endpoint, &krad.line(Hello::default()))?.len();
    let same = Baseline::start(Mode::Line, answer.len())?;
    let small = Baseline::start(Mode::Line, hello_len)?;
    ctx.out(&format!(
        "### List of {} agents\n\nThe answer is {} bytes; `baseline` answers a line of that length, `baseline-hello` \
         one of the Hello answer's length ({hello_len} bytes).\n\n{HEADER}",
        ctx.agents,
        answer.len()
    ));
    let mut notes = Vec::new();
    for clients in [1, 16] {
        warm(krad.endpoint, &line, clients);
        let (mut s, mut b, mut k) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..ctx.repeats {
            s.push(measured(ctx, small.endpoint, &line, b"{", clients));
            b.push(measured(ctx, same.endpoint, &line, b"{", clients));
            k.push(measured(ctx, krad.endpoint, &line, b"{\"Agents\"", clients));
        }
        ctx.out(&row(clients, "baseline-hello", &s));
        ctx.out(&row(clients, "baseline", &b));
        ctx.out(&row(clients, "krad List", &k));
        notes.push(format!(
            "* {clients} clients: krad / baseline {}, krad / baseline-hello {}",
            pair_ratios(&k, &b).show(2),
            pair_ratios(&k, &s).show(2)
        ));
    }
    ctx.out("\nPer back-to-back run (goal at 16 clients: krad / baseline ≥ 0.90):\n");
    for note in notes {
        ctx.out(&note);
    }
    ctx.out("");
    Ok(())
}

/// A short closed loop that warms `endpoint`'s paths before a measure.
fn warm(endpoint: SocketAddr, line: &[u8], clients: usize) {
    closed_loop(endpoint, line, b"{", clients, Duration::from_millis(300));
}

/// A closed loop of `clients` for the run's length, each answer starting
/// with `expect`.
fn measured(ctx: &Ctx, endpoint: SocketAddr, line: &[u8], expect: &[u8], clients: usize) -> Run {
    closed_loop(endpoint, line, expect, clients, ctx.run())
}

/// `krad api` as a whole process, against the minimal client and `nc`.
pub(crate) fn api(ctx: &Ctx) -> anyhow::Result<()> {
    let krad = Krad::start(&ctx.krad, &[])?;
    let line = krad.line(Hello::default());
    let line_file = krad.dir.path().join("hello.line");
    std::fs::write(&line_file, &line)?;
    let mini = std::env::current_exe()?
        .parent()
        .context("no directory")?
        .join("krad-mini-client");
    let endpoint = krad.endpoint.to_string();
    let port = krad.endpoint.port().to_string();
    let text = String::from_utf8_lossy(&line).trim_end().to_owned();
    let time = |cmd: &mut Command| -> anyhow::Result<f64> {
        let started = Instant::now();
        let status = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()?;
        let took = started.elapsed().as_secs_f64() * 1000.0;
        // Named by program and arguments only: `nc`'s environment holds the token.
        anyhow::ensure!(
            status.success(),
            "{} {:?} failed: {status}",
            cmd.get_program().to_string_lossy(),
            cmd.get_args().collect::<Vec<_>>()
        );
        Ok(took)
    };
    let mut runs: [Vec<f64>; 3] = Default::default();
    let rounds = ctx.repeats * 8;
    for round in 0..rounds + 3 {
        let m = time(Command::new(&mini).arg(&endpoint).arg(&line_file))?;
        let k = time(
            Command::new(&ctx.krad)
                .arg("api")
                .env("KRAD_ADE_API_JSON", &krad.api_json)
                .env_remove("KRAD_ADE_ENDPOINT")
                .env_remove("KRAD_ADE_TOKEN_FILE")
                .env_remove("RUST_LOG"),
        )?;
        let n = time(
            Command::new("sh")
                .arg("-c")
                .arg("printf '%s\\n' \"$LINE\" | nc -N 127.0.0.1 \"$PORT\"")
                .env("LINE", &text)
                .env("PORT", &port),
        )?;
        if round >= 3 {
            runs[0].push(m);
            runs[1].push(k);
            runs[2].push(n);
        }
    }
    let [m, k, n] = [&runs[0], &runs[1], &runs[2]].map(|r| Summary::of(r));
    let ratio = |a: &[f64], b: &[f64]| {
        Summary::of(&a.iter().zip(b).map(|(a, b)| a / b).collect::<Vec<_>>())
    };
    ctx.out(&format!(
        "### `krad api` as a whole process\n\n{rounds} rounds, each running the three back to back \
         (after 3 rounds of warm-up); wall time from spawn to exit, ms.\n\n\
         | command | ms median (min–max) |\n|---|---:|\n\
         | `krad-mini-client` (connect, write, read to EOF) | {} |\n\
         | `krad api` | {} |\n\
         | `sh -c 'printf … \\| nc -N 127.0.0.1 PORT'` | {} |\n\n\
         * `krad api` / minimal client, per round: {} (goal ≤ 1.20)\n\
         * `printf \\| nc` / minimal client, per round: {}\n",
        m.show(2),
        k.show(2),
        n.show(2),
        ratio(&runs[1], &runs[0]).show(2),
        ratio(&runs[2], &runs[0]).show(2),
    ));
    Ok(())
}
