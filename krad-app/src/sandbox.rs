//! Contained agents (issue 39, first slice): a terminal on this machine can
//! run its program inside bubblewrap (`bwrap`), which sees the system and the
//! tools read-only, its own environment's directory writable, a private
//! `/tmp`, and a private `$HOME` that holds only what the profile's CLI needs
//! (copied in at spawn) — not the user's `~/.ssh`, other tokens, other
//! worktrees, the app's state or api.json. The network is shared (the bus on
//! 127.0.0.1 works unchanged), or none at all but the bus: a network
//! namespace of its own, where `krad internal sandboxed` takes the bus's
//! address and passes each connection to the app's Unix socket
//! ([`BusSocket`]). That first process inside also makes itself the
//! terminal's foreground, so that Ctrl-C reaches the agent, not bubblewrap.
//! With an allowlist (`network = "allow"`), the same namespace reaches the
//! hosts of the list and the profile's model API through a proxy and relays
//! the app runs, every attempt logged ([`net`]). On an SSH host the sandbox
//! is built there ([`host`]), its sockets carried over the link. With a
//! network of its own, the environment's ports are relayed in from the
//! machine's 127.0.0.1 ([`inbound`]). A contained variant's checks run in a
//! sandbox of the same kind ([`wrap_check`], [`host::check_preamble`]): a
//! private home of their own, no bus, no inbound ports, the agent's network.
//!
//! ```toml
//! [sandbox]
//! profiles = ["claude", "codex"]   # these profiles' agents always run contained
//! network = "allow"                # "all" (default): shared; "none": the bus only
//! allow = ["github.com", "*.npmjs.org", "127.0.0.1:8080"]
//! ```
//!
//! A Spawn or RunVariants with `"sandbox": true` runs contained whatever the
//! config says; `false` cannot loosen what the config asks. See
//! docs/sandbox.md.

mod command_line;
pub(crate) mod host;
pub mod inbound;
pub mod net;
pub(crate) mod refusals;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use krad_bus::protocol::{ApiError, ErrorCode};

use crate::config::HookKind;
use crate::config::Settings;
use crate::environments::Environments;
use command_line::{Parts, bwrap, command_line, user_home};

/// The files of `$HOME` a profile's CLI needs, copied into the private home:
/// its settings and credentials, nothing else of the user's.
fn home_files(hooks: HookKind) -> &'static [&'static str] {
    match hooks {
        HookKind::Claude => &[
            ".claude.json",
            ".claude/.credentials.json",
            ".claude/settings.json",
        ],
        HookKind::Codex => &[".codex/auth.json", ".codex/config.toml"],
        HookKind::None => &[],
    }
}

/// What a contained terminal is started with besides its own argv.
pub struct Contained<'a> {
    /// The terminal's id (its private home is named after it).
    pub id: u64,
    /// Its working directory: its environment's, the one writable place.
    pub cwd: &'a Path,
    /// Files it must read wherever they are: its token file, its hook
    /// settings, the `krad` binary.
    pub readable: Vec<PathBuf>,
    /// The profile's hooks (which CLI's files its home gets, which model
    /// API its allowlist has).
    pub hooks: HookKind,
    /// The profile's and the Spawn's environment (base URLs of model APIs).
    pub env: &'a [(String, String)],
    /// Its environment's name (the terminals of one share its relays).
    pub environment: &'a str,
    /// Its environment's port block: with a network of its own, relayed in
    /// from the machine's 127.0.0.1 ([`inbound`]).
    pub ports: &'a [u16],
}

/// The sandboxes' domain, one per app: the bus's Unix socket for sandboxes
/// without a network, the networks of those with an allowlist, and the
/// environments' ports relayed into them. Built once by the composition
/// root; everything under `sandbox/` takes it.
pub(crate) struct Sandbox {
    settings: Arc<Settings>,
    /// Where worktrees go, and each environment's ports.
    environments: Arc<Environments>,
    /// The bus's Unix socket for sandboxes without a network.
    bus_socket: BusSocket,
    /// The networks of sandboxes with an allowlist (their logs).
    nets: Nets,
    /// The environments' ports relayed into their sandboxes.
    inbound: inbound::Inbound,
}

