//! The app under test: `krad serve` started in a fresh git repository with its
//! own api.json, and blocking one-request-per-connection calls to it: typed
//! (krad-bus's client), or a request's line sent as is, for the load rounds.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use krad_bus::client::{Answered, Client};
use krad_bus::protocol::{Caller, TerminalRef, Token};
use krad_bus::request::Call;
use krad_bus::request::spawn::Spawn;
use serde_json::Value;

/// A running `krad serve`.
pub(crate) struct Krad {
    child: Child,
    /// Its temp directory (repository, log).
    pub dir: tempfile::TempDir,
    /// Its runtime directory (api.json, its terminals' token files).
    _run: tempfile::TempDir,
    /// Its bus.
    pub endpoint: SocketAddr,
    /// Its pid.
    pub pid: u32,
    /// Its api.json.
    pub api_json: PathBuf,
    /// Its bus, as Client.
    client: Client,
}

impl Krad {
    /// Starts `krad serve --json ARGS` in a new git repository.
    pub(crate) fn start(krad: &Path, args: &[&str]) -> anyhow::Result<Krad> {
        Krad::start_config(krad, args, None)
    }

    /// [`Krad::start`] with a config file (the repository's `.krad/config.toml`).
    pub(crate) fn start_config(
        krad: &Path,
        args: &[&str],
        config: Option<&str>,
    ) -> anyhow::Result<Krad> {
        let dir = tempfile::tempdir()?;
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(&repo)?;
        let status = Command::new("git")
            .args(["init", "-q", "-b", "main"])
            .current_dir(&repo)
            .status()
            .context("git init")?;
        if !status.success() {
            bail!("git init failed");
        }
        if let Some(config) = config {
            std::fs::create_dir_all(repo.join(".krad"))?;
            std::fs::write(repo.join(".krad").join("config.toml"), config)?;
        }
        let run = runtime_dir()?;
        let api_json = run.path().join("api.json");
        let log = std::fs::File::create(dir.path().join("app.log"))?;
        let mut child = Command::new(krad)
            .args(["serve", "--json"])
            .args(args)
            .current_dir(&repo)
            .env("KRAD_ADE_API_JSON", &api_json)
            .env("RUST_LOG", "warn")
            .env("SHELL", "/bin/sh")
            .env_remove("KRAD_CONFIG")
            .env_remove("KRAD_ADE_ENDPOINT")
            .env_remove("KRAD_ADE_TOKEN_FILE")
            .env_remove("KRAD_ADE_TERMINAL")
            // It would win over the config's [durable] socket.
            .env_remove("COLLIE_DURABLE_SOCKET")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .with_context(|| format!("cannot start {}", krad.display()))?;
        let mut first = String::new();
        if let Some(out) = child.stdout.take() {
            BufReader::new(out).read_line(&mut first)?;
        }
        // The line says it serves (or why not); api.json says where.
        serde_json::from_str::<Value>(&first).with_context(|| {
            let log = std::fs::read_to_string(dir.path().join("app.log")).unwrap_or_default();
            format!("krad serve printed {first:?}; its log:\n{log}")
        })?;
        let written = krad_bus::api_json::read(&api_json)
            .map_err(|e| anyhow::anyhow!("{}: {e}", api_json.display()))?;
        let endpoint: SocketAddr = written.endpoint.parse()?;
        let client = Client::at(endpoint, written.token, Caller::Client);
        Ok(Krad {
            child,
            dir,
            _run: run,
            endpoint,
            pid: written.pid,
            api_json,
            client,
        })
    }

    /// The request line (with `\n`) of a request from Client.
    pub(crate) fn line<R: Call>(&self, request: R) -> Vec<u8> {
        self.client.request_line(request, None).unwrap_or_default()
    }

    /// The request line of a request made by terminal `id` with its own token.
    pub(crate) fn line_as<R: Call>(&self, id: u64, token: &str, request: R) -> Vec<u8> {
        let terminal = Caller::Terminal(TerminalRef {
            environment: "main".to_owned(),
            terminal: id,
        });
        Client::at(self.endpoint, Token::new(token.trim()), terminal)
            .request_line(request, None)
            .unwrap_or_default()
    }

    /// Makes a request from Client and returns its answer as the app wrote
    /// it and typed.
    pub(crate) fn answered<R: Call>(&self, request: R) -> anyhow::Result<Answered<R::Answer>> {
        Ok(self.client.call(request, None, ANSWER_MARGIN)?)
    }

    /// Makes a request from Client and returns its typed answer; any other
    /// (an error, `"TimedOut"`) fails.
    pub(crate) fn call<R: Call>(&self, request: R) -> anyhow::Result<R::Answer> {
        let answered = self.answered(request)?;
        answered
            .answer
            .map_err(|_| anyhow::anyhow!("{} answered {}", R::KIND.name(), answered.raw))
    }

    /// Spawns `argv` with the exec profile; returns the terminal id.
    pub(crate) fn spawn_exec(&self, argv: &[&str]) -> anyhow::Result<u64> {
        let spawn = Spawn {
            profile: Some("exec".to_owned()),
            command: Some(argv.iter().map(|&a| a.to_owned()).collect()),
            ..Spawn::default()
        };
        Ok(self.call(spawn).context("Spawn failed")?.terminal)
    }

    /// A terminal's own token, from its token file.
    pub(crate) fn terminal_token(&self, id: u64) -> anyhow::Result<String> {
        let dir = self
            .api_json
            .parent()
            .context("api.json has no directory")?
            .join(format!("terminals-{}", self.pid));
        Ok(std::fs::read_to_string(dir.join(format!("{id}.token")))?)
    }
}

/// How long past a request's deadline a typed call waits for its answer (the
/// raw calls wait 120 s).
const ANSWER_MARGIN: Duration = Duration::from_secs(30);

/// A runtime directory for the app's api.json and its terminals' token files,
/// on the kind of file system a user's has: under `$XDG_RUNTIME_DIR` (krad's
/// default place for api.json; a tmpfs on a systemd machine), else under
/// `/dev/shm`, else a plain temp directory. A Spawn writes a token file there:
/// on this machine's ext4 `/tmp` a new file costs 160 µs, on tmpfs 10 µs
/// (docs/PERFORMANCE.md, seventh pass).
fn runtime_dir() -> anyhow::Result<tempfile::TempDir> {
    let tmpfs = std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .or_else(|| Some(PathBuf::from("/dev/shm")))
        .filter(|dir| dir.is_dir());
    let made = match tmpfs {
        // Private, as api.json's directory must be.
        Some(base) => tempfile::Builder::new()
            .prefix("krad-bench-")
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir_in(base)
            .or_else(|_| tempfile::tempdir()),
        None => tempfile::tempdir(),
    };
    made.context("cannot make a runtime directory")
}

impl Drop for Krad {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends a line on a new connection and returns the raw answer (read to EOF).
pub(crate) fn call_raw(endpoint: SocketAddr, line: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut stream = TcpStream::connect(endpoint)?;
    stream.set_read_timeout(Some(Duration::from_secs(120)))?;
    stream.write_all(line)?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    Ok(answer)
}

/// Sends a line and parses the answer.
pub(crate) fn call_line(endpoint: SocketAddr, line: &[u8]) -> anyhow::Result<Value> {
    let answer = call_raw(endpoint, line)?;
    serde_json::from_slice(&answer)
        .with_context(|| format!("answer {:?}", String::from_utf8_lossy(&answer)))
}
