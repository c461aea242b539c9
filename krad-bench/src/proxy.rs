//! What a sandbox's allowlist costs a connection (issue 39): the throughput
//! of a download through the whole path a contained agent's HTTPS takes —
//! its `HTTPS_PROXY` port, taken by `krad internal sandboxed` (a thread per
//! connection, to a Unix socket), the app's network of that sandbox
//! (`krad_app::sandbox::net`: CONNECT checked against the list, logged,
//! copied both ways by tokio) — against the same download straight from the
//! server, alternated.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::Context;
use krad_app::sandbox::net::{Net, Policy};

use crate::Ctx;
use crate::util::Summary;

/// The size of one write of the server.
const CHUNK: usize = 64 * 1024;

/// Prints the MiB/s of each way and their ratio.
pub(crate) fn proxy(ctx: &Ctx) -> anyhow::Result<()> {
    let bytes = ctx.mib * 1024 * 1024;
    let server = source(bytes)?;
    let dir = tempfile::tempdir()?;
    let socket = dir.path().join("net.sock");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let net = Net::new(1, Policy::new([server.to_string()]));
    runtime.block_on(async { net.serve(&socket) })?;
    // The sandbox's first process, outside any sandbox: it takes the proxy's
    // port on 127.0.0.1 and tells its program, which prints it and lives
    // until its standard input closes (so that nothing outlives the run).
    let mut inner = Command::new(&ctx.krad)
        .args(["internal", "sandboxed", "--net"])
        .arg(&socket)
        .args([
            "--",
            "sh",
            "-c",
            "echo \"$HTTPS_PROXY\"; exec cat >/dev/null",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot start krad internal sandboxed")?;
    let mut line = String::new();
    BufReader::new(inner.stdout.take().context("no stdout")?).read_line(&mut line)?;
    let proxy: SocketAddr = line
        .trim()
        .strip_prefix("http://")
        .and_then(|a| a.parse().ok())
        .with_context(|| format!("no proxy address from the sandbox's first process: {line:?}"))?;
    let rounds = ctx.repeats * 4;
    let (mut direct, mut proxied, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds + 1 {
        let a = download(server, None, bytes)?;
        let b = download(proxy, Some(server), bytes)?;
        if round > 0 {
            direct.push(a);
            proxied.push(b);
            ratios.push(b / a);
        }
    }
    drop(inner.stdin.take());
    let _ = inner.wait();
    let logged = net.info(None).attempts.len();
    anyhow::ensure!(logged == rounds + 1, "the proxy logged {logged} tunnels");
    let (direct, proxied, ratios) = (
        Summary::of(&direct),
        Summary::of(&proxied),
        Summary::of(&ratios),
    );
    ctx.out(&format!(
        "### A download through the sandbox's proxy and straight ({} MiB, {rounds} each, \
         alternated)\n\n| | MiB/s, median (min–max) |\n|---|---|\n\
         | straight from the server | {} |\n| through the proxy (CONNECT) | {} |\n\n\
         proxy ÷ straight, per pair: {}\n",
        ctx.mib,
        direct.show(0),
        proxied.show(0),
        ratios.show(2),
    ));
    Ok(())
}

/// A server on 127.0.0.1 that writes `bytes` to each connection, then closes.
fn source(bytes: usize) -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    std::thread::spawn(move || {
        let chunk = vec![b'x'; CHUNK];
        for stream in listener.incoming().flatten() {
            let chunk = chunk.clone();
            std::thread::spawn(move || {
                let mut stream = stream;
                let mut left = bytes;
                while left > 0 {
                    let n = left.min(CHUNK);
                    if stream.write_all(&chunk[..n]).is_err() {
                        return;
                    }
                    left -= n;
                }
            });
        }
    });
    Ok(addr)
}

/// Reads a whole download from `addr` (through CONNECT to `tunnel` when
/// given); its MiB/s.
fn download(addr: SocketAddr, tunnel: Option<SocketAddr>, bytes: usize) -> anyhow::Result<f64> {
    let started = Instant::now();
    let mut stream = TcpStream::connect(addr)?;
    if let Some(to) = tunnel {
        write!(stream, "CONNECT {to} HTTP/1.1\r\nHost: {to}\r\n\r\n")?;
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            anyhow::ensure!(stream.read(&mut byte)? == 1, "the proxy closed");
            head.push(byte[0]);
        }
        anyhow::ensure!(
            head.starts_with(b"HTTP/1.1 200"),
            "the proxy answered {}",
            String::from_utf8_lossy(&head)
        );
    }
    let mut buffer = vec![0u8; CHUNK];
    let mut got = 0;
    loop {
        let n = stream.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        got += n;
    }
    anyhow::ensure!(got == bytes, "read {got} of {bytes} bytes");
    Ok(bytes as f64 / (1024.0 * 1024.0) / started.elapsed().as_secs_f64())
}
