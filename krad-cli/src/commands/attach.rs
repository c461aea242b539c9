//! `krad attach`: puts the user's terminal on an agent's terminal — its real
//! TUI — until the detach key (Ctrl-\ by default), the program's end or the
//! app's, then prints where the agent is.
//!
//! On the default host it speaks the Attach stream: the user's terminal goes to
//! raw mode and the alternate screen, the first message redraws the agent's
//! screen, keystrokes go up as `Input`, size changes as `Resize`, output comes
//! down as it is printed. The terminal is put back as it was on every way out:
//! detach, the program's end, the app gone, SIGTERM/SIGHUP/SIGINT, and panics
//! (a guard, and a panic hook for other threads). For a terminal that lives in
//! tmux it runs `tmux attach` on it instead (unless `--stream`, or when already
//! inside tmux), with the same detach key bound in the app's tmux server.

use std::io::{IsTerminal, Write};
use std::net::TcpStream;
use std::time::Duration;

use anyhow::Context;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use krad_bus::client::{ClientError, Item, Line, Lines};
use krad_bus::protocol::AgentRecord;
use krad_bus::protocol::{
    AttachInput, AttachMessage, DataInfo, ExitedInfo, ResizeInfo, ScreenInfo, TmuxInfo,
};
use krad_bus::request::{attach::Attach, check::Check};
use serde::Serialize;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};

use crate::connect::{AppConnection, ConnectArgs, answer_failure, client_failure};
use crate::exit::{Exit, Failure};
use crate::print;
use crate::render::Agent;

/// How long the app may take with the first message.
const FIRST_MESSAGE: Duration = Duration::from_secs(10);

/// Arguments of `krad attach`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Detach with the detach key (Ctrl-\\ unless --detach-key says otherwise); the program goes on. \
krad attach also ends when the program exits or the app stops, and always gives the terminal \
back as it was. It works from inside a krad terminal too (a lead terminal may attach to any \
terminal, a plain one to those it spawned).

A terminal that lives in tmux ([terminals] host = \"tmux\") is attached with `tmux attach` on \
its own session; the detach key is bound there too (tmux's own prefix, Ctrl-b d, also works).

Examples:
  krad attach 4
  krad attach 4 --detach-key ctrl-]
  krad attach 4 --stream          # the Attach stream even for a tmux terminal")]
pub(crate) struct AttachArgs {
    /// The terminal id, or the agent's name.
    #[arg(value_name = "TARGET", value_parser = super::parse_target)]
    pub target: super::Target,
    /// The key that detaches: ctrl-<key> (ctrl-\, ctrl-], ctrl-a … ctrl-z, ctrl-^, ctrl-_), also written C-<key> or ^<key>.
    #[arg(long, value_name = "KEY", default_value = "ctrl-\\", value_parser = parse_detach_key)]
    pub detach_key: u8,
    /// Speak the Attach stream even to a terminal that lives in tmux.
    #[arg(long)]
    pub stream: bool,
}

/// How an attachment ended.
#[derive(Debug, Clone)]
enum Ending {
    /// The user pressed the detach key (or stdin ended).
    Detached,
    /// The program ended.
    Exited(ExitedInfo),
    /// The app said it is stopping.
    AppStopping,
    /// The connection to the app broke.
    AppGone,
    /// A signal asked krad attach to end.
    Signal(&'static str),
}

/// Attaches, and says where the agent is once detached.
pub(crate) fn run(args: AttachArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        return Err(Failure::new(
            Exit::Usage,
            "krad attach needs a terminal (stdin and stdout); for output use `krad output`",
        )
        .into());
    }
    let bus = AppConnection::find(connect)?;
    let target = args.target.resolve(&bus)?;
    let lines = bus
        .client()
        .attach(Attach { target })
        .map_err(client_failure)?;
    let Attached {
        first,
        stream,
        early,
    } = first_message(lines)?;
    if let Some(failure) = answer_failure(&first.raw) {
        return Err(failure.into());
    }
    let Item::Message(AttachMessage::Screen(ScreenInfo {
        data,
        tmux,
        cols,
        rows,
        ..
    })) = first.item
    else {
        return Err(Failure::new(
            Exit::Failure,
            format!("unexpected first message of Attach: {}", first.raw),
        )
        .into());
    };
    let inside_tmux = std::env::var_os("TMUX").is_some_and(|v| !v.is_empty());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let ending = match tmux {
        Some(TmuxInfo {
            socket,
            session,
            window,
        }) if !args.stream && !inside_tmux => {
            drop(stream);
            runtime.block_on(native_tmux(&socket, &session, &window, args.detach_key))?
        }
        _ => {
            let screen = BASE64
                .decode(data)
                .map_err(|e| Failure::new(Exit::Failure, format!("a bad Screen message: {e}")))?;
            runtime.block_on(stream_attach(
                stream,
                early,
                screen,
                args.detach_key,
                (cols, rows),
            ))?
        }
    };
    // The stdin reader may still wait for a key: do not wait for it.
    runtime.shutdown_background();
    report(&bus, target, ending, json)
}

