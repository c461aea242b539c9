//! The load generator, the same for the app and its baseline: `clients` threads,
//! each in a closed loop of connect, write the line, read to EOF.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::util::{CpuTimes, CpuUse, cpu_between, percentile};

/// What one run of the load generator saw.
#[derive(Debug, Clone, Default)]
pub struct Run {
    /// Connections that failed or got the wrong answer.
    pub errors: u64,
    /// Answered requests per second.
    pub per_sec: f64,
    /// Median latency, µs.
    pub p50_us: u32,
    /// 99th percentile latency, µs.
    pub p99_us: u32,
    /// The machine's CPU meanwhile.
    pub cpu: CpuUse,
}

/// Runs `clients` closed loops against `endpoint` for `duration`. An answer is
/// right when it starts with `expect`.
pub fn closed_loop(
    endpoint: SocketAddr,
    line: &[u8],
    expect: &[u8],
    clients: usize,
    duration: Duration,
) -> Run {
    let line: Arc<[u8]> = line.into();
    let expect: Arc<[u8]> = expect.into();
    let cpu = CpuTimes::now();
    let started = Instant::now();
    let end = started + duration;
    let workers: Vec<_> = (0..clients)
        .map(|_| {
            let line = line.clone();
            let expect = expect.clone();
            std::thread::spawn(move || one_client(endpoint, &line, &expect, end))
        })
        .collect();
    let mut ok = 0;
    let mut errors = 0;
    let mut latencies = Vec::new();
    for worker in workers {
        if let Ok((o, e, l)) = worker.join() {
            ok += o;
            errors += e;
            latencies.extend(l);
        }
    }
    let elapsed = started.elapsed();
    let cpu = cpu_between(cpu, CpuTimes::now());
    latencies.sort_unstable();
    Run {
        errors,
        per_sec: ok as f64 / elapsed.as_secs_f64(),
        p50_us: percentile(&latencies, 50.0),
        p99_us: percentile(&latencies, 99.0),
        cpu,
    }
}

fn one_client(
    endpoint: SocketAddr,
    line: &[u8],
    expect: &[u8],
    end: Instant,
) -> (u64, u64, Vec<u32>) {
    let mut ok = 0;
    let mut errors = 0;
    let mut latencies = Vec::with_capacity(64 * 1024);
    let mut answer = Vec::with_capacity(64 * 1024);
    while Instant::now() < end {
        let started = Instant::now();
        answer.clear();
        let result = TcpStream::connect(endpoint).and_then(|mut stream| {
            stream.set_read_timeout(Some(Duration::from_secs(10)))?;
            stream.write_all(line)?;
            stream.read_to_end(&mut answer)
        });
        match result {
            Ok(_) if answer.starts_with(expect) => {
                ok += 1;
                latencies.push(started.elapsed().as_micros().min(u32::MAX as u128) as u32);
            }
            _ => {
                errors += 1;
                // Do not spin on a refusing server.
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
    (ok, errors, latencies)
}
