//! The config file: profiles and terminal settings.
//!
//! Where it is read from, first match wins: `krad serve --config PATH`,
//! `$KRAD_CONFIG`, `<repository>/.krad/config.toml`,
//! `$XDG_CONFIG_HOME/krad/config.toml` (or `~/.config/krad/config.toml`).
//! No file is fine: the built-in profiles and defaults apply. A file that does not
//! parse, or has a key krad does not know, stops `krad serve` with the line at fault.
//!
//! ```toml
//! default_profile = "claude"
//!
//! [terminals]
//! scrollback = 10000      # lines kept per terminal
//! host = "pty"            # pty (in the app) | tmux (terminals outlive the app)
//! transcripts_max_mb = 1024  # closed terminals' transcripts beyond this go, oldest first
//!
//! [profiles.aider]
//! command = ["aider", "--yes-always"]
//! prompt = "arg"          # arg | type | none
//! hooks = "none"          # claude | codex | none
//! idle_after_secs = 20    # no output this long while working: idle (state_source "quiet")
//! env = { AIDER_DARK_MODE = "1" }
//! expose_token = false    # also set KRAD_ADE_TOKEN (env leaks into every child)
//! interrupt = "\u0003"    # the keys that stop a turn (the phone's abort)
//! actions = [{ id = "yes", label = "Yes", keys = "y\r" }]   # the phone's belt buttons
//!
//! [durable]               # the durable facet (docs/durable.md)
//! socket = "/home/you/.krad-ade/durable/app.sock"
//!
//! [notify]                # tell the user when an agent needs them
//! command = ["notify-me"] # gets the agent's record as JSON on stdin
//! desktop = true          # notify-send, when installed
//! on = ["asking", "idle", "exited"]
//! debounce_secs = 10      # at most one per terminal this often (exits always)
//!
//! [limits]                # a Spawn, RunVariants or Send past one: `busy`
//! max_terminals = 20      # live terminals
//! max_working = 8         # agents working at once
//! min_free_memory_mib = 2048
//! memory_max_mib = 4096   # per terminal, where cgroup v2 is delegated
//!
//! [budget]                # an agent whose model calls reach it is interrupted, `asking`
//! max_cost_usd = 5.0      # per terminal (Spawn's max_cost_usd overrides it)
//! max_group_cost_usd = 20.0  # per variant group (RunVariants' max_group_cost_usd)
//!
//! [prices.claude-sonnet-4-5]  # dollars per million tokens, over the built-in table
//! input = 3.0
//! output = 15.0
//! cache_write = 3.75
//! cache_read = 0.30
//!
//! [checks]                # run in every variant's worktree (docs/environments.md)
//! parallel = 2            # at most this many at once (default: half the cores)
//! test = "cargo test"     # 10 min, gates a pick by rule
//! lint = { command = "cargo clippy", timeout_secs = 300, gates = false }
//!
//! [ui]                    # the page in a browser (docs/ui.md); on by default
//! enabled = true
//! port = 0                # on 127.0.0.1; 0: one the system picks
//! ```

pub(crate) mod allow;
mod checks;
mod limits;
mod notify;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// How long a closed terminal's program has between SIGHUP and SIGKILL.
pub(crate) const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

pub use checks::{CheckEntry, CheckSpec, CheckTable, ChecksConfig};
pub use limits::LimitsConfig;
pub use notify::{NotifyConfig, NotifyKind};

/// What the app needs to know to start.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The repository (the `main` environment).
    pub root: PathBuf,
    /// Where the app keeps its state, transcripts and hook files.
    pub state_dir: PathBuf,
    /// A private (0700) directory for the terminals' token files.
    pub token_dir: PathBuf,
    /// The `krad` executable terminals and hooks call.
    pub krad: PathBuf,
    /// The bus endpoint terminals are given (127.0.0.1:PORT).
    pub endpoint: SocketAddr,
    /// The config file's contents.
    pub config: Config,
}

/// How the prompt reaches the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PromptDelivery {
    /// Appended as the last argument.
    Arg,
    /// Typed into the terminal once the program is ready, then Enter.
    Type,
    /// The profile takes no prompt.
    None,
}

/// How an agent reports its state besides its screen and its exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HookKind {
    /// Claude Code: `--settings <file>` with hooks that call `krad hook claude`.
    Claude,
    /// Codex CLI: `-c notify=[…]` calling `krad hook codex`.
    Codex,
    /// Nothing: process exit, screen signals and the quiet time.
    None,
}