impl Sandbox {
    pub(crate) fn new(settings: Arc<Settings>, environments: Arc<Environments>) -> Self {
        Sandbox {
            settings,
            environments,
            bus_socket: BusSocket::default(),
            nets: Nets::default(),
            inbound: inbound::Inbound::default(),
        }
    }

    /// The network log of a terminal's sandbox, if it has an allowlist.
    pub(crate) fn nets(&self) -> &Nets {
        &self.nets
    }
}

/// `argv` wrapped in bubblewrap as [`Contained`] says. A machine without
/// bubblewrap is `failed`, saying what to install.
pub(crate) fn wrap(
    sandbox: &Sandbox,
    contained: Contained<'_>,
    argv: Vec<String>,
) -> Result<Vec<String>, ApiError> {
    let bwrap = bwrap()?;
    let home = user_home();
    let private_home = sandbox
        .settings
        .state_dir
        .join("sandbox")
        .join(contained.id.to_string());
    prepare_home(&private_home, home.as_deref(), contained.hooks).map_err(|e| {
        ApiError::new(
            ErrorCode::Failed,
            format!("cannot prepare the sandbox's home: {e}"),
        )
    })?;
    let settings = &sandbox.settings;
    let own_network = settings.config.sandbox.own_network();
    let bus_socket = bus_socket_if_own(sandbox)?;
    let allowlist = if settings.config.sandbox.allowlist() {
        let policy = allowlist(
            sandbox,
            contained.hooks,
            contained.env,
            home.as_deref(),
            true,
        );
        Some(
            sandbox
                .nets
                .open(sandbox, contained.id, policy)
                .map_err(|e| {
                    ApiError::new(
                        ErrorCode::Failed,
                        format!("cannot open the sandbox's network socket: {e}"),
                    )
                })?,
        )
    } else {
        None
    };
    // The folder of the inbound socket, made anew (0700): the folder is
    // bound, so that the socket the inner end makes there is seen here.
    let inbound = if own_network && !contained.ports.is_empty() {
        let dir = inbound_dir(sandbox, contained.id);
        make_private_dir(&dir).map_err(|e| {
            ApiError::new(
                ErrorCode::Failed,
                format!("cannot prepare the sandbox's inbound socket: {e}"),
            )
        })?;
        Some(dir.join("in.sock"))
    } else {
        None
    };
    crate::crash_point::here("sandbox-set-up");
    if let Some(socket) = &inbound {
        // An allowed loopback port is a program's on the machine, which the
        // sandbox reaches out through its relay: not one to listen on.
        let outward = allowlist
            .as_ref()
            .map(|(_, p)| p.as_slice())
            .unwrap_or_default();
        let ports: Vec<u16> = contained
            .ports
            .iter()
            .filter(|p| !outward.contains(p))
            .copied()
            .collect();
        sandbox
            .inbound
            .add(contained.environment, &ports, contained.id, socket.clone());
    }
    let parts = Parts {
        bwrap,
        home,
        private_home: &private_home,
        cwd: contained.cwd,
        env: contained.env,
        readable: &contained.readable,
        bus_socket,
        // The folder, not the socket: a socket made anew there (by the next
        // app, after a restart) is the one the sandbox sees.
        net: allowlist.map(|(socket, ports)| (socket, ports, true)),
        inbound,
    };
    Ok(command_line(sandbox, parts, argv))
}