/// Reads the app's first message (a `Screen`, or an error answer), and what was
/// read after it (the start of the next messages).
fn first_message(mut lines: Lines<AttachMessage>) -> Result<Attached, Failure> {
    let broken = |e: std::io::Error| {
        Failure::new(
            Exit::Unreachable,
            format!("the app went away before attaching: {e}"),
        )
    };
    lines
        .set_read_timeout(Some(FIRST_MESSAGE))
        .map_err(broken)?;
    let first = match lines.next() {
        None => {
            return Err(Failure::new(
                Exit::Unreachable,
                "the app closed the connection without answering",
            ));
        }
        Some(Err(ClientError::Io(e))) => return Err(broken(e)),
        // Not JSON: "the app's answer could not be read: …".
        Some(Err(e)) => return Err(Failure::new(Exit::Failure, e.to_string())),
        Some(Ok(first)) => first,
    };
    lines.set_read_timeout(None).map_err(broken)?;
    let (stream, early) = lines.into_parts();
    Ok(Attached {
        first,
        stream,
        early,
    })
}

/// An Attach whose first message was read.
struct Attached {
    /// The first message.
    first: Line<AttachMessage>,
    /// The connection, for the lines both ways.
    stream: TcpStream,
    /// What was read after the first message.
    early: Vec<u8>,
}

/// The Attach stream, with the user's terminal in raw mode until it ends.
/// `before` is the terminal's size as the attach found it: it comes back when
/// the user leaves (a detach, a signal), so that the agent's screen is read
/// as it was.
async fn stream_attach(
    stream: TcpStream,
    early: Vec<u8>,
    screen: Vec<u8>,
    detach_key: u8,
    before: (u16, u16),
) -> anyhow::Result<Ending> {
    use tokio::signal::unix::{SignalKind, signal};
    // Signals are caught before the terminal changes, so none leaves it raw.
    let mut winch = signal(SignalKind::window_change()).context("cannot catch SIGWINCH")?;
    let mut term = signal(SignalKind::terminate()).context("cannot catch SIGTERM")?;
    let mut hup = signal(SignalKind::hangup()).context("cannot catch SIGHUP")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot catch SIGINT")?;
    stream.set_nonblocking(true)?;
    let stream = tokio::net::TcpStream::from_std(stream)?;
    let (reader, mut writer) = stream.into_split();
    let mut lines = tokio::io::BufReader::new(std::io::Cursor::new(early).chain(reader));

    // The one terminal guard (krad-tui's): raw mode and the alternate
    // screen, everything an attached program set undone on every way out.
    let _guard = krad_tui::TerminalGuard::enter_with(b"\x1b[?1049h\x1b[H\x1b[2J")
        .context("cannot put the terminal in raw mode")?;
    let (keys_tx, mut keys) = tokio::sync::mpsc::channel::<Vec<u8>>(16);
    std::thread::Builder::new()
        .name("krad-attach-stdin".into())
        .spawn(move || read_keys(&keys_tx))
        .context("cannot read the keyboard")?;
    write_out(&screen);
    if let Some(resize) = resize_message() {
        send(&mut writer, &resize).await;
    }
    let mut line = Vec::new();
    let ending = loop {
        tokio::select! {
            keys = keys.recv() => {
                let Some(keys) = keys else { break Ending::Detached };
                let (before, detach) = match keys.iter().position(|&b| b == detach_key) {
                    Some(at) => (&keys[..at], true),
                    None => (&keys[..], false),
                };
                if !before.is_empty() {
                    let input = AttachInput::Input(DataInfo { data: BASE64.encode(before) });
                    if !send(&mut writer, &input).await {
                        break Ending::AppGone;
                    }
                }
                if detach {
                    break Ending::Detached;
                }
            }
            read = lines.read_until(b'\n', &mut line) => {
                match read {
                    Ok(0) | Err(_) => break Ending::AppGone,
                    Ok(_) => {}
                }
                let message = serde_json::from_slice::<AttachMessage>(&line);
                line.clear();
                match message {
                    Ok(AttachMessage::Output(DataInfo { data }))
                    | Ok(AttachMessage::Screen(ScreenInfo { data, .. })) => {
                        if let Ok(bytes) = BASE64.decode(data) {
                            write_out(&bytes);
                        }
                    }
                    Ok(AttachMessage::Exited(exited)) => break Ending::Exited(exited),
                    Ok(AttachMessage::ShuttingDown) => break Ending::AppStopping,
                    // An `Error` answers a line of ours: nothing to show in raw
                    // mode; a line this CLI does not know, nothing to do.
                    Ok(AttachMessage::Error(_)) | Err(_) => {}
                }
            }
            _ = winch.recv() => {
                if let Some(resize) = resize_message()
                    && !send(&mut writer, &resize).await
                {
                    break Ending::AppGone;
                }
            }
            _ = term.recv() => break Ending::Signal("SIGTERM"),
            _ = hup.recv() => break Ending::Signal("SIGHUP"),
            _ = int.recv() => break Ending::Signal("SIGINT"),
        }
    };
    if matches!(ending, Ending::Detached | Ending::Signal(_)) {
        let (cols, rows) = before;
        if cols > 0 && rows > 0 {
            send(&mut writer, &AttachInput::Resize(ResizeInfo { cols, rows })).await;
        }
    }
    let _ = writer.shutdown().await;
    Ok(ending)
}