/// A profile as the config file writes it; every field optional, so that a
/// profile named like a built-in one changes only what it names.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileConfig {
    /// The argv.
    pub command: Option<Vec<String>>,
    /// How the prompt reaches it.
    pub prompt: Option<PromptDelivery>,
    /// How it reports its state.
    pub hooks: Option<HookKind>,
    /// Quiet time after which a working agent is shown idle.
    pub idle_after_secs: Option<u64>,
    /// Extra environment.
    pub env: Option<BTreeMap<String, String>>,
    /// Also put the token itself in `KRAD_ADE_TOKEN`.
    pub expose_token: Option<bool>,
    /// The keys that interrupt a turn (the durable facet's abort), as text:
    /// `"\u001b"` is Escape, `"\u0003"` is Ctrl-C.
    pub interrupt: Option<String>,
    /// The belt buttons the phone shows (at most 4, labels of 16 characters).
    pub actions: Option<Vec<ActionConfig>>,
    /// The arguments that resume a conversation, after the command; `{session}`
    /// is the agent's session id (claude: `["--resume", "{session}"]`).
    pub resume: Option<Vec<String>>,
    /// This profile's terminals each in a cgroup v2 of this size, over
    /// `[limits] memory_max_mib` (where cgroup v2 is delegated).
    pub memory_max_mib: Option<u64>,
}

/// A belt button: a label and the keys it types.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionConfig {
    /// Its id (1–128 bytes, no spaces, `/`, `?` or `#`).
    pub id: String,
    /// What the button says (at most 16 characters).
    pub label: String,
    /// The keys it types, as text (`"\r"` is Enter).
    pub keys: String,
}

/// `[durable]`: the durable facet, through which a phone (Collie) watches the
/// agents, answers their questions, steers and starts them. See docs/durable.md.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DurableConfig {
    /// The name the phone shows (default: the repository's folder name).
    pub name: Option<String>,
    /// The private socket (default: `$COLLIE_DURABLE_SOCKET`, which wins when set,
    /// else `~/.krad-ade/durable/<repository>.sock`).
    pub socket: Option<PathBuf>,
    /// Serve the socket (default true).
    pub serve_socket: Option<bool>,
    /// Also serve TLS with a bearer token.
    pub tls: Option<DurableTlsConfig>,
}

/// `[durable.tls]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DurableTlsConfig {
    /// Where to listen, e.g. `"0.0.0.0:7443"` or `"127.0.0.1:7443"`.
    pub listen: std::net::SocketAddr,
    /// The token file (0600, ≥ 32 printable ASCII bytes); default: one the app
    /// creates in its state folder (`<git dir>/krad/durable/token`).
    pub token_file: Option<PathBuf>,
    /// A PEM certificate chain; default: a self-signed one the app makes and keeps.
    pub cert: Option<PathBuf>,
    /// The certificate's PEM private key (0600).
    pub key: Option<PathBuf>,
}

/// `[terminals]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TerminalsConfig {
    /// Lines of scrollback kept per terminal.
    pub scrollback: usize,
    /// Where terminals live.
    pub host: TerminalHostKind,
    /// MiB the transcripts may take: past it, closed terminals' transcripts
    /// are removed, oldest first (live terminals' are kept whatever their size).
    pub transcripts_max_mb: u64,
}

impl Default for TerminalsConfig {
    fn default() -> Self {
        TerminalsConfig {
            scrollback: 10_000,
            host: TerminalHostKind::Pty,
            transcripts_max_mb: 1024,
        }
    }
}

/// `[terminals] host`: where terminals live.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TerminalHostKind {
    /// Pseudo-terminals inside the app: nothing to install; they end with it.
    #[default]
    Pty,
    /// A tmux server of the app's own: terminals outlive the app, a restarted
    /// app takes them back, and `krad attach` runs `tmux attach`.
    Tmux,
}

/// `[worktrees]`: where new worktrees go and what runs in each before its agents.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorktreesConfig {
    /// The directory worktrees are created in (default `<repo>/.krad/worktrees`;
    /// relative paths are from the repository).
    pub dir: Option<PathBuf>,
    /// A command run with `sh -c` in each new worktree before any agent starts.
    pub setup: Option<String>,
    /// How long the setup (and the teardown) command may take, in seconds
    /// (default 600).
    pub setup_timeout_secs: Option<u64>,
    /// A shell command run in a worktree before it is removed (its terminals
    /// closed first): `docker compose down`, dropping a database. When it fails,
    /// Close is refused (`conflict`, with its output) unless forced.
    pub teardown: Option<String>,
}

