//! bubblewrap's command line: what a sandbox is made of (its mounts, its
//! network, its first process), for a terminal's sandbox and a check's alike
//! ([`super::wrap`], [`super::wrap_check`]). Owns no state; reads the
//! sandbox's settings and where the worktrees are, and must never import
//! a request or another domain's handle.

use std::path::{Path, PathBuf};

use krad_bus::protocol::{ApiError, ErrorCode};

use super::Sandbox;

/// `bwrap` on PATH, or `failed` saying what to install.
pub(super) fn bwrap() -> Result<PathBuf, ApiError> {
    find_bwrap().ok_or_else(|| {
        ApiError::new(
            ErrorCode::Failed,
            "this agent runs in a sandbox ([sandbox] or \"sandbox\": true), which needs \
             bubblewrap: apt-get install bubblewrap",
        )
    })
}

/// The user's home, when it is one.
pub(super) fn user_home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute() && h != Path::new("/"))
}

/// What one sandbox's command line is made of.
pub(super) struct Parts<'a> {
    pub(super) bwrap: PathBuf,
    /// The user's home, which the private one covers.
    pub(super) home: Option<PathBuf>,
    pub(super) private_home: &'a Path,
    /// The one writable place.
    pub(super) cwd: &'a Path,
    /// The program's environment (its `PATH`'s tools under /tmp).
    pub(super) env: &'a [(String, String)],
    pub(super) readable: &'a [PathBuf],
    /// The bus's socket, without a network.
    pub(super) bus_socket: Option<PathBuf>,
    /// With an allowlist: the network's socket, the loopback ports to relay,
    /// and whether its folder is bound (else the socket alone).
    pub(super) net: Option<(PathBuf, Vec<u16>, bool)>,
    /// The inbound socket to make, in a folder bound.
    pub(super) inbound: Option<PathBuf>,
}

