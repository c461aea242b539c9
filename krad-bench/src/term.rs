//! Terminals: output throughput through the PTY and the screen parser, spawn
//! latency, and the CPU the app spends on idle agents.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use krad_bus::protocol::{AgentState, Waited};
use krad_bus::request::close::Close;
use krad_bus::request::hello::Hello;
use krad_bus::request::list::List;
use krad_bus::request::spawn::Spawn;
use krad_bus::request::wait::{Wait, WaitFor};

use crate::Ctx;
use crate::krad::Krad;
use crate::parsers::{self, Candidate};
use crate::util::{CpuTimes, Summary, cpu_between, cpu_time, cpu_time_exact, rss_kib, threads};

/// Back-to-back pairs (bare PTY, then krad) of the output benchmark, at least:
/// over 10 pairs, three runs of the same build on a quiet machine gave medians
/// of 0.78, 0.92 and 1.14.
const OUTPUT_PAIRS: usize = 24;

/// Writes `mib` MiB of compiler-like output with some colour to `path`.
fn make_output(path: &Path, mib: usize) -> anyhow::Result<u64> {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut written = 0u64;
    let mut n = 0u64;
    while written < (mib as u64) << 20 {
        let line = format!(
            "[{:>8}.{:06}] \x1b[1;32m   Compiling\x1b[0m crate-{n} v0.{}.{} (/src/work/crates/crate-{n}) \x1b[2m{} ms\x1b[0m\n",
            n / 1000,
            n % 1_000_000,
            n % 7,
            n % 13,
            n % 997
        );
        file.write_all(line.as_bytes())?;
        written += line.len() as u64;
        n += 1;
    }
    file.flush()?;
    Ok(written)
}

fn through_pty(path: &Path) -> anyhow::Result<f64> {
    let pty = nix::pty::openpty(None, None)?;
    let started = Instant::now();
    let out = pty.slave.try_clone()?;
    let mut child = Command::new("cat")
        .arg(path)
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(pty.slave))
        .spawn()?;
    let mut master = std::fs::File::from(pty.master);
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match master.read(&mut buf) {
            Ok(0) | Err(_) => break, // EIO once every writer is gone
            Ok(_) => {}
        }
    }
    child.wait()?;
    Ok(started.elapsed().as_secs_f64())
}

fn to_dev_null(path: &Path) -> anyhow::Result<f64> {
    let started = Instant::now();
    let status = Command::new("cat")
        .arg(path)
        .stdout(Stdio::null())
        .status()?;
    anyhow::ensure!(status.success());
    Ok(started.elapsed().as_secs_f64())
}

fn through_krad(krad: &Krad, path: &Path) -> anyhow::Result<f64> {
    let started = Instant::now();
    let file = path.to_string_lossy();
    let id = krad.spawn_exec(&["cat", &file])?;
    let wait = Wait {
        target: Some(id),
        for_: Some(WaitFor::Exit),
        timeout_secs: Some(600),
        ..Wait::default()
    };
    let answer = krad.answered(wait)?;
    let took = started.elapsed().as_secs_f64();
    let exited = matches!(&answer.answer, Ok(Waited::Agent(record)) if record.exit_code == Some(0));
    anyhow::ensure!(exited, "cat in krad: {}", answer.raw);
    krad.answered(Close {
        target: Some(id),
        ..Close::default()
    })?;
    Ok(took)
}

