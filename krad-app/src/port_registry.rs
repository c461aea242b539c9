//! The machine-wide registry of TCP ports handed out to environments, shared by
//! every app on one machine — and by `krad internal ports`, which runs the same
//! code on an SSH host for the apps using that host.
//!
//! A registry directory (`$KRAD_ADE_PORTS_DIR`, else
//! `$XDG_RUNTIME_DIR/krad-ade/ports/`, else `~/.krad-ade/ports/`) holds one
//! `<port>.lock` file per port handed out, created exclusively (`O_EXCL`) under
//! an exclusive lock of the directory's `registry.lock`, holding its
//! [`Holder`]: the pid of an app of this machine (stale once that pid is dead),
//! or the id of an app of another machine (`app-<hex>`, held until that app
//! gives it back: this machine cannot tell whether it lives). A port is handed
//! out only when no live holder has it and it can be bound on 127.0.0.1 now.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use krad_bus::protocol::PortInUse;
use serde::{Deserialize, Serialize};

/// What `krad internal ports` prints (one JSON line), whichever it was asked.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct PortsAnswer {
    /// `claim`: the block handed out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<u16>,
    /// `retake`: the ports another live holder has now.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held_by_others: Vec<u16>,
    /// `release` and `retake`: the ports given back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub released: Vec<u16>,
    /// `in-use`: the ports a program outside the environment listens on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub in_use: Vec<PortInUse>,
}

/// Who holds a port of the registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// An app of this machine, by pid.
    Pid(u32),
    /// An app of another machine (through an SSH link), by its id: `app-`
    /// then 1–64 letters, digits, `.`, `_` or `-`.
    App(String),
}

impl Holder {
    /// This process.
    pub fn me() -> Holder {
        Holder::Pid(std::process::id())
    }

    /// An app id as `--owner` gives it, if well formed.
    pub fn app(id: &str) -> Option<Holder> {
        let rest = id.strip_prefix("app-")?;
        let ok = (1..=64).contains(&rest.len())
            && rest
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-');
        ok.then(|| Holder::App(id.to_owned()))
    }

    /// What a lock file holds.
    fn parse(text: &str) -> Option<Holder> {
        let text = text.trim();
        match text.parse::<u32>() {
            Ok(pid) => Some(Holder::Pid(pid)),
            Err(_) => Holder::app(text),
        }
    }

    fn text(&self) -> String {
        match self {
            Holder::Pid(pid) => pid.to_string(),
            Holder::App(id) => id.clone(),
        }
    }

    /// Whether it still holds its ports: a pid while it runs, an app of
    /// another machine until it releases them.
    fn live(&self) -> bool {
        match self {
            Holder::Pid(pid) => *pid == std::process::id() || krad_bus::api_json::pid_alive(*pid),
            Holder::App(_) => true,
        }
    }
}

/// Where the registry of this machine lives.
pub fn registry_dir() -> Option<PathBuf> {
    let non_empty = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = non_empty("KRAD_ADE_PORTS_DIR") {
        return Some(PathBuf::from(dir));
    }
    if let Some(dir) = non_empty("XDG_RUNTIME_DIR") {
        return Some(PathBuf::from(dir).join("krad-ade").join("ports"));
    }
    non_empty("HOME").map(|home| PathBuf::from(home).join(".krad-ade").join("ports"))
}

/// The registry, locked for this process while it lives.
pub struct Registry {
    dir: PathBuf,
    _lock: File,
}

impl Registry {
    /// Opens (creating it, 0700) and locks this machine's registry.
    pub fn open() -> std::io::Result<Registry> {
        let dir = registry_dir()
            .ok_or_else(|| std::io::Error::other("neither XDG_RUNTIME_DIR nor HOME is set"))?;
        Registry::open_in(dir)
    }