/// bubblewrap's command line of `parts`, then `krad internal sandboxed`, then
/// `argv`.
pub(super) fn command_line(sandbox: &Sandbox, parts: Parts<'_>, argv: Vec<String>) -> Vec<String> {
    let settings = &sandbox.settings;
    let own_network = settings.config.sandbox.own_network();
    let mut args = vec![parts.bwrap.display().to_string()];
    let mut push = |words: &[&str]| args.extend(words.iter().map(|w| (*w).to_owned()));
    push(&["--ro-bind", "/", "/", "--dev-bind", "/dev", "/dev"]);
    push(&["--unshare-pid", "--proc", "/proc", "--tmpfs", "/tmp"]);
    if own_network {
        push(&["--unshare-net"]);
    }
    let path = |p: &Path| p.display().to_string();
    // Each mount covers what came before it, in this order: the private home
    // over the user's; the repository again, read-only (it may live under the
    // home); then what must not be seen, wherever it lives — the app's state
    // (in the repository's git folder: other sandboxes' homes among it) and
    // tokens, api.json, other worktrees; last, what this agent may use.
    if let Some(home) = &parts.home {
        args.extend(["--bind".into(), path(parts.private_home), path(home)]);
    }
    let root = &settings.root;
    args.extend(["--ro-bind".into(), path(root), path(root)]);
    // The tools on the agent's PATH stay runnable where the private /tmp
    // would hide them (an agent CLI installed under /tmp), read-only; and
    // `krad` itself, which the sandbox runs first, whatever the PATH.
    let mut tools = tools_under_tmp(parts.env);
    if let Some(dir) = settings.krad.parent()
        && dir.starts_with("/tmp")
        && !tools.iter().any(|t| t == dir)
    {
        tools.push(dir.to_path_buf());
    }
    for dir in tools {
        args.extend(["--ro-bind".into(), path(&dir), path(&dir)]);
    }
    for dir in [&settings.state_dir, &settings.token_dir] {
        if dir.is_dir() {
            args.extend(["--tmpfs".to_owned(), path(dir)]);
        }
    }
    if let Ok(api_json) = krad_bus::api_json::default_path()
        && api_json.exists()
    {
        args.extend(["--ro-bind".into(), "/dev/null".into(), path(&api_json)]);
    }
    let worktrees = crate::environments::worktrees_dir(&sandbox.environments, None);
    if worktrees.is_dir() {
        args.extend(["--tmpfs".into(), path(&worktrees)]);
    }
    args.extend(["--bind".into(), path(parts.cwd), path(parts.cwd)]);
    // A worktree's own git folder (its index and HEAD), so that git works there.
    if let Some(git_dir) = worktree_git_dir(parts.cwd) {
        args.extend(["--bind".into(), path(&git_dir), path(&git_dir)]);
    }
    for file in parts.readable.iter().filter(|f| f.exists()) {
        args.extend(["--ro-bind".into(), path(file), path(file)]);
    }
    // The sockets' folders (or a check's network socket alone).
    let mut bound: Vec<&Path> = Vec::new();
    bound.extend(parts.bus_socket.iter().filter_map(|s| s.parent()));
    if let Some((socket, _, folder)) = &parts.net {
        bound.extend(if *folder {
            socket.parent()
        } else {
            Some(socket.as_path())
        });
    }
    bound.extend(parts.inbound.iter().filter_map(|s| s.parent()));
    for place in bound {
        args.extend(["--bind".into(), path(place), path(place)]);
    }
    args.extend([
        "--die-with-parent".into(),
        "--chdir".into(),
        path(parts.cwd),
        "--".into(),
    ]);
    // The first process inside: the terminal's foreground (so that Ctrl-C
    // reaches the program, not bubblewrap) and, without a network, the bus's
    // own address relayed to the app's socket.
    args.extend([path(&settings.krad), "internal".into(), "sandboxed".into()]);
    if let Some(socket) = &parts.bus_socket {
        args.extend([
            "--listen".into(),
            settings.endpoint.to_string(),
            "--to".into(),
            path(socket),
        ]);
    }
    if let Some((socket, ports, _)) = &parts.net {
        args.extend(["--net".into(), path(socket)]);
        for port in ports.iter().filter(|p| **p != settings.endpoint.port()) {
            args.extend(["--relay".into(), format!("127.0.0.1:{port}")]);
        }
    }
    if let Some(socket) = &parts.inbound {
        args.extend(["--inbound".into(), path(socket)]);
    }
    args.push("--".into());
    args.extend(argv);
    args
}

/// The directories on the agent's `PATH` (the Spawn's, else the app's) that
/// live under `/tmp`: a `node_modules/.bin` as its whole `node_modules` (its
/// commands are links into the packages beside it).
fn tools_under_tmp(env: &[(String, String)]) -> Vec<PathBuf> {
    let paths = env
        .iter()
        .rev()
        .find(|(name, _)| name == "PATH")
        .map(|(_, value)| std::ffi::OsString::from(value))
        .or_else(|| std::env::var_os("PATH"))
        .unwrap_or_default();
    let mut dirs: Vec<PathBuf> = Vec::new();
    for dir in std::env::split_paths(&paths) {
        if !dir.is_absolute() || !dir.starts_with("/tmp") || dir == Path::new("/tmp") {
            continue;
        }
        let dir = match dir.parent() {
            Some(parent)
                if dir.file_name().is_some_and(|n| n == ".bin")
                    && parent.file_name().is_some_and(|n| n == "node_modules") =>
            {
                parent.to_path_buf()
            }
            _ => dir,
        };
        if dir.is_dir() && !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    dirs
}

/// The git folder of the worktree at `cwd` (`gitdir:` in its `.git` file).
fn worktree_git_dir(cwd: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(cwd.join(".git")).ok()?;
    let dir = PathBuf::from(text.strip_prefix("gitdir:")?.trim());
    dir.is_absolute().then_some(dir).filter(|d| d.is_dir())
}

/// `bwrap` on PATH.
fn find_bwrap() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("bwrap"))
        .find(|candidate| candidate.is_file())
}