/// Terminal output throughput, and the screen models side by side.
pub(crate) fn output(ctx: &Ctx) -> anyhow::Result<()> {
    let krad = Krad::start(&ctx.krad, &[])?;
    let path = krad.dir.path().join("output.txt");
    let size = make_output(&path, ctx.mib)?;
    // The screen models alone get the bytes as a terminal's reader does: a
    // PTY turns each LF into CR LF (`onlcr`).
    let from_pty = krad.dir.path().join("output-from-pty.txt");
    let mut bytes = Vec::with_capacity(size as usize + size as usize / 64);
    for line in std::fs::read(&path)?.split_inclusive(|&b| b == b'\n') {
        match line.strip_suffix(b"\n") {
            Some(text) => {
                bytes.extend_from_slice(text);
                bytes.extend_from_slice(b"\r\n");
            }
            None => bytes.extend_from_slice(line),
        }
    }
    std::fs::write(&from_pty, &bytes)?;
    let mb = size as f64 / 1e6;
    // The terminal against the bare PTY in back-to-back pairs, twice as many as
    // `--repeats` and at least [`OUTPUT_PAIRS`] (a bare PTY's speed moves by a
    // fifth, at times by five times, from one round to the next); the screen
    // models alone, in rounds of their own.
    let pairs = (ctx.repeats * 2).max(OUTPUT_PAIRS);
    let repeats = ctx.repeats.div_ceil(2).max(2);
    let mut rows: [Vec<f64>; 3] = Default::default();
    let mut parsers: Vec<Vec<f64>> = vec![Vec::new(); Candidate::ALL.len()];
    // One warm-up of each, not counted (page cache, first spawn).
    to_dev_null(&path)?;
    through_krad(&krad, &path)?;
    for _ in 0..repeats {
        rows[0].push(mb / to_dev_null(&path)?);
    }
    let cpu_before = CpuTimes::now();
    for _ in 0..pairs {
        rows[1].push(mb / through_pty(&path)?);
        rows[2].push(mb / through_krad(&krad, &path)?);
    }
    let cpu = cpu_between(cpu_before, CpuTimes::now());
    for _ in 0..repeats {
        for (candidate, row) in Candidate::ALL.iter().zip(&mut parsers) {
            row.push(mb / parsers::parse_secs(*candidate, &bytes)?);
        }
    }
    let per_pair = Summary::of(
        &rows[2]
            .iter()
            .zip(&rows[1])
            .map(|(k, p)| k / p.max(1e-9))
            .collect::<Vec<_>>(),
    );
    let [null, pty, k] = [&rows[0], &rows[1], &rows[2]].map(|r| Summary::of(r));
    let mut models = String::new();
    for (candidate, row) in Candidate::ALL.iter().zip(&parsers) {
        let kib = parsers::memory_kib(*candidate, &from_pty)?;
        models.push_str(&format!(
            "| {} | {} | {:.1} |\n",
            candidate.label(),
            Summary::of(row).show(0),
            kib / 1024.0
        ));
    }
    ctx.out(&format!(
        "### Terminal output\n\n`cat` of {mb:.1} MB of coloured compiler-like lines: {pairs} pairs of rounds \
         alternated, the bare PTY then krad; `/dev/null` and the screen models {repeats} rounds each. \
         krad's figure is from the Spawn until the Wait for its exit is answered (the app answers it once \
         every byte was parsed into the screen and written to the transcript).\n\n\
         | path | MB/s median (min–max) |\n|---|---:|\n\
         | `cat > /dev/null` | {} |\n\
         | `cat` on a bare PTY, the harness reading and discarding | {} |\n\
         | `cat` in a krad terminal (PTY, screen, transcript) | {} |\n\n\
         * krad / bare PTY, per back-to-back pair: {} (goal ≥ 0.80); of the medians: {:.2}; \
         krad / `/dev/null`: {:.3}\n\
         * over the pairs: busy {:.0} %, the VM host's steal {:.1} %\n\n\
         Screen models alone, in process, {}×{}, {} lines of scrollback, fed 16 KiB at a time \
         of the same output with CR LF line ends (as a PTY delivers it); \
         memory: one terminal holding the whole output (its resident set, measured in a process \
         of its own).\n\n\
         | model | MB/s median (min–max) | MiB per terminal |\n|---|---:|---:|\n{models}",
        null.show(0),
        pty.show(0),
        k.show(0),
        per_pair.show(2),
        k.median / pty.median,
        k.median / null.median,
        cpu.busy_pct,
        cpu.steal_pct,
        parsers::COLS,
        parsers::ROWS,
        parsers::SCROLLBACK,
    ));
    Ok(())
}

