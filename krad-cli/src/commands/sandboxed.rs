//! `krad internal sandboxed [--listen 127.0.0.1:PORT --to SOCKET] [--net
//! SOCKET [--relay 127.0.0.1:PORT]…] [--inbound SOCKET] -- PROGRAM…`
//! (hidden): the first process inside an agent's sandbox (docs/sandbox.md).
//!
//! * It takes the terminal's foreground: a process group of its own, made
//!   the terminal's, so that Ctrl-C and the other keys that signal reach the
//!   program and not bubblewrap outside (which would end the sandbox).
//! * In a sandbox without a network (`--listen`, `--to`), it takes the bus's
//!   address in the sandbox's own network namespace, where nothing else
//!   listens, and passes every connection to the app's Unix socket (bound
//!   into the sandbox).
//! * In a sandbox with an allowlist (`--net`), it also takes a port for the
//!   app's HTTP proxy, points the program at it (`HTTPS_PROXY`, `HTTP_PROXY`,
//!   `ALL_PROXY`, lower case too; loopback left out by `NO_PROXY`), and takes
//!   each allowed loopback address (`--relay`): every connection to them goes
//!   to the app's network socket, which checks, logs and connects
//!   (krad-app's `sandbox::net`).
//! * In a sandbox with a network of its own and an environment with ports
//!   (`--inbound`), it listens on a Unix socket in a folder of the app's
//!   bound into the sandbox: for each connection the app sends the port (2
//!   bytes, big-endian), it connects to that port on the sandbox's loopback
//!   and answers one byte (ok, or refused), then copies both ways: the
//!   environment's ports reached from the machine (krad-app's
//!   `sandbox::inbound`).
//! * It runs the program and ends as the program ended: its exit code, the
//!   signal that killed it, or 128 + the signal for Ctrl-C and Ctrl-\\,
//!   which it outlives itself.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;

use crate::exit::Exit;

/// Arguments of `krad internal sandboxed`.
#[derive(Debug, clap::Args)]
pub(crate) struct SandboxedArgs {
    /// The address to take in the sandbox: the bus's, as its programs know it.
    #[arg(long, value_name = "ADDR", requires = "to")]
    pub listen: Option<SocketAddr>,
    /// The app's Unix socket that leads to the bus.
    #[arg(long, value_name = "PATH", requires = "listen")]
    pub to: Option<PathBuf>,
    /// The app's network socket of this sandbox (its proxy and relays).
    #[arg(long, value_name = "PATH")]
    pub net: Option<PathBuf>,
    /// A loopback address to take in the sandbox and relay through `--net`.
    #[arg(long, value_name = "ADDR", requires = "net")]
    pub relay: Vec<SocketAddr>,
    /// The Unix socket to make, on which the app reaches ports inside.
    #[arg(long, value_name = "PATH")]
    pub inbound: Option<PathBuf>,
    /// The program and its arguments.
    #[arg(last = true, required = true)]
    pub program: Vec<String>,
}