/// `[environments]`: what each new worktree environment gets.
///
/// ```toml
/// [environments]
/// ports = 3          # a block of 3 TCP ports per environment (default: none)
/// first_port = 20000 # where handing out starts (default 20000)
/// disk_refresh_secs = 60 # how often disk use is measured (default 60)
/// ```
///
/// Each port is checked free (a bind on 127.0.0.1) when handed out, kept with
/// the environment across restarts, and released when it is closed; two apps on
/// one machine never hand out the same port. Terminals, the setup command and
/// `Code` runs in the environment see `KRAD_PORT` (the first), `KRAD_PORTS`
/// (all, space-separated) and `PORT` unless the profile or the Spawn sets it.
/// Environments on SSH hosts get no block yet.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvironmentsConfig {
    /// How many TCP ports each new worktree environment gets (default 0: none).
    pub ports: Option<u16>,
    /// The first port handed out (default 20000).
    pub first_port: Option<u16>,
    /// How often each environment's disk use is measured again, in seconds
    /// (default 60; also soon after an environment is created or closed).
    pub disk_refresh_secs: Option<u64>,
}

/// `[extensions.NAME]`: an MCP server the app starts on first use (stdio).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtensionConfig {
    /// The program.
    pub command: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Its working directory (default: the repository).
    pub cwd: Option<PathBuf>,
}

/// `[hosts.NAME]`: an SSH host environments and terminals can live on.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    /// The destination, as `ssh` takes it (`user@gpu-box`, or a Host of ~/.ssh/config).
    pub ssh: String,
    /// The repository on the host.
    pub root: String,
    /// The `krad` executable on the host (default: `krad` on the host's PATH).
    pub krad: Option<String>,
    /// Extra `ssh` options, before the destination (`["-p", "2222", "-i", "~/.ssh/gpu"]`).
    #[serde(default)]
    pub options: Vec<String>,
    /// Seconds between the link's keepalives (ssh's `ServerAliveInterval`; default 1).
    pub alive_interval_secs: Option<u32>,
    /// Keepalives missed in a row before the link counts as down
    /// (`ServerAliveCountMax`; default 3): a frozen host is `down` within
    /// interval × count seconds.
    pub alive_count_max: Option<u32>,
    /// Ports per environment on this host, as `[environments] ports` is for
    /// this machine's: a block of N, checked free on the host (default: none).
    pub ports: Option<u16>,
    /// Whether terminals on the host live in tmux there, to outlive the link
    /// and the app (default: when the host has tmux; `false`: never).
    pub tmux: Option<bool>,
}

impl HostConfig {
    /// Seconds between keepalives.
    pub fn alive_interval(&self) -> u32 {
        self.alive_interval_secs.unwrap_or(1).max(1)
    }

    /// Keepalives missed before the link is down.
    pub fn alive_count(&self) -> u32 {
        self.alive_count_max.unwrap_or(3).max(1)
    }
}

/// The whole config file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The profile Spawn uses when it names none (default `shell`).
    pub default_profile: Option<String>,
    /// Terminal settings.
    #[serde(default)]
    pub terminals: TerminalsConfig,
    /// Profiles added or changed.
    #[serde(default)]
    pub profiles: BTreeMap<String, ProfileConfig>,
    /// Worktree settings.
    #[serde(default)]
    pub worktrees: WorktreesConfig,
    /// Environment settings (port blocks).
    #[serde(default)]
    pub environments: EnvironmentsConfig,
    /// MCP servers, by name.
    #[serde(default)]
    pub extensions: BTreeMap<String, ExtensionConfig>,
    /// SSH hosts, by name.
    #[serde(default)]
    pub hosts: BTreeMap<String, HostConfig>,
    /// The durable facet (off without this table).
    pub durable: Option<DurableConfig>,
    /// Telling the user when an agent needs them (off without this table).
    pub notify: Option<NotifyConfig>,
    /// Limits on live terminals, working agents and free memory (none by default).
    #[serde(default)]
    pub limits: LimitsConfig,
    /// Which agents run contained (none by default).
    #[serde(default)]
    pub sandbox: SandboxConfig,
    /// Cost limits (none by default).
    #[serde(default)]
    pub budget: BudgetConfig,
    /// Model prices over the built-in ones (`crate::prices`), by model.
    #[serde(default)]
    pub prices: BTreeMap<String, crate::prices::Price>,
    /// The page in a browser (on by default, docs/ui.md).
    #[serde(default)]
    pub ui: UiConfig,
    /// The checks run in every variant to score it (none by default).
    #[serde(default)]
    pub checks: ChecksConfig,
}

