//! The load generator, the same for the app and its baseline: `clients` threads,
//! each in a closed loop of connect, write the request, read to EOF — over TCP
//! (the bus) or a Unix socket (the durable facet).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::util::{CpuTimes, CpuUse, cpu_between, percentile};

/// What one run of the load generator saw.
#[derive(Debug, Clone, Default)]
pub(crate) struct Run {
    /// Requests answered as expected.
    pub answered: u64,
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
pub(crate) fn closed_loop(
    endpoint: SocketAddr,
    line: &[u8],
    expect: &[u8],
    clients: usize,
    duration: Duration,
) -> Run {
    drive(line, expect, clients, duration, move || {
        TcpStream::connect(endpoint)
    })
}

/// [`closed_loop`] over the Unix socket at `path`: `request` is a whole HTTP/1.1
/// request (with `Connection: close`, so that the server closes after answering).
pub(crate) fn closed_loop_unix(
    path: &Path,
    request: &[u8],
    expect: &[u8],
    clients: usize,
    duration: Duration,
) -> Run {
    let path: Arc<Path> = path.into();
    drive(request, expect, clients, duration, move || {
        UnixStream::connect(&path)
    })
}

/// What a client needs of a connection: read, write and a read timeout.
trait Stream: Read + Write {
    fn read_timeout(&self, timeout: Duration) -> std::io::Result<()>;
}

impl Stream for TcpStream {
    fn read_timeout(&self, timeout: Duration) -> std::io::Result<()> {
        self.set_read_timeout(Some(timeout))
    }
}

impl Stream for UnixStream {
    fn read_timeout(&self, timeout: Duration) -> std::io::Result<()> {
        self.set_read_timeout(Some(timeout))
    }
}

fn drive<S, C>(line: &[u8], expect: &[u8], clients: usize, duration: Duration, connect: C) -> Run
where
    S: Stream,
    C: Fn() -> std::io::Result<S> + Clone + Send + 'static,
{
    let line: Arc<[u8]> = line.into();
    let expect: Arc<[u8]> = expect.into();
    let cpu = CpuTimes::now();
    let started = Instant::now();
    let end = started + duration;
    let workers: Vec<_> = (0..clients)
        .map(|_| {
            let line = line.clone();
            let expect = expect.clone();
            let connect = connect.clone();
            std::thread::spawn(move || one_client(&connect, &line, &expect, end))
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
        answered: ok,
        errors,
        per_sec: ok as f64 / elapsed.as_secs_f64(),
        p50_us: percentile(&latencies, 50.0),
        p99_us: percentile(&latencies, 99.0),
        cpu,
    }
}

fn one_client<S: Stream>(
    connect: &impl Fn() -> std::io::Result<S>,
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
        let result = connect().and_then(|mut stream| {
            stream.read_timeout(Duration::from_secs(10))?;
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