    /// Opens and locks the registry in `dir`.
    pub fn open_in(dir: PathBuf) -> std::io::Result<Registry> {
        if !dir.is_dir() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)?;
        }
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

    /// The live holder of `port`, if any.
    pub fn holder(&self, port: u16) -> Option<Holder> {
        let text = std::fs::read_to_string(self.path(port)).ok()?;
        Holder::parse(&text).filter(Holder::live)
    }

    /// Takes `port` for `me` when no live holder has it.
    pub fn take(&self, port: u16, me: &Holder) -> bool {
        let path = self.path(port);
        for _ in 0..2 {
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
            {
                Ok(mut file) => return file.write_all(me.text().as_bytes()).is_ok(),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    if self.holder(port).is_some() {
                        return false;
                    }
                    // Stale: its holder is gone (or the file is not ours to read).
                    let _ = std::fs::remove_file(&path);
                }
                Err(_) => return false,
            }
        }
        false
    }

    /// Takes back a port `me` was given before (a restarted app): true unless
    /// another live holder has it now.
    pub fn retake(&self, port: u16, me: &Holder) -> bool {
        match self.holder(port) {
            Some(holder) => holder == *me,
            None => {
                let _ = std::fs::remove_file(self.path(port));
                self.take(port, me)
            }
        }
    }

    /// Gives `port` back, when `me` holds it.
    pub fn release(&self, port: u16, me: &Holder) {
        if self.holder(port).as_ref() == Some(me) {
            let _ = std::fs::remove_file(self.path(port));
        }
    }

    /// Every port `me` holds, in order.
    pub fn held_by(&self, me: &Holder) -> Vec<u16> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut ports: Vec<u16> = entries
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name();
                name.to_str()?.strip_suffix(".lock")?.parse::<u16>().ok()
            })
            .filter(|port| self.holder(*port).as_ref() == Some(me))
            .collect();
        ports.sort_unstable();
        ports
    }

    /// Hands out `count` ports from `first` up to `me`: each free in the
    /// registry and by a bind test. Nothing is taken when there are not enough.
    pub fn claim(&self, me: &Holder, first: u16, count: u16) -> Result<Vec<u16>, String> {
        let mut block = Vec::with_capacity(usize::from(count));
        let mut port = first;
        while block.len() < usize::from(count) {
            if self.take(port, me) {
                if bindable(port) {
                    block.push(port);
                } else {
                    self.release(port, me);
                }
            }
            port = match port.checked_add(1) {
                Some(next) => next,
                None => {
                    for taken in &block {
                        self.release(*taken, me);
                    }
                    return Err(format!("no {count} free ports from {first} up"));
                }
            };
        }
        Ok(block)
    }
}

/// Whether `port` can be bound on 127.0.0.1 now.
pub fn bindable(port: u16) -> bool {
    TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)).is_ok()
}

/// The ports of a block that some program outside `environment_dir` listens on
/// (taken between hand-out and use): with its pid when /proc tells.
pub fn in_use(block: &[u16], environment_dir: &Path) -> Vec<PortInUse> {
    in_use_each(&[(block.to_vec(), environment_dir.to_path_buf())])
        .pop()
        .unwrap_or_default()
}

/// [`in_use`] of several environments (each its block and its directory), in
/// one read of the socket tables and at most one pass over the processes,
/// whatever their number: the tables list every connection of the machine
/// (thousands, many of them closed), and a pass reads every descriptor of
/// every process.
pub fn in_use_each(environments: &[(Vec<u16>, PathBuf)]) -> Vec<Vec<PortInUse>> {
    let taken: Vec<u16> = environments
        .iter()
        .flat_map(|(block, _)| block.iter().copied())
        .filter(|port| !bindable(*port))
        .collect();
    let pids = listener_pids(&taken);
    let mut cwds: HashMap<u32, Option<PathBuf>> = HashMap::new();
    environments
        .iter()
        .map(|(block, dir)| {
            block
                .iter()
                .filter(|port| taken.contains(port))
                .filter_map(|&port| {
                    let pid = pids.get(&port).copied();
                    let inside = pid
                        .and_then(|pid| {
                            cwds.entry(pid)
                                .or_insert_with(|| {
                                    std::fs::read_link(format!("/proc/{pid}/cwd")).ok()
                                })
                                .clone()
                        })
                        .is_some_and(|cwd| cwd.starts_with(dir));
                    (!inside).then_some(PortInUse { port, pid })
                })
                .collect()
        })
        .collect()
}