/// Takes the foreground, relays the bus if asked, runs the program; ends as
/// it ended.
pub(crate) fn run(args: SandboxedArgs) -> anyhow::Result<Exit> {
    take_the_foreground();
    end_with_the_terminal();
    // The ports this process takes itself, which lead out of the sandbox.
    let mut outward = Vec::new();
    if let (Some(listen), Some(to)) = (args.listen, args.to) {
        outward.push(take(listen, to, None)?.port());
    }
    let mut proxy = None;
    if let Some(net) = args.net {
        for addr in args.relay {
            outward.push(take(addr, net.clone(), Some(format!("relay {addr}\n")))?.port());
        }
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        let taken = take(loopback, net, Some("proxy\n".into()))?;
        outward.push(taken.port());
        proxy = Some(taken);
    }
    if let Some(inbound) = &args.inbound {
        serve_inbound(inbound, outward)?;
    }
    // Keys like Ctrl-C reach the program (same process group); the relay
    // lives on until it ends. tokio installs a handler (not SIG_IGN, which
    // the program would inherit), which stays for the process's life.
    let signals = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .context("cannot start the relay's signal handling")?;
    signals.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        for kind in [SignalKind::interrupt(), SignalKind::quit()] {
            let _ = signal(kind);
        }
    });
    let (program, rest) = args.program.split_first().context("no program to run")?;
    let mut command = Command::new(program);
    command.args(rest);
    if let Some(proxy) = proxy {
        let url = format!("http://{proxy}");
        for name in ["HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"] {
            command.env(name, &url).env(name.to_lowercase(), &url);
        }
        let mut no_proxy = String::from("localhost,127.0.0.1,::1");
        if let Ok(more) = std::env::var("NO_PROXY").or_else(|_| std::env::var("no_proxy")) {
            no_proxy = format!("{no_proxy},{more}");
        }
        command
            .env("NO_PROXY", &no_proxy)
            .env("no_proxy", &no_proxy);
    }
    let status = command
        .status()
        .with_context(|| format!("cannot run {program}"))?;
    use std::os::unix::process::ExitStatusExt;
    if let Some(signal) = status.signal() {
        // A signal the relay does not handle ends it the same way; one it
        // does (Ctrl-C, Ctrl-\\) as a shell says it: 128 + the signal.
        if let Ok(signal) = nix::sys::signal::Signal::try_from(signal)
            && !matches!(
                signal,
                nix::sys::signal::Signal::SIGINT | nix::sys::signal::Signal::SIGQUIT
            )
        {
            let _ = nix::sys::signal::raise(signal);
        }
        std::process::exit(128 + signal);
    }
    std::process::exit(status.code().unwrap_or(1));
}

/// Makes a process group of this process the terminal's foreground (when
/// standard input is a terminal), SIGTTOU held off meanwhile.
fn take_the_foreground() {
    use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};
    let stdin = std::io::stdin();
    if !nix::unistd::isatty(&stdin).unwrap_or(false) {
        return;
    }
    let mut ttou = SigSet::empty();
    ttou.add(Signal::SIGTTOU);
    let _ = sigprocmask(SigmaskHow::SIG_BLOCK, Some(&ttou), None);
    let me = nix::unistd::getpid();
    if nix::unistd::setpgid(me, me).is_ok() {
        let _ = nix::unistd::tcsetpgrp(&stdin, me);
    }
    let _ = sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&ttou), None);
}

/// Ends the program with its terminal, as outside a sandbox. When the app
/// that holds the terminal dies (SIGKILL), the terminal hangs up: the kernel
/// tells only the session's leader (bubblewrap outside, which does not pass
/// it on), not the foreground group this process made — so the agent, and
/// the sandbox with it, would live on, orphaned. A thread waits for the
/// hangup and sends the group SIGHUP: this process ends of it, and with it
/// the sandbox (its first process ends with its child, and the kernel ends
/// what is left in its PID namespace).
fn end_with_the_terminal() {
    match nix::unistd::isatty(std::io::stdin()) {
        Ok(true) => {}
        // Not a terminal: nothing to follow.
        Ok(false) => return,
        // Hung up already (the app died as the sandbox started): the
        // program does not start.
        Err(_) => std::process::exit(128 + nix::sys::signal::SIGHUP as i32),
    }
    std::thread::spawn(|| {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        use std::os::fd::AsFd;
        let stdin = std::io::stdin();
        let ended = PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL;
        loop {
            // No events asked for: poll answers the hangup alone.
            let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::empty())];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) if fds[0].revents().is_some_and(|r| r.intersects(ended)) => break,
                Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => return,
            }
        }
        let _ = nix::sys::signal::killpg(nix::unistd::getpgrp(), nix::sys::signal::SIGHUP);
    });
}

/// Takes `addr` in the sandbox and passes each connection to the Unix
/// socket `to`, `intro` first; answers the address taken.
fn take(addr: SocketAddr, to: PathBuf, intro: Option<String>) -> anyhow::Result<SocketAddr> {
    let listener =
        TcpListener::bind(addr).with_context(|| format!("cannot take {addr} in the sandbox"))?;
    let taken = listener.local_addr()?;
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (to, intro) = (to.clone(), intro.clone());
            std::thread::spawn(move || relay(stream, &to, intro.as_deref()));
        }
    });
    Ok(taken)
}