/// Reads the keyboard (raw bytes) until stdin ends.
fn read_keys(keys: &tokio::sync::mpsc::Sender<Vec<u8>>) {
    let mut stdin = std::io::stdin().lock();
    let mut buf = [0u8; 4096];
    loop {
        match std::io::Read::read(&mut stdin, &mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if keys.blocking_send(buf[..n].to_vec()).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// `Resize` with the user's terminal size; none when the terminal does not
/// say (a 0×0 terminal, as under `script`: the agent's size stays as it is).
fn resize_message() -> Option<AttachInput> {
    let (cols, rows) = crossterm::terminal::size().ok()?;
    (cols > 0 && rows > 0).then_some(AttachInput::Resize(ResizeInfo { cols, rows }))
}

/// Sends a line to the app; false when the connection broke.
async fn send(writer: &mut tokio::net::tcp::OwnedWriteHalf, input: &AttachInput) -> bool {
    writer.write_all(&input.to_line()).await.is_ok()
}

/// Writes the program's bytes to the user's terminal.
fn write_out(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(bytes).and_then(|()| out.flush());
}

/// `tmux attach` on the terminal's window — through a session of its own,
/// grouped with the app's and gone once detached, so that several people can
/// look at several terminals — with the detach key bound.
async fn native_tmux(
    socket: &str,
    session: &str,
    window: &str,
    detach_key: u8,
) -> anyhow::Result<Ending> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("cannot catch SIGTERM")?;
    let mut hup = signal(SignalKind::hangup()).context("cannot catch SIGHUP")?;
    let view = format!("{session}-view-{}", std::process::id());
    let mut command = tokio::process::Command::new("tmux");
    command.args(["-L", socket]);
    if let Some(key) = tmux_key(detach_key) {
        command.args(["bind-key", "-n", &key, "detach-client", ";"]);
    }
    // The window follows this terminal's size while it is attached.
    command.args([
        "new-session",
        "-t",
        session,
        "-s",
        &view,
        ";",
        "set-option",
        "destroy-unattached",
        "on",
        ";",
        "set-option",
        "-w",
        "-t",
        window,
        "window-size",
        "latest",
        ";",
        "select-window",
        "-t",
        window,
    ]);
    command.env_remove("TMUX").kill_on_drop(true);
    let mut child = command
        .spawn()
        .map_err(|e| Failure::new(Exit::Failure, format!("cannot run tmux: {e}")))?;
    let ending = tokio::select! {
        status = child.wait() => match status {
            Ok(status) if status.success() => Ending::Detached,
            Ok(_) => {
                return Err(Failure::new(
                    Exit::Failure,
                    format!("tmux could not show window {window} of {session} (is it still there?)"),
                )
                .into())
            }
            Err(e) => return Err(Failure::new(Exit::Failure, format!("tmux: {e}")).into()),
        },
        _ = term.recv() => Ending::Signal("SIGTERM"),
        _ = hup.recv() => Ending::Signal("SIGHUP"),
    };
    if matches!(ending, Ending::Signal(_)) {
        // tmux puts the terminal back itself when it ends.
        if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        let _ = child.wait().await;
    }
    if let Some(key) = tmux_key(detach_key) {
        unbind_after_the_last_view(socket, session, &view, &key).await;
    }
    Ok(ending)
}

/// The detach key is bound for the whole tmux server: once no other `krad
/// attach` views it, the binding goes, so that the key reaches programs again.
async fn unbind_after_the_last_view(socket: &str, session: &str, mine: &str, key: &str) {
    let listed = tokio::process::Command::new("tmux")
        .args(["-L", socket, "list-sessions", "-F", "#{session_name}"])
        .env_remove("TMUX")
        .output()
        .await;
    let Ok(listed) = listed else { return };
    let views = format!("{session}-view-");
    let others = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .any(|name| name.starts_with(&views) && name != mine);
    if !others {
        let _ = tokio::process::Command::new("tmux")
            .args(["-L", socket, "unbind-key", "-n", key])
            .env_remove("TMUX")
            .output()
            .await;
    }
}

/// tmux's name for a control key.
fn tmux_key(key: u8) -> Option<String> {
    match key {
        0x00 => Some("C-Space".into()),
        0x01..=0x1a => Some(format!("C-{}", char::from(b'a' + key - 1))),
        0x1c => Some("C-\\".into()),
        0x1d => Some("C-]".into()),
        0x1e => Some("C-^".into()),
        0x1f => Some("C-_".into()),
        _ => None,
    }
}

/// What `krad attach --json` prints once detached.
#[derive(Serialize)]
enum Detached<'a> {
    Attach {
        terminal: u64,
        ended: &'static str,
        exited: Option<&'a ExitedInfo>,
        agent: Option<&'a AgentRecord>,
    },
}

/// Prints how the attachment ended and where the agent is now.
fn report(bus: &AppConnection, target: u64, ending: Ending, json: bool) -> anyhow::Result<Exit> {
    let record = match &ending {
        Ending::AppGone | Ending::AppStopping => None,
        _ => {
            let request = Check {
                target,
                wait_secs: None,
                since_rev: None,
            };
            bus.send(request, None).ok().map(|reply| reply.answer)
        }
    };
    let (ended, exit) = match &ending {
        Ending::Detached => ("detached", Exit::Success),
        Ending::Exited(_) => ("exited", Exit::Success),
        Ending::AppStopping => ("app_stopping", Exit::Success),
        Ending::AppGone => ("app_gone", Exit::Unreachable),
        Ending::Signal(_) => ("signal", Exit::Success),
    };
    if json {
        print::message(&Detached::Attach {
            terminal: target,
            ended,
            exited: match &ending {
                Ending::Exited(info) => Some(info),
                _ => None,
            },
            agent: record.as_ref(),
        });
        return Ok(exit);
    }
    let where_now = record
        .as_ref()
        .map(|r| format!(": {}", Agent(r).summary_line()))
        .unwrap_or_default();
    let text = match &ending {
        Ending::Detached => format!("krad: detached from terminal {target}{where_now}"),
        Ending::Signal(name) => {
            format!("krad: detached from terminal {target} ({name}){where_now}")
        }
        Ending::Exited(info) => {
            let how = match (info.exit_code, info.signal) {
                (_, Some(signal)) => format!("was killed by signal {signal}"),
                (Some(code), None) => format!("exited with code {code}"),
                (None, None) => "ended".to_owned(),
            };
            format!("krad: the program of terminal {target} {how}{where_now}")
        }
        Ending::AppStopping => {
            format!("krad: the app is stopping; detached from terminal {target}")
        }
        Ending::AppGone => format!("krad: the app went away; detached from terminal {target}"),
    };
    print::line(&text);
    Ok(exit)
}

/// Parses `--detach-key`: ctrl-<key>, C-<key> or ^<key>.
pub(crate) fn parse_detach_key(text: &str) -> Result<u8, String> {
    let lower = text.trim().to_ascii_lowercase();
    let key = ["ctrl-", "ctrl+", "c-", "^"]
        .iter()
        .find_map(|prefix| lower.strip_prefix(prefix))
        .ok_or_else(|| format!("{text:?} is not a key like ctrl-\\ or ctrl-]"))?;
    let byte = match key {
        "space" | "@" => 0x00,
        "\\" => 0x1c,
        "]" => 0x1d,
        "^" => 0x1e,
        "_" => 0x1f,
        k if k.len() == 1 && k.as_bytes()[0].is_ascii_lowercase() => k.as_bytes()[0] - b'a' + 1,
        _ => return Err(format!("{text:?} is not a key like ctrl-\\ or ctrl-]")),
    };
    Ok(byte)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detach_keys_parse() {
        assert_eq!(parse_detach_key("ctrl-\\"), Ok(0x1c));
        assert_eq!(parse_detach_key("C-]"), Ok(0x1d));
        assert_eq!(parse_detach_key("^A"), Ok(0x01));
        assert_eq!(parse_detach_key("Ctrl-q"), Ok(0x11));
        assert!(parse_detach_key("q").is_err());
        assert!(parse_detach_key("ctrl-1").is_err());
    }

    #[test]
    fn tmux_names_the_keys() {
        assert_eq!(tmux_key(0x1c).as_deref(), Some("C-\\"));
        assert_eq!(tmux_key(0x01).as_deref(), Some("C-a"));
        assert_eq!(tmux_key(0x1d).as_deref(), Some("C-]"));
        assert_eq!(tmux_key(b'x'), None);
    }
}