/// The pid listening on each of `ports` that /proc tells of, from
/// /proc/net/tcp{,6} and /proc/*/fd.
fn listener_pids(ports: &[u16]) -> HashMap<u16, u32> {
    let mut ports_of_socket: HashMap<String, u16> = HashMap::new();
    if ports.is_empty() {
        return HashMap::new();
    }
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
            if let Some(port) = local_port.filter(|p| ports.contains(p))
                && fields[3] == "0A"
            {
                ports_of_socket.insert(format!("socket:[{}]", fields[9]), port);
            }
        }
    }
    let mut pids = HashMap::new();
    if ports_of_socket.is_empty() {
        return pids;
    }
    let Ok(processes) = std::fs::read_dir("/proc") else {
        return pids;
    };
    for process in processes.flatten() {
        let Some(pid) = process.file_name().to_str().and_then(|p| p.parse().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(process.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            if let Some(port) = target.to_str().and_then(|t| ports_of_socket.remove(t)) {
                pids.insert(port, pid);
                // Its other socket (IPv4 and IPv6) needs no looking for.
                ports_of_socket.retain(|_, other| *other != port);
            }
        }
        if ports_of_socket.is_empty() {
            break;
        }
    }
    pids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listening_port_is_seen_with_its_pid() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(!bindable(port));
        let used = in_use(&[port], Path::new("/nonexistent-env"));
        assert_eq!(
            used,
            vec![PortInUse {
                port,
                pid: Some(std::process::id())
            }]
        );
    }

    /// One pass serves every environment: each gets its own ports, and a port
    /// held from inside an environment's directory is that environment's own.
    #[test]
    fn the_ports_of_several_environments_are_found_at_once() {
        let held: Vec<TcpListener> = (0..3)
            .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
            .collect();
        let ports: Vec<u16> = held
            .iter()
            .map(|l| l.local_addr().unwrap().port())
            .collect();
        let free = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let here = std::env::current_dir().unwrap();
        let used = in_use_each(&[
            (vec![ports[0], free], PathBuf::from("/nonexistent-env")),
            (vec![ports[1]], here),
            (vec![ports[2]], PathBuf::from("/nonexistent-env")),
            (Vec::new(), PathBuf::from("/nonexistent-env")),
        ]);
        let me = Some(std::process::id());
        assert_eq!(
            used,
            vec![
                vec![PortInUse {
                    port: ports[0],
                    pid: me
                }],
                Vec::new(),
                vec![PortInUse {
                    port: ports[2],
                    pid: me
                }],
                Vec::new(),
            ]
        );
    }

    #[test]
    fn holders_are_pids_or_app_ids() {
        assert_eq!(Holder::parse("42\n"), Some(Holder::Pid(42)));
        assert_eq!(
            Holder::parse("app-0123abcd"),
            Some(Holder::App("app-0123abcd".into()))
        );
        for bad in ["", "app-", "app-a b", "app-../x", "someone"] {
            assert_eq!(Holder::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn an_app_of_another_machine_holds_its_ports_until_it_gives_them_back() {
        let dir = tempfile::tempdir().unwrap();
        let registry = Registry::open_in(dir.path().join("ports")).unwrap();
        let far = Holder::app("app-far").unwrap();
        let other = Holder::app("app-other").unwrap();
        // A port some program listens on is skipped.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let busy = listener.local_addr().unwrap().port();
        let block = registry.claim(&far, busy, 2).unwrap();
        assert_eq!(block.len(), 2);
        assert!(!block.contains(&busy), "{block:?}");
        assert_eq!(registry.held_by(&far), block);
        // Never another app's, never this process's (pid) claims either.
        assert!(!registry.take(block[0], &other));
        assert!(!registry.take(block[0], &Holder::me()));
        assert!(registry.retake(block[0], &far));
        assert!(!registry.retake(block[0], &other));
        registry.release(block[0], &other);
        assert_eq!(registry.held_by(&far), block, "only its holder releases");
        for port in &block {
            registry.release(*port, &far);
        }
        assert!(registry.held_by(&far).is_empty());
        assert!(registry.take(block[0], &other));
    }

    #[test]
    fn a_dead_pid_s_port_is_stale() {
        let dir = tempfile::tempdir().unwrap();
        let registry = Registry::open_in(dir.path().to_path_buf()).unwrap();
        std::fs::write(dir.path().join("20000.lock"), "999999999").unwrap();
        assert_eq!(registry.holder(20000), None);
        assert!(registry.take(20000, &Holder::me()));
        assert_eq!(registry.holder(20000), Some(Holder::me()));
    }
}