/// Spawn to running: each round starts `sleep 3600` three ways — a plain
/// fork/exec, a fork/exec on a fresh PTY (the goal's baseline), and krad's Spawn
/// (exec profile) until answered — plus a Hello to the app, the floor of any
/// request. The order within a round alternates (baseline first, then krad first),
/// and the figure to read is the median of the per-round ratios — to the PTY
/// baseline, and to the floor of a Spawn over the bus (a Hello plus a PTY spawn).
pub(crate) fn spawn(ctx: &Ctx) -> anyhow::Result<()> {
    let krad = Krad::start(&ctx.krad, &[])?;
    let rounds = ctx.repeats * 20;
    let warm_up = 3;
    let (mut plain, mut pty, mut k, mut hello) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut ids = Vec::new();
    let load_before = load_average();
    let cpu_before = CpuTimes::now();
    let mut app_cpu = Duration::ZERO;
    for round in 0..rounds + warm_up {
        let app_cpu_before = cpu_time_exact(krad.pid);
        let mut krad_spawn = || -> anyhow::Result<f64> {
            let started = Instant::now();
            ids.push(krad.spawn_exec(&["sleep", "3600"])?);
            Ok(started.elapsed().as_secs_f64() * 1000.0)
        };
        let krad_first = round % 2 == 1;
        let c_first = if krad_first {
            Some(krad_spawn()?)
        } else {
            None
        };
        let started = Instant::now();
        let p = nix::pty::openpty(None, None)?;
        let mut on_pty = Command::new("sleep")
            .arg("3600")
            .stdin(Stdio::from(p.slave.try_clone()?))
            .stdout(Stdio::from(p.slave.try_clone()?))
            .stderr(Stdio::from(p.slave))
            .spawn()?;
        let b = started.elapsed().as_secs_f64() * 1000.0;
        let c = match c_first {
            Some(c) => c,
            None => krad_spawn()?,
        };
        let started = Instant::now();
        let mut child = Command::new("sleep").arg("3600").spawn()?;
        let a = started.elapsed().as_secs_f64() * 1000.0;
        let started = Instant::now();
        krad.call(Hello::default())?;
        let h = started.elapsed().as_secs_f64() * 1000.0;
        if round >= warm_up {
            app_cpu += cpu_time_exact(krad.pid).saturating_sub(app_cpu_before);
        }
        let _ = child.kill();
        let _ = child.wait();
        let _ = on_pty.kill();
        let _ = on_pty.wait();
        drop(p.master);
        if round >= warm_up {
            plain.push(a);
            pty.push(b);
            k.push(c);
            hello.push(h);
        }
    }
    let cpu = cpu_between(cpu_before, CpuTimes::now());
    let load_after = load_average();
    for id in ids {
        krad.answered(Close {
            target: Some(id),
            ..Close::default()
        })?;
    }
    let per_round =
        |of: &[f64], to: &[f64]| -> Vec<f64> { of.iter().zip(to).map(|(a, b)| a / b).collect() };
    let to_pty = per_round(&k, &pty);
    let to_hello = per_round(&k, &hello);
    // The least any Spawn over the bus can take: a round trip and a PTY spawn.
    let floor: Vec<f64> = hello.iter().zip(&pty).map(|(h, p)| h + p).collect();
    let to_floor = per_round(&k, &floor);
    ctx.out(&format!(
        "### Spawn to running\n\n{rounds} rounds (after {warm_up} unrecorded), each spawning \
         `sleep 3600` three ways, krad and the PTY baseline in alternating order, and a \
         Hello; ms, median (min–max) [quartiles].\n\n\
         | how | ms |\n|---|---:|\n\
         | fork/exec from the harness | {} |\n\
         | fork/exec on a fresh PTY from the harness | {} |\n\
         | krad Spawn (exec profile), until answered | {} |\n\
         | krad Hello, until answered | {} |\n\n\
         * krad Spawn / PTY spawn, per round: {}\n\
         * krad Spawn / krad Hello, per round: {}\n\
         * krad Spawn / (krad Hello + PTY spawn), per round: {}; of the medians: {:.2}\n\
         * the app's CPU time per round (a Spawn and a Hello; its threads, not the new \
         program's): {:.0} µs\n\
         * load average before and after: {load_before} → {load_after}; busy {:.0} %, steal {:.1} %\n",
        with_quartiles(&plain, 2),
        with_quartiles(&pty, 2),
        with_quartiles(&k, 2),
        with_quartiles(&hello, 2),
        with_quartiles(&to_pty, 2),
        with_quartiles(&to_hello, 2),
        with_quartiles(&to_floor, 2),
        Summary::of(&k).median / (Summary::of(&hello).median + Summary::of(&pty).median),
        app_cpu.as_secs_f64() * 1e6 / rounds.max(1) as f64,
        cpu.busy_pct,
        cpu.steal_pct,
    ));
    Ok(())
}

/// `median (min–max) [first–third quartile]`.
fn with_quartiles(values: &[f64], decimals: usize) -> String {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let quartile = |q: f64| {
        sorted
            .get(((sorted.len().saturating_sub(1)) as f64 * q).round() as usize)
            .copied()
            .unwrap_or(0.0)
    };
    format!(
        "{} [{:.d$}–{:.d$}]",
        Summary::of(values).show(decimals),
        quartile(0.25),
        quartile(0.75),
        d = decimals
    )
}

/// The 1-minute load average, from /proc/loadavg.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .next()
        .unwrap_or("?")
        .to_owned()
}

fn cpu_over(pid: u32, secs: f64) -> f64 {
    let before = cpu_time(pid);
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    100.0 * (cpu_time(pid) - before).as_secs_f64() / started.elapsed().as_secs_f64()
}

/// CPU the app uses while agents sit idle.
pub(crate) fn idle(ctx: &Ctx) -> anyhow::Result<()> {
    let krad = Krad::start(&ctx.krad, &[])?;
    std::thread::sleep(Duration::from_secs(1));
    let secs = 10.0;
    let empty = cpu_over(krad.pid, secs);
    let (rss0, threads0) = (rss_kib(krad.pid), threads(krad.pid));
    let mut ids = Vec::new();
    for _ in 0..50 {
        let spawn = Spawn {
            profile: Some("shell".to_owned()),
            ..Spawn::default()
        };
        ids.push(krad.call(spawn).context("Spawn")?.terminal);
    }
    // The shell profile's quiet time is 3 s: let them all settle into idle.
    std::thread::sleep(Duration::from_secs(5));
    let list = krad.call(List::default())?;
    let idle = list.iter().filter(|r| r.state == AgentState::Idle).count();
    let busy = cpu_over(krad.pid, secs);
    let (rss1, threads1) = (rss_kib(krad.pid), threads(krad.pid));
    ctx.out(&format!(
        "### Idle agents\n\nThe app's own CPU time (user + system, /proc/PID/stat) over {secs:.0} s.\n\n\
         | app | CPU % of a core | RSS, MiB | threads |\n|---|---:|---:|---:|\n\
         | no agents | {empty:.2} | {:.1} | {threads0} |\n\
         | 50 `shell` agents ({idle} of them idle) | {busy:.2} | {:.1} | {threads1} |\n",
        rss0 as f64 / 1024.0,
        rss1 as f64 / 1024.0,
    ));
    Ok(())
}