/// `argv`, a check of a contained variant, wrapped in a sandbox of the same
/// kind as its agent's (terminal `agent`'s, if it ever started; running in
/// `cwd`): the same mounts, the same network, but a private home of its own,
/// empty (`home`, made anew: the agent's is left as it is), no inbound
/// ports, no bus (a check has no token), and with an allowlist the agent's
/// own network — its proxy and relays, its log — not a new one. `failed`
/// when the agent's network is not there to share (its terminal closed, or
/// never started): the check is not run outside.
pub(crate) fn wrap_check(
    sandbox: &Sandbox,
    (agent, cwd): (Option<u64>, &Path),
    home: &Path,
    argv: Vec<String>,
) -> Result<Vec<String>, ApiError> {
    let bwrap = bwrap()?;
    let net = if sandbox.settings.config.sandbox.allowlist() {
        let Some((id, net)) = agent.and_then(|id| Some((id, sandbox.nets.get(id)?))) else {
            return Err(ApiError::new(
                ErrorCode::Failed,
                "this variant runs contained under [sandbox] network = \"allow\", and its \
                 agent's network, which its checks share, is not there (its terminal is \
                 closed): the checks are not run outside its sandbox",
            ));
        };
        // The socket itself, not its folder (which holds the allowlist).
        Some((
            net_dir(sandbox, id).join("net.sock"),
            net.loopback_ports(),
            false,
        ))
    } else {
        None
    };
    make_private_dir(home).map_err(|e| {
        ApiError::new(
            ErrorCode::Failed,
            format!("cannot prepare the check's home: {e}"),
        )
    })?;
    let parts = Parts {
        bwrap,
        home: user_home(),
        private_home: home,
        cwd,
        env: &[],
        readable: &[],
        // A check has no token: the bus is of no use to it.
        bus_socket: None,
        net,
        inbound: None,
    };
    Ok(command_line(sandbox, parts, argv))
}

/// The private home of a check of the variant of terminal `agent`, its
/// `n`th (`<state dir>/sandbox/<id>.check/<n>`; `checks/<n>` for a variant
/// whose agent never started): removed once it ran, and with the terminal.
pub(crate) fn check_home(sandbox: &Sandbox, agent: Option<u64>, n: u64) -> PathBuf {
    match agent {
        Some(id) => terminal_dir(sandbox, id, "check"),
        None => sandbox.settings.state_dir.join("sandbox").join("checks"),
    }
    .join(n.to_string())
}

/// The bus's socket, for a config whose sandboxes have a network of their own.
fn bus_socket_if_own(sandbox: &Sandbox) -> Result<Option<PathBuf>, ApiError> {
    let settings = &sandbox.settings;
    if !settings.config.sandbox.own_network() {
        return Ok(None);
    }
    sandbox.bus_socket.path(settings).map(Some).map_err(|e| {
        ApiError::new(
            ErrorCode::Failed,
            format!("cannot open the bus's socket for the sandbox: {e}"),
        )
    })
}

/// The app's Unix socket that leads to the bus, for sandboxes without a
/// network: opened at the first such sandbox, each connection passed to the
/// bus on 127.0.0.1 as it is (the bus checks the token as for any caller).
#[derive(Default)]
pub struct BusSocket(std::sync::OnceLock<PathBuf>);

impl BusSocket {
    /// The socket's path (`<state dir>/sandbox-bus/bus.sock`, in a 0700
    /// folder the sandboxes bind), listening.
    fn path(&self, settings: &crate::config::Settings) -> std::io::Result<PathBuf> {
        if let Some(path) = self.0.get() {
            return Ok(path.clone());
        }
        let folder = settings.state_dir.join("sandbox-bus");
        if !folder.is_dir() {
            make_private_dir(&folder)?;
        }
        let path = folder.join("bus.sock");
        let _ = std::fs::remove_file(&path);
        let listener = tokio::net::UnixListener::bind(&path)?;
        let bus = settings.endpoint;
        tokio::spawn(async move {
            while let Ok((mut inside, _)) = listener.accept().await {
                tokio::spawn(async move {
                    if let Ok(mut outside) = tokio::net::TcpStream::connect(bus).await {
                        let _ = tokio::io::copy_bidirectional(&mut inside, &mut outside).await;
                    }
                });
            }
        });
        Ok(self.0.get_or_init(|| path).clone())
    }
}