/// Passes one connection to the Unix socket `to`, `intro` first.
fn relay(tcp: TcpStream, to: &Path, intro: Option<&str>) {
    let Ok(mut unix) = UnixStream::connect(to) else {
        return;
    };
    if let Some(intro) = intro
        && std::io::Write::write_all(&mut unix, intro.as_bytes()).is_err()
    {
        return;
    }
    copy_both_ways(tcp, unix);
}

/// Makes the Unix socket `path` and serves the app's connections to ports
/// inside on it, but for the `outward` ones (relayed out of the sandbox: a
/// connection in to one of them would come back out, to the app's listener
/// on that port, in a loop).
fn serve_inbound(path: &Path, outward: Vec<u16>) -> anyhow::Result<()> {
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path)
        .with_context(|| format!("cannot make the inbound socket {}", path.display()))?;
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let outward = outward.clone();
            std::thread::spawn(move || inbound(stream, &outward));
        }
    });
    Ok(())
}

/// One connection from the app: the port it names, connected to on the
/// sandbox's loopback (127.0.0.1, else ::1), or refused.
fn inbound(mut unix: UnixStream, outward: &[u16]) {
    use std::io::{Read, Write};
    // The app sends its header at once; a peer that does not is left.
    let _ = unix.set_read_timeout(Some(INBOUND_HEADER));
    let mut port = [0u8; 2];
    if unix.read_exact(&mut port).is_err() {
        return;
    }
    let _ = unix.set_read_timeout(None);
    let port = u16::from_be_bytes(port);
    let inside = [
        SocketAddr::from(([127, 0, 0, 1], port)),
        SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, port)),
    ]
    .iter()
    .filter(|_| !outward.contains(&port))
    .find_map(|addr| TcpStream::connect(addr).ok());
    let Some(tcp) = inside else {
        let _ = unix.write_all(&[krad_app::sandbox::inbound::REFUSED]);
        return;
    };
    if unix.write_all(&[krad_app::sandbox::inbound::OK]).is_err() {
        return;
    }
    copy_both_ways(tcp, unix);
}

/// How long the app's header may take to come.
const INBOUND_HEADER: std::time::Duration = std::time::Duration::from_secs(10);

/// Copies both ways between `tcp` and `unix`, each way until its reader
/// ends (then the other side's writing is shut), until both have.
fn copy_both_ways(tcp: TcpStream, unix: UnixStream) {
    let (Ok(mut tcp_in), Ok(mut unix_out)) = (tcp.try_clone(), unix.try_clone()) else {
        return;
    };
    let upstream = std::thread::spawn(move || {
        let _ = std::io::copy(&mut tcp_in, &mut unix_out);
        let _ = unix_out.shutdown(std::net::Shutdown::Write);
    });
    let (mut unix_in, mut tcp_out) = (unix, tcp);
    let _ = std::io::copy(&mut unix_in, &mut tcp_out);
    let _ = tcp_out.shutdown(std::net::Shutdown::Write);
    let _ = upstream.join();
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use krad_app::sandbox::inbound::{OK, REFUSED, header};

    use super::*;

    /// What the inner end answers the app for `port`, `outward` taken.
    fn answer(port: u16, outward: &[u16]) -> (u8, UnixStream) {
        let (mut app, inner) = UnixStream::pair().unwrap();
        let outward = outward.to_vec();
        std::thread::spawn(move || inbound(inner, &outward));
        app.write_all(&header(port)).unwrap();
        let mut status = [0u8];
        app.read_exact(&mut status).unwrap();
        (status[0], app)
    }

    #[test]
    fn a_port_inside_is_connected_to_and_one_relayed_out_or_closed_is_refused() {
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = server.local_addr().unwrap().port();
        let (status, mut app) = answer(port, &[]);
        assert_eq!(status, OK);
        let (mut accepted, _) = server.accept().unwrap();
        app.write_all(b"in").unwrap();
        let mut got = [0u8; 2];
        accepted.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"in");
        accepted.write_all(b"out").unwrap();
        drop(accepted);
        let mut back = Vec::new();
        app.read_to_end(&mut back).unwrap();
        assert_eq!(back, b"out");
        // A port this process relays out of the sandbox would loop back in.
        assert_eq!(answer(port, &[port]).0, REFUSED);
        drop(server);
        assert_eq!(answer(port, &[]).0, REFUSED);
    }
}