/// `[budget]` in the config: cost limits (`crate::budget`), each off unless set.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct BudgetConfig {
    /// Each terminal's limit, in US dollars, unless its Spawn gives one.
    pub max_cost_usd: Option<krad_bus::protocol::Dollars>,
    /// Each variant group's limit, unless its RunVariants gives one.
    pub max_group_cost_usd: Option<krad_bus::protocol::Dollars>,
}

/// `[ui]` in the config: the app's page on 127.0.0.1 (docs/ui.md).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct UiConfig {
    /// Whether the page is served (default: yes).
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Its port on 127.0.0.1 (default 0: one the system picks).
    #[serde(default)]
    pub port: u16,
}

impl UiConfig {
    /// Whether the page is served.
    pub fn on(&self) -> bool {
        self.enabled.unwrap_or(true)
    }
}

/// `[sandbox]` in the config: which agents run contained ([`crate::sandbox`]).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SandboxConfig {
    /// The profiles whose agents always run contained.
    #[serde(default)]
    pub profiles: Vec<String>,
    /// What the sandbox may reach on the network: `all` (the default),
    /// `none` (the bus only) or `allow` (the hosts of `allow`, through a
    /// proxy the app runs, every attempt logged).
    #[serde(default)]
    pub network: Option<String>,
    /// With `network = "allow"`: `host`, `host:port` or `*.domain` entries,
    /// besides each profile's model API, allowed by default.
    #[serde(default)]
    pub allow: Vec<String>,
}

impl SandboxConfig {
    /// Checks what serde cannot: a network setting this build enforces.
    pub fn validate(&self) -> Result<(), String> {
        match self.network.as_deref() {
            None | Some("all") | Some("none") if !self.allow.is_empty() => Err(
                "[sandbox] allow = [...] needs network = \"allow\" (\"all\" and \"none\" \
                 take no list)"
                    .into(),
            ),
            None | Some("all") | Some("none") => Ok(()),
            Some("allow") => self
                .allow
                .iter()
                .try_for_each(|entry| allow::Rule::parse(entry).map(drop)),
            Some(other) => Err(format!(
                "[sandbox] network = {other:?}: use \"all\" (shared), \"none\" (the bus \
                 only) or \"allow\" (the hosts of `allow`)"
            )),
        }
    }

    /// Whether the sandbox gets a network namespace of its own (nothing but
    /// the bus, or the bus and the allowlist's proxy).
    pub fn own_network(&self) -> bool {
        matches!(self.network.as_deref(), Some("none" | "allow"))
    }

    /// Whether its connections go through the app's proxy and relays.
    pub fn allowlist(&self) -> bool {
        self.network.as_deref() == Some("allow")
    }
}

/// Why the config could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read the config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid.
    #[error("the config file {path} is not valid: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, with its line.
        message: String,
    },
}