/// What a sandbox of this profile may reach: the config's list, the
/// profile's model API, and the base URLs its environment or its CLI's
/// config point it at (the model double, a gateway): `env`, then — for a
/// terminal `here`, on this machine — the app's environment and the CLI's
/// config in `home` (a host's files and environment are not this machine's).
fn allowlist(
    sandbox: &Sandbox,
    hooks: HookKind,
    env: &[(String, String)],
    home: Option<&Path>,
    here: bool,
) -> net::Policy {
    let var = |name: &str| {
        env.iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var(name).ok().filter(|_| here))
    };
    let mut entries = sandbox.settings.config.sandbox.allow.clone();
    let mut urls = Vec::new();
    match hooks {
        HookKind::Claude => {
            entries.push("api.anthropic.com".into());
            urls.extend(var("ANTHROPIC_BASE_URL"));
        }
        HookKind::Codex => {
            entries.extend(["api.openai.com".into(), "chatgpt.com".into()]);
            urls.extend(var("OPENAI_BASE_URL"));
            let codex_home = var("CODEX_HOME")
                .map(PathBuf::from)
                .or_else(|| home.map(|h| h.join(".codex")));
            if let Some(dir) = codex_home.filter(|_| here) {
                urls.extend(codex_base_urls(&dir.join("config.toml")));
            }
        }
        HookKind::None => {}
    }
    for (host, port) in urls.iter().filter_map(|u| net::url_host_port(u)) {
        entries.push(if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        });
    }
    net::Policy::new(entries)
}

/// The base URLs of a Codex config: its model providers' and its own.
fn codex_base_urls(config: &Path) -> Vec<String> {
    let Some(config) = std::fs::read_to_string(config)
        .ok()
        .and_then(|text| text.parse::<toml::Table>().ok())
    else {
        return Vec::new();
    };
    let own = ["openai_base_url", "chatgpt_base_url"]
        .into_iter()
        .filter_map(|key| config.get(key)?.as_str().map(str::to_owned));
    let providers = config
        .get("model_providers")
        .and_then(toml::Value::as_table)
        .into_iter()
        .flat_map(|table| table.values())
        .filter_map(|p| p.get("base_url")?.as_str().map(str::to_owned));
    own.chain(providers).collect()
}

/// The networks of the sandboxes with an allowlist, by terminal.
#[derive(Default)]
pub struct Nets(Mutex<HashMap<u64, Arc<net::Net>>>);

impl Nets {
    /// A network for terminal `id`, serving its socket
    /// (`<state dir>/sandbox/<id>.net/net.sock`, in a 0700 folder the sandbox
    /// binds, beside its allowlist, kept for the next app): the socket and
    /// the loopback ports to relay inside.
    fn open(
        &self,
        sandbox: &Sandbox,
        id: u64,
        policy: net::Policy,
    ) -> std::io::Result<(PathBuf, Vec<u16>)> {
        let dir = net_dir(sandbox, id);
        if !dir.is_dir() {
            make_private_dir(&dir)?;
        }
        let mut kept = policy.entries().join("\n");
        kept.push('\n');
        std::fs::write(dir.join(ALLOWLIST_FILE), kept)?;
        let socket = dir.join("net.sock");
        let _ = std::fs::remove_file(&socket);
        let ports = policy.loopback_ports();
        let net = net::Net::new(id, policy);
        net.serve(&socket)?;
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, net);
        Ok((socket, ports))
    }

    /// Terminal `id`'s network, when its sandbox has an allowlist.
    pub fn get(&self, id: u64) -> Option<Arc<net::Net>> {
        let nets = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        nets.get(&id).cloned()
    }

    fn forget(&self, id: u64) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
    }
}

/// Terminal `id`'s folder for its allowlist's socket (and the list).
fn net_dir(sandbox: &Sandbox, id: u64) -> PathBuf {
    terminal_dir(sandbox, id, "net")
}

