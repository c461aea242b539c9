//! Ports: with `[environments] ports = N`, each new worktree environment (on
//! this machine) gets its own block of N TCP ports, handed out when it is
//! created and released when it is closed.
//!
//! * Each port is checked free by binding it on 127.0.0.1 when it is handed out.
//! * The block is kept in the store (`Kind::PortBlock`, written in the same
//!   transaction as the environment's record), so it survives restarts.
//! * Two apps on one machine never hand out the same port: a registry directory
//!   (`$XDG_RUNTIME_DIR/krad-ade/ports/`, or `~/.krad-ade/ports/`;
//!   `KRAD_ADE_PORTS_DIR` overrides) holds one `<port>.lock` file per port
//!   handed out, created exclusively and holding the owning app's pid, under an
//!   exclusive lock of the directory's `registry.lock`. A lock file of a dead
//!   pid is stale and reclaimed.
//! * Terminals, the setup command and `Code` runs in the environment see
//!   `KRAD_PORT` (the first), `KRAD_PORTS` (all, space-separated) and `PORT`
//!   unless the profile or the Spawn sets it ([`env_vars`]).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use krad_bus::protocol::{ApiError, ErrorCode, PortInUse};
use krad_store::{Kind, StoreError, Tx};

use crate::Core;

/// The first port handed out unless `[environments] first_port` says otherwise
/// (below Linux's ephemeral range, 32768–60999).
pub(crate) const FIRST_PORT: u16 = 20000;

/// Where the registry of ports handed out on this machine lives.
pub(crate) fn registry_dir() -> Option<PathBuf> {
    let non_empty = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = non_empty("KRAD_ADE_PORTS_DIR") {
        return Some(PathBuf::from(dir));
    }
    if let Some(dir) = non_empty("XDG_RUNTIME_DIR") {
        return Some(PathBuf::from(dir).join("krad-ade").join("ports"));
    }
    non_empty("HOME").map(|home| PathBuf::from(home).join(".krad-ade").join("ports"))
}

/// How many ports a new environment gets (0: none), from the config.
fn block_size(core: &Core, host: Option<&str>) -> u16 {
    if host.is_some() {
        return 0;
    }
    core.settings.config.environments.ports.unwrap_or(0)
}

/// The registry, locked for this app while it lives.
struct Registry {
    dir: PathBuf,
    _lock: File,
}

impl Registry {
    fn open() -> std::io::Result<Registry> {
        let dir = registry_dir()
            .ok_or_else(|| std::io::Error::other("neither XDG_RUNTIME_DIR nor HOME is set"))?;
        std::fs::create_dir_all(&dir)?;
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(dir.join("registry.lock"))?;
        lock.lock()?;
        Ok(Registry { dir, _lock: lock })
    }

    fn path(&self, port: u16) -> PathBuf {
        self.dir.join(format!("{port}.lock"))
    }

    /// The pid holding `port`, if a live one does.
    fn owner(&self, port: u16) -> Option<u32> {
        let text = std::fs::read_to_string(self.path(port)).ok()?;
        let pid: u32 = text.trim().parse().ok()?;
        (pid == std::process::id() || krad_bus::api_json::pid_alive(pid)).then_some(pid)
    }

    /// Takes `port` for this app when no live app holds it.
    fn take(&self, port: u16) -> bool {
        let path = self.path(port);
        for _ in 0..2 {
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
            {
                Ok(mut file) => {
                    return file
                        .write_all(std::process::id().to_string().as_bytes())
                        .is_ok();
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    if self.owner(port).is_some() {
                        return false;
                    }
                    // Stale: its app is gone.
                    let _ = std::fs::remove_file(&path);
                }
                Err(_) => return false,
            }
        }
        false
    }

    /// Takes back a port of this app's store after a restart.
    fn retake(&self, port: u16) -> bool {
        match self.owner(port) {
            Some(pid) if pid != std::process::id() => false,
            Some(_) => true,
            None => {
                let _ = std::fs::remove_file(self.path(port));
                self.take(port)
            }
        }
    }

    /// Gives `port` back, when this app holds it.
    fn release(&self, port: u16) {
        if self.owner(port) == Some(std::process::id()) {
            let _ = std::fs::remove_file(self.path(port));
        }
    }
}

/// Whether `port` can be bound on 127.0.0.1 now.
fn bindable(port: u16) -> bool {
    TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)).is_ok()
}

/// Hands out a block for a new environment on `host` (none on a host, or
/// without `[environments] ports`): each port free in the registry and by a
/// bind test. Call with the environments lock held.
pub(crate) fn allocate(core: &Core, host: Option<&str>) -> Result<Vec<u16>, ApiError> {
    let size = block_size(core, host);
    if size == 0 {
        return Ok(Vec::new());
    }
    let failed =
        |e: String| ApiError::new(ErrorCode::Failed, format!("cannot hand out ports: {e}"));
    let registry = Registry::open().map_err(|e| failed(e.to_string()))?;
    let first = core
        .settings
        .config
        .environments
        .first_port
        .unwrap_or(FIRST_PORT);
    let mut block = Vec::with_capacity(usize::from(size));
    let mut port = first;
    while block.len() < usize::from(size) {
        if registry.take(port) {
            if bindable(port) {
                block.push(port);
            } else {
                registry.release(port);
            }
        }
        port = match port.checked_add(1) {
            Some(next) => next,
            None => {
                for taken in &block {
                    registry.release(*taken);
                }
                return Err(failed(format!("no {size} free ports from {first} up")));
            }
        };
    }
    Ok(block)
}

