//! The app under test: `krad serve` started in a fresh git repository with its
//! own api.json, and blocking one-request-per-connection calls to it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Value, json};

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
    token: String,
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
        let serving: Value = serde_json::from_str(&first).with_context(|| {
            let log = std::fs::read_to_string(dir.path().join("app.log")).unwrap_or_default();
            format!("krad serve printed {first:?}; its log:\n{log}")
        })?;
        let endpoint = serving["Serving"]["endpoint"]
            .as_str()
            .context("no endpoint")?
            .parse()?;
        let pid = serving["Serving"]["pid"].as_u64().context("no pid")? as u32;
        let written: Value = serde_json::from_slice(&std::fs::read(&api_json)?)?;
        let token = written["token"].as_str().context("no token")?.to_owned();
        Ok(Krad {
            child,
            dir,
            _run: run,
            endpoint,
            pid,
            api_json,
            token,
        })
    }

    /// The request line (with `\n`) of a request from Client.
    pub(crate) fn line(&self, request: Value) -> Vec<u8> {
        line_of(
            &json!({"api_version": 1, "token": self.token, "from": "Client", "request": request}),
        )
    }

    /// The request line of a request made by terminal `id` with its own token.
    pub(crate) fn line_as(&self, id: u64, token: &str, request: Value) -> Vec<u8> {
        line_of(&json!({
            "token": token,
            "from": {"Terminal": {"environment": "main", "terminal": id}},
            "request": request
        }))
    }

    /// Makes a request from Client and returns the answer.
    pub(crate) fn call(&self, request: Value) -> anyhow::Result<Value> {
        call_line(self.endpoint, &self.line(request))
    }

    /// Spawns `argv` with the exec profile; returns the terminal id.
    pub(crate) fn spawn_exec(&self, argv: &[&str]) -> anyhow::Result<u64> {
        let answer = self.call(json!({"Spawn": {"profile": "exec", "command": argv}}))?;
        answer["Agent"]["terminal"]
            .as_u64()
            .with_context(|| format!("Spawn failed: {answer}"))
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

/// A JSON value as a request line, `\n` included.
pub(crate) fn line_of(value: &Value) -> Vec<u8> {
    let mut line = serde_json::to_vec(value).unwrap_or_default();
    line.push(b'\n');
    line
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