/// Terminal `id`'s folder of `kind` (`net`, `in`) under `<state>/sandbox`.
fn terminal_dir(sandbox: &Sandbox, id: u64, kind: &str) -> PathBuf {
    let folder = format!("{id}.{kind}");
    sandbox.settings.state_dir.join("sandbox").join(folder)
}

/// The allowlist kept in a terminal's network folder, an entry a line: a
/// terminal taken back by the next app gets the same one.
const ALLOWLIST_FILE: &str = "allow";

/// Terminal `id`'s folder for its inbound socket.
fn inbound_dir(sandbox: &Sandbox, id: u64) -> PathBuf {
    terminal_dir(sandbox, id, "in")
}

/// An empty folder only this user reaches, made anew.
fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// The private home: made anew, with the profile's CLI files copied in.
fn prepare_home(private_home: &Path, home: Option<&Path>, hooks: HookKind) -> std::io::Result<()> {
    make_private_dir(private_home)?;
    let Some(home) = home else {
        return Ok(());
    };
    for file in home_files(hooks) {
        let from = home.join(file);
        if !from.is_file() {
            continue;
        }
        let to = private_home.join(file);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::copy(&from, &to)?;
    }
    Ok(())
}

/// Whether terminal `id` runs in a sandbox on this machine (its private
/// home is there from its Spawn to its Close).
pub(crate) fn contained_here(sandbox: &Sandbox, id: u64) -> bool {
    sandbox
        .settings
        .state_dir
        .join("sandbox")
        .join(id.to_string())
        .is_dir()
}

/// Notes that terminal `id` runs contained on an SSH host (an empty file,
/// `<state dir>/sandbox/<id>.host`, kept across restarts until its Close):
/// what runs for it later, a variant's checks, must not run outside.
pub(crate) fn note_contained_on_host(sandbox: &Sandbox, id: u64) {
    let marker = terminal_dir(sandbox, id, "host");
    let made = |dir: &Path| {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
    };
    if let Some(dir) = marker.parent()
        && let Err(e) = made(dir).and_then(|()| std::fs::write(&marker, b""))
    {
        tracing::warn!(
            terminal = id,
            "cannot note a contained terminal on a host: {e}"
        );
    }
}

/// Whether terminal `id` runs contained on an SSH host.
pub(crate) fn contained_on_host(sandbox: &Sandbox, id: u64) -> bool {
    terminal_dir(sandbox, id, "host").is_file()
}

/// A contained terminal taken back after a restart (kept in tmux): when its
/// sandbox made an inbound socket, its environment's ports are relayed to it
/// again — its first process inside still listens there.
pub(crate) fn taken_back(sandbox: &Sandbox, environment: &str, id: u64) {
    if !contained_here(sandbox, id) {
        return;
    }
    // Its sockets' folders are bound in its sandbox: the sockets made anew
    // there are the ones it reaches.
    if sandbox.settings.config.sandbox.own_network()
        && let Err(e) = sandbox.bus_socket.path(&sandbox.settings)
    {
        tracing::warn!(
            terminal = id,
            "cannot open the bus's socket for its sandbox again: {e}"
        );
    }
    if let Ok(kept) = std::fs::read_to_string(net_dir(sandbox, id).join(ALLOWLIST_FILE)) {
        let policy = net::Policy::new(kept.lines().filter(|l| !l.trim().is_empty()));
        if let Err(e) = sandbox.nets.open(sandbox, id, policy) {
            tracing::warn!(
                terminal = id,
                "cannot open its sandbox's network again: {e}"
            );
        }
    }
    let socket = inbound_dir(sandbox, id).join("in.sock");
    if socket.exists() {
        let ports = sandbox.environments.ports(environment);
        sandbox.inbound.add(environment, &ports, id, socket);
    }
}