impl Config {
    /// Finds and reads the config file for the repository at `root`.
    /// Returns the config and the file it came from (`None`: defaults).
    pub fn load(
        explicit: Option<&Path>,
        root: &Path,
    ) -> Result<(Config, Option<PathBuf>), ConfigError> {
        let path = match explicit {
            Some(path) => Some(path.to_path_buf()),
            None => Self::candidates(root).into_iter().find(|p| p.is_file()),
        };
        let Some(path) = path else {
            return Ok((Config::default(), None));
        };
        let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read {
            path: path.clone(),
            source,
        })?;
        let config = Config::parse(&text).map_err(|message| ConfigError::Invalid {
            path: path.clone(),
            message,
        })?;
        Ok((config, Some(path)))
    }

    /// Parses the text of a config file.
    pub fn parse(text: &str) -> Result<Config, String> {
        let config: Config = toml::from_str(text).map_err(|e| e.to_string().trim().to_owned())?;
        for (name, profile) in &config.profiles {
            if name.is_empty() {
                return Err("a profile needs a name".to_owned());
            }
            if let Some(command) = &profile.command
                && command.first().is_none_or(|p| p.is_empty())
            {
                return Err(format!(
                    "profile {name:?}: command must start with a program"
                ));
            }
            if profile.memory_max_mib == Some(0) {
                return Err(format!(
                    "profile {name:?}: memory_max_mib must be at least 1 (leave it out for no limit)"
                ));
            }
            let actions = profile.actions.as_deref().unwrap_or_default();
            if actions.len() > 4 {
                return Err(format!(
                    "profile {name:?}: at most 4 actions (the phone's belt has 4 buttons)"
                ));
            }
            for action in actions {
                if !krad_durable::limits::valid_id(&action.id) {
                    return Err(format!(
                        "profile {name:?}: action id {:?} must be 1–128 bytes without spaces, '/', '?' or '#'",
                        action.id
                    ));
                }
                let label = action.label.chars().count();
                if label == 0 || label > 16 || action.keys.is_empty() {
                    return Err(format!(
                        "profile {name:?}: action {:?} needs a label of 1–16 characters and keys",
                        action.id
                    ));
                }
            }
        }
        if let Some(notify) = &config.notify {
            notify.validate()?;
        }
        config.limits.validate()?;
        config.checks.validate()?;
        config.sandbox.validate()?;
        for (name, extension) in &config.extensions {
            if name.is_empty() || extension.command.is_empty() {
                return Err(format!("extension {name:?} needs a command"));
            }
        }
        for (name, host) in &config.hosts {
            if name.is_empty() || host.ssh.is_empty() || host.ssh.starts_with('-') {
                return Err(format!("host {name:?} needs an ssh destination"));
            }
            if !host.root.starts_with('/') {
                return Err(format!(
                    "host {name:?}: root must be an absolute path on the host"
                ));
            }
        }
        Ok(config)
    }

    fn candidates(root: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        if let Some(path) = std::env::var_os("KRAD_CONFIG").filter(|p| !p.is_empty()) {
            out.push(PathBuf::from(path));
            return out;
        }
        out.push(root.join(".krad").join("config.toml"));
        if let Some(dir) = std::env::var_os("XDG_CONFIG_HOME").filter(|p| !p.is_empty()) {
            out.push(PathBuf::from(dir).join("krad").join("config.toml"));
        } else if let Some(home) = std::env::var_os("HOME").filter(|p| !p.is_empty()) {
            out.push(
                PathBuf::from(home)
                    .join(".config")
                    .join("krad")
                    .join("config.toml"),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_profiles_and_terminals() {
        let config = Config::parse(
            r#"
            default_profile = "aider"
            [terminals]
            scrollback = 500
            host = "tmux"
            [profiles.aider]
            command = ["aider", "--yes"]
            prompt = "type"
            idle_after_secs = 20
            env = { A = "1" }
            "#,
        )
        .unwrap();
        assert_eq!(config.default_profile.as_deref(), Some("aider"));
        assert_eq!(config.terminals.scrollback, 500);
        assert_eq!(config.terminals.host, TerminalHostKind::Tmux);
        assert_eq!(Config::default().terminals.host, TerminalHostKind::Pty);
        let aider = &config.profiles["aider"];
        assert_eq!(aider.prompt, Some(PromptDelivery::Type));
        assert_eq!(aider.idle_after_secs, Some(20));
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused_with_their_place() {
        let e = Config::parse("[profiles.x]\ncomand = [\"a\"]\n").unwrap_err();
        assert!(e.contains("comand"), "{e}");
        let e = Config::parse("[profiles.x]\nprompt = \"shout\"\n").unwrap_err();
        assert!(e.contains("line 2"), "{e}");
        let e = Config::parse("[profiles.x]\ncommand = []\n").unwrap_err();
        assert!(e.contains("command"), "{e}");
    }

    #[test]
    fn the_durable_table_and_belt_actions() {
        let config = Config::parse(
            r#"
            [durable]
            name = "laptop"
            socket = "/run/user/1000/krad.sock"
            [durable.tls]
            listen = "127.0.0.1:7443"
            [profiles.shell]
            interrupt = "\u0003"
            actions = [{ id = "yes", label = "Yes", keys = "y\r" }]
            "#,
        )
        .unwrap();
        let durable = config.durable.unwrap();
        assert_eq!(durable.name.as_deref(), Some("laptop"));
        assert_eq!(durable.tls.unwrap().listen.port(), 7443);
        assert_eq!(
            config.profiles["shell"].actions.as_ref().unwrap()[0].keys,
            "y\r"
        );
        let e = Config::parse("[durable.tls]\nlisten = \"nowhere\"\n").unwrap_err();
        assert!(e.contains("listen") || e.contains("address"), "{e}");
        let e = Config::parse(
            "[profiles.shell]\nactions = [{ id = \"a b\", label = \"x\", keys = \"y\" }]\n",
        )
        .unwrap_err();
        assert!(e.contains("action id"), "{e}");
        let e = Config::parse(
            "[profiles.shell]\nactions = [{ id = \"a\", label = \"a label far too long\", keys = \"y\" }]\n",
        )
        .unwrap_err();
        assert!(e.contains("1–16"), "{e}");
    }
}