/// Writes an environment's block in a transaction (nothing for an empty one).
pub(crate) fn put(tx: &Tx<'_>, name: &str, block: &[u16]) -> Result<(), StoreError> {
    if block.is_empty() {
        return Ok(());
    }
    tx.put(Kind::PortBlock, name, block)
}

/// An environment's block (empty without one).
pub(crate) fn block(core: &Core, name: &str) -> Vec<u16> {
    core.store
        .db()
        .read(|tx| tx.get::<Vec<u16>>(Kind::PortBlock, name))
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Gives a block back to the registry without touching the store (a creation
/// that failed before its record was written).
pub(crate) fn give_back(block: &[u16]) {
    if block.is_empty() {
        return;
    }
    if let Ok(registry) = Registry::open() {
        for port in block {
            registry.release(*port);
        }
    }
}

/// Releases a closed environment's block: forgotten by the store, given back to
/// the registry. Call once the environment is removed.
pub(crate) fn release(core: &Core, name: &str) {
    let block = block(core, name);
    if let Err(e) = core
        .store
        .db()
        .write(|tx| tx.remove(Kind::PortBlock, name).map(|_| ()))
    {
        tracing::warn!(environment = name, "cannot forget the port block: {e}");
        return;
    }
    give_back(&block);
}

/// After a restart: takes the stored blocks back in the registry, and releases
/// those of environments that no longer exist.
pub(crate) fn restore(core: &Core) {
    let blocks = match core
        .store
        .db()
        .read(|tx| tx.all::<Vec<u16>>(Kind::PortBlock))
    {
        Ok(blocks) => blocks,
        Err(e) => {
            tracing::warn!("cannot read the port blocks: {e}");
            return;
        }
    };
    if blocks.is_empty() {
        return;
    }
    let registry = match Registry::open() {
        Ok(registry) => registry,
        Err(e) => {
            tracing::warn!("cannot open the port registry: {e}");
            return;
        }
    };
    for (name, block) in blocks {
        if core.store.environment(&name).is_none() {
            drop_block(core, &name, &block, &registry);
            continue;
        }
        for port in block {
            if !registry.retake(port) {
                tracing::warn!(
                    environment = name,
                    port,
                    "port of the environment is held by another app"
                );
            }
        }
    }
}

fn drop_block(core: &Core, name: &str, block: &[u16], registry: &Registry) {
    let _ = core
        .store
        .db()
        .write(|tx| tx.remove(Kind::PortBlock, name).map(|_| ()));
    for port in block {
        registry.release(*port);
    }
}

/// The variables an environment's programs see: `KRAD_PORT`, `KRAD_PORTS` and
/// `PORT` (the caller leaves `PORT` out when the user set it).
pub(crate) fn env_vars(block: &[u16]) -> Vec<(String, String)> {
    let Some(first) = block.first() else {
        return Vec::new();
    };
    let all: Vec<String> = block.iter().map(u16::to_string).collect();
    vec![
        ("KRAD_PORT".to_owned(), first.to_string()),
        ("KRAD_PORTS".to_owned(), all.join(" ")),
        ("PORT".to_owned(), first.to_string()),
    ]
}

/// Adds [`env_vars`] to `env`, keeping a `PORT` already there.
pub(crate) fn add_env(env: &mut Vec<(String, String)>, block: &[u16]) {
    let has_port = env.iter().any(|(k, _)| k == "PORT");
    for (k, v) in env_vars(block) {
        if k == "PORT" && has_port {
            continue;
        }
        env.push((k, v));
    }
}

/// The ports of a block that some program outside the environment holds
/// (listening on it): with the pid when /proc tells.
pub(crate) fn in_use(block: &[u16], environment_dir: &Path) -> Vec<PortInUse> {
    block
        .iter()
        .filter(|port| !bindable(**port))
        .filter_map(|&port| {
            let pid = listener_pid(port);
            let inside = pid
                .and_then(|pid| std::fs::read_link(format!("/proc/{pid}/cwd")).ok())
                .is_some_and(|cwd| cwd.starts_with(environment_dir));
            (!inside).then_some(PortInUse { port, pid })
        })
        .collect()
}

/// The pid listening on `port`, from /proc/net/tcp{,6} and /proc/*/fd.
fn listener_pid(port: u16) -> Option<u32> {
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() < 10 {
                continue;
            }
            let local_port = fields[1]
                .rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            // 0A: LISTEN.
            if local_port == Some(port) && fields[3] == "0A" {
                inodes.push(format!("socket:[{}]", fields[9]));
            }
        }
    }
    if inodes.is_empty() {
        return None;
    }
    for proc_entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = proc_entry.file_name().to_str().and_then(|p| p.parse().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(proc_entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if let Ok(target) = std::fs::read_link(fd.path())
                && inodes.iter().any(|i| Path::new(i) == target)
            {
                return Some(pid);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_keeps_a_port_the_user_set() {
        let mut env = vec![("PORT".to_owned(), "1".to_owned())];
        add_env(&mut env, &[20000, 20001]);
        assert_eq!(
            env,
            vec![
                ("PORT".to_owned(), "1".to_owned()),
                ("KRAD_PORT".to_owned(), "20000".to_owned()),
                ("KRAD_PORTS".to_owned(), "20000 20001".to_owned()),
            ]
        );
        let mut env = Vec::new();
        add_env(&mut env, &[]);
        assert!(env.is_empty());
    }

    #[test]
    fn a_listening_port_is_seen_with_its_pid() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(!bindable(port));
        assert_eq!(listener_pid(port), Some(std::process::id()));
        let used = in_use(&[port], Path::new("/nonexistent-env"));
        assert_eq!(
            used,
            vec![PortInUse {
                port,
                pid: Some(std::process::id())
            }]
        );
    }
}