/// Removes a closed terminal's private home (and its checks'), its sockets,
/// its network and its inbound relays.
pub(crate) fn forget(sandbox: &Sandbox, id: u64) {
    // Every Close comes here: /proc is read only for a contained terminal.
    if contained_here(sandbox, id) {
        end_leftover_processes(&sandbox.settings.state_dir, id);
    }
    let dir = sandbox.settings.state_dir.join("sandbox");
    let _ = std::fs::remove_dir_all(dir.join(id.to_string()));
    sandbox.nets.forget(id);
    let _ = std::fs::remove_dir_all(net_dir(sandbox, id));
    sandbox.inbound.forget(id);
    let _ = std::fs::remove_dir_all(inbound_dir(sandbox, id));
    let _ = std::fs::remove_dir_all(terminal_dir(sandbox, id, "check"));
    let _ = std::fs::remove_file(terminal_dir(sandbox, id, "host"));
}

/// Ends what bubblewrap left of terminal `id`'s sandbox once the terminal is
/// gone: a bubblewrap killed while it set the sandbox up (a Close, or the
/// app's death, right after the Spawn) leaves its child waiting for it
/// forever, holding the sandbox's PID namespace. Each of its processes names
/// the terminal's private home (`<state dir>/sandbox/<id>`) on its command
/// line; ending them ends whatever is left inside.
pub(crate) fn end_leftover_processes(state_dir: &Path, id: u64) {
    use std::os::unix::ffi::OsStrExt;
    let home = state_dir.join("sandbox").join(id.to_string());
    let home = home.as_os_str().as_bytes();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let mut args = cmdline.split(|b| *b == 0);
        let is_bwrap = args
            .next()
            .is_some_and(|program| program.ends_with(b"bwrap"));
        if is_bwrap && args.any(|arg| arg == home) {
            tracing::info!(terminal = id, pid, "ending what is left of its sandbox");
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_network_is_all_none_or_an_allowlist() {
        let config = |network: Option<&str>, allow: &[&str]| crate::config::SandboxConfig {
            profiles: vec![],
            network: network.map(str::to_owned),
            allow: allow.iter().map(|a| (*a).to_owned()).collect(),
        };
        assert!(config(None, &[]).validate().is_ok());
        assert!(config(Some("all"), &[]).validate().is_ok());
        assert!(config(Some("none"), &[]).validate().is_ok());
        assert!(
            config(Some("allow"), &["github.com", "127.0.0.1:80"])
                .validate()
                .is_ok()
        );
        let refused = config(Some("api.anthropic.com"), &[])
            .validate()
            .unwrap_err();
        assert!(refused.contains("\"allow\""), "{refused}");
        let refused = config(Some("none"), &["github.com"])
            .validate()
            .unwrap_err();
        assert!(refused.contains("needs network"), "{refused}");
        let refused = config(Some("allow"), &["a/b"]).validate().unwrap_err();
        assert!(refused.contains("\"a/b\""), "{refused}");
    }

    #[test]
    fn a_codex_config_s_base_urls_are_found() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.toml");
        std::fs::write(
            &config,
            "openai_base_url = \"https://gw.example.com/v1\"\n\
             [model_providers.double]\nbase_url = \"http://127.0.0.1:4000/v1\"\n",
        )
        .unwrap();
        assert_eq!(
            codex_base_urls(&config),
            ["https://gw.example.com/v1", "http://127.0.0.1:4000/v1"]
        );
        assert!(codex_base_urls(&dir.path().join("none.toml")).is_empty());
    }

    #[test]
    fn the_private_home_holds_the_cli_s_files_only() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join(".claude")).unwrap();
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::write(home.join(".claude/settings.json"), "{}").unwrap();
        std::fs::write(home.join(".ssh/id_ed25519"), "secret").unwrap();
        let private = dir.path().join("private");
        prepare_home(&private, Some(&home), HookKind::Claude).unwrap();
        assert!(private.join(".claude/settings.json").is_file());
        assert!(!private.join(".ssh").exists());
        prepare_home(&private, Some(&home), HookKind::None).unwrap();
        assert!(!private.join(".claude").exists(), "made anew");
    }
}
