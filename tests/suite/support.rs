//! Test support: starts the real `krad serve` in a fresh git repository with its
//! own api.json, and talks to it over real sockets and through the real CLI.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The `krad` binary under test.
pub(crate) const KRAD: &str = env!("CARGO_BIN_EXE_krad");

/// A running app and the temp directory it lives in.
pub(crate) struct App {
    pub child: Child,
    pub dir: tempfile::TempDir,
    pub endpoint: SocketAddr,
    pub pid: u32,
    pub api_json: PathBuf,
    /// What `krad serve --json` printed first (`{"Serving": …}`).
    pub serving: Value,
    token: String,
}

/// Makes a git repository in `dir/repo` and returns its path.
pub(crate) fn git_repo(dir: &Path) -> PathBuf {
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let status = Command::new("git")
        .args(["init", "-q", "-b", "main"])
        .current_dir(&repo)
        .status()
        .unwrap();
    assert!(status.success());
    repo
}

impl App {
    /// Starts `krad serve --json` with extra arguments.
    pub(crate) fn start_with(args: &[&str]) -> App {
        App::start_logged(args, "warn")
    }

    /// Starts the app with a `RUST_LOG` filter; its log goes to [`App::log`].
    pub(crate) fn start_logged(args: &[&str], rust_log: &str) -> App {
        App::launch(Launch {
            args,
            rust_log,
            ..Launch::default()
        })
    }

    /// Starts the app with a config file (written to `<repo>/.krad/config.toml`)
    /// and the fake agents of `tests/suite/fake` first on its PATH.
    pub(crate) fn start_config(config: &str) -> App {
        App::launch(Launch {
            config: Some(config),
            ..Launch::default()
        })
    }

    /// Starts the app as `launch` says.
    pub(crate) fn launch(launch: Launch<'_>) -> App {
        let dir = match launch.reuse {
            Some(dir) => dir,
            None => tempfile::tempdir().unwrap(),
        };
        let repo = dir.path().join("repo");
        if !repo.exists() {
            git_repo(dir.path());
        }
        if let Some(config) = launch.config {
            std::fs::create_dir_all(repo.join(".krad")).unwrap();
            std::fs::write(repo.join(".krad").join("config.toml"), config).unwrap();
        }
        let path = format!(
            "{}:{}",
            fake_agents_dir().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let args = launch.args;
        let rust_log = if launch.rust_log.is_empty() {
            "warn"
        } else {
            launch.rust_log
        };
        let api_json = dir.path().join("run").join("api.json");
        let mut command = Command::new(KRAD);
        if launch.ignoring_hangup {
            command = Command::new("sh");
            command.args(["-c", "trap '' HUP; exec \"$0\" \"$@\"", KRAD]);
        }
        let mut child = command
            .arg("serve")
            .arg("--json")
            .args(args)
            .current_dir(&repo)
            .env("KRAD_ADE_API_JSON", &api_json)
            .env_remove("KRAD_ADE_ENDPOINT")
            .env("RUST_LOG", rust_log)
            .env("PATH", path)
            .env_remove("KRAD_CONFIG")
            .env_remove("KRAD_ADE_TOKEN_FILE")
            .env_remove("KRAD_ADE_TERMINAL")
            .env_remove("COLLIE_DURABLE_SOCKET")
            .envs(private_home(dir.path()))
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::piped())
            .stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(dir.path().join("app.log"))
                    .unwrap(),
            )
            .spawn()
            .unwrap();
        let first = first_line(&mut child);
        let serving: Value = serde_json::from_str(&first).unwrap_or_else(|e| {
            let log = std::fs::read_to_string(dir.path().join("app.log")).unwrap_or_default();
            panic!("krad serve printed {first:?}: {e}; its log:\n{log}")
        });
        let endpoint = serving["Serving"]["endpoint"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let pid = serving["Serving"]["pid"].as_u64().unwrap() as u32;
        let written: Value = serde_json::from_slice(&std::fs::read(&api_json).unwrap()).unwrap();
        let token = written["token"].as_str().unwrap().to_owned();
        App {
            child,
            dir,
            endpoint,
            pid,
            api_json,
            serving,
            token,
        }
    }

    /// Starts `krad serve` as shipped.
    pub(crate) fn start() -> App {
        App::start_with(&[])
    }

    /// What the app logged so far.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("app.log")).unwrap_or_default()
    }

    /// The client token from api.json.
    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    /// An envelope from Client with the right token.
    pub(crate) fn envelope(&self, request: Value) -> Value {
        json!({"api_version": 1, "token": self.token, "from": "Client", "request": request})
    }

    /// Sends raw bytes on a fresh connection and returns everything the app wrote.
    pub(crate) fn send_raw(&self, bytes: &[u8]) -> String {
        let mut stream = self.connect();
        stream.write_all(bytes).unwrap();
        read_all(&mut stream)
    }

    /// Sends one envelope (as a line) and returns the parsed answer.
    pub(crate) fn call(&self, envelope: &Value) -> Value {
        let mut line = serde_json::to_vec(envelope).unwrap();
        line.push(b'\n');
        let answer = self.send_raw(&line);
        serde_json::from_str(answer.trim_end())
            .unwrap_or_else(|e| panic!("answer {answer:?} is not JSON: {e}"))
    }

    /// Sends a request from Client.
    pub(crate) fn request(&self, request: Value) -> Value {
        self.call(&self.envelope(request))
    }

    /// Sends a request from Client and returns what its answer `kind` holds
    /// (`"Agent"`: the record); any other answer fails the test, shown.
    pub(crate) fn answered(&self, request: Value, kind: &str) -> Value {
        let answer = self.request(request);
        assert!(answer[kind].is_object(), "not {kind}: {answer}");
        answer[kind].clone()
    }

    /// A connected socket with a read timeout, so that no test hangs.
    pub(crate) fn connect(&self) -> TcpStream {
        let stream = TcpStream::connect(self.endpoint).unwrap();
        stream
            // A guard against a hang only: longer than any request's deadline
            // in the tests (Wait up to 120 s, Code and ExtensionTool 2 min).
            .set_read_timeout(Some(Duration::from_secs(200)))
            .unwrap();
        stream
    }

    /// Runs the CLI against this app (through api.json) with extra environment.
    pub(crate) fn krad(&self, args: &[&str]) -> Output {
        self.krad_env(args, &[])
    }

    /// Terminal `parent` (with its `token`) spawns `command` in its own
    /// environment: the new terminal's id.
    pub(crate) fn spawn_as(&self, parent: u64, token: &str, command: &[&str]) -> u64 {
        let answer = self.call_as(
            parent,
            token,
            json!({"Spawn": {"profile": "exec", "command": command}}),
        );
        answer["Agent"]["terminal"]
            .as_u64()
            .unwrap_or_else(|| panic!("{answer}"))
    }

    /// Starts the CLI against this app, its stdout piped (`--follow`).
    pub(crate) fn krad_child(&self, args: &[&str]) -> Child {
        krad_command(&self.api_json, args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Runs the CLI with `stdin` on its standard input.
    pub(crate) fn krad_with_stdin(&self, args: &[&str], stdin: &[u8]) -> Output {
        let mut child = krad_command(&self.api_json, args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin).unwrap();
        child.wait_with_output().unwrap()
    }

    /// A plain terminal (its program sleeps a minute) and its token.
    pub(crate) fn plain_terminal(&self) -> (u64, String) {
        let id = self.spawn_sh("sleep 60");
        (id, self.terminal_token(id))
    }

    /// Runs the CLI, which must exit 0; its stdout.
    pub(crate) fn krad_ok(&self, args: &[&str]) -> String {
        let out = self.krad(args);
        assert_eq!(exit_code(&out), 0, "krad {args:?}: {}", stderr(&out));
        stdout(&out)
    }

    /// Runs the CLI with extra environment variables.
    pub(crate) fn krad_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        krad_cmd(&self.api_json, args, env)
    }

    /// Waits (at most `limit`) for the app to exit and returns its status.
    pub(crate) fn wait_exit(&mut self, limit: Duration) -> std::process::ExitStatus {
        let until = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < until,
                "the app did not exit within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends a signal to the app.
    pub(crate) fn signal(&self, signal: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid as i32), signal).unwrap();
    }
}

/// A HOME of the app's own under `dir` (with a git identity), so that nothing the
/// app or its terminals run reads or writes the real HOME (a shell's history, a
/// user's krad or git config).
pub(crate) fn private_home(dir: &Path) -> Vec<(String, String)> {
    let home = dir.join("home");
    let config = home.join(".config");
    std::fs::create_dir_all(&config).unwrap();
    let gitconfig = home.join(".gitconfig");
    if !gitconfig.exists() {
        std::fs::write(
            &gitconfig,
            "[user]\n\tname = krad test\n\temail = test@krad.invalid\n",
        )
        .unwrap();
    }
    // The runtime dir too (the ports registry lives there): never the user's.
    let runtime = dir.join("runtime");
    std::fs::create_dir_all(&runtime).unwrap();
    let private = std::os::unix::fs::PermissionsExt::from_mode(0o700);
    std::fs::set_permissions(&runtime, private).unwrap();
    vec![
        ("HOME".into(), home.display().to_string()),
        ("XDG_CONFIG_HOME".into(), config.display().to_string()),
        ("XDG_RUNTIME_DIR".into(), runtime.display().to_string()),
        ("GIT_CONFIG_GLOBAL".into(), gitconfig.display().to_string()),
        ("GIT_CONFIG_NOSYSTEM".into(), "1".into()),
    ]
}

/// How to start an app.
#[derive(Default)]
pub(crate) struct Launch<'a> {
    pub args: &'a [&'a str],
    pub rust_log: &'a str,
    pub config: Option<&'a str>,
    /// Start in the directory (and repository) of a previous app.
    pub reuse: Option<tempfile::TempDir>,
    /// Extra environment for the app, and so for its terminals (set after the
    /// suite's own, so `PATH` here replaces the suite's).
    pub env: Vec<(String, String)>,
    /// Start the app ignoring SIGHUP, as `nohup` does.
    pub ignoring_hangup: bool,
}

/// The directory of the fake agents the tests run (`tests/suite/fake`).
pub(crate) fn fake_agents_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/suite/fake")
}

impl App {
    /// Spawns a terminal from Client with these Spawn fields; returns the record.
    pub(crate) fn spawn(&self, fields: Value) -> Value {
        let answer = self.request(json!({ "Spawn": fields }));
        assert!(answer["Agent"].is_object(), "Spawn failed: {answer}");
        answer["Agent"].clone()
    }

    /// Spawns `sh -c SCRIPT` with the exec profile; returns the terminal id.
    pub(crate) fn spawn_sh(&self, script: &str) -> u64 {
        self.spawn(json!({"profile": "exec", "command": ["sh", "-c", script]}))["terminal"]
            .as_u64()
            .unwrap()
    }

    /// The agent record of a terminal.
    pub(crate) fn record(&self, id: u64) -> Value {
        let answer = self.request(json!({"Check": {"target": id}}));
        assert!(answer["Agent"].is_object(), "Check {id}: {answer}");
        answer["Agent"].clone()
    }

    /// Polls until the record satisfies `check` (at most `limit`); returns it.
    pub(crate) fn until(&self, id: u64, limit: Duration, check: impl Fn(&Value) -> bool) -> Value {
        let until = Instant::now() + limit;
        loop {
            let record = self.record(id);
            if check(&record) {
                return record;
            }
            assert!(
                Instant::now() < until,
                "terminal {id} never got there: {record}"
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Polls until the agent is in `state`; returns the record.
    pub(crate) fn until_state(&self, id: u64, state: &str) -> Value {
        self.until(id, Duration::from_secs(20), |r| r["state"] == state)
    }

    /// Polls until the terminal's screen contains `text`; returns the screen.
    pub(crate) fn until_screen(&self, id: u64, text: &str) -> String {
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            let answer = self.request(json!({"Output": {"target": id}}));
            let screen = answer["Output"]["screen"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if screen.contains(text) {
                return screen;
            }
            assert!(
                Instant::now() < until,
                "{text:?} never showed on terminal {id}: {answer}"
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// The directory of the terminals' token files.
    pub(crate) fn token_dir(&self) -> PathBuf {
        self.api_json
            .parent()
            .unwrap()
            .join(format!("terminals-{}", self.pid))
    }

    /// A terminal's own token, read from its token file.
    pub(crate) fn terminal_token(&self, id: u64) -> String {
        std::fs::read_to_string(self.token_dir().join(format!("{id}.token"))).unwrap()
    }

    /// A host terminal's token, from its file on the "host" (this machine, whose
    /// SSH logins get `home` as their HOME).
    pub(crate) fn terminal_token_remote(&self, home: &Path, id: u64) -> String {
        std::fs::read_to_string(home.join(format!(".krad-ade/remote-{}/{id}.token", self.pid)))
            .unwrap()
    }

    /// Sends a request as a terminal with a given token.
    pub(crate) fn call_as(&self, terminal: u64, token: &str, request: Value) -> Value {
        self.call(&json!({
            "token": token,
            "from": {"Terminal": {"environment": "main", "terminal": terminal}},
            "request": request
        }))
    }

    /// The app's resident memory, in KiB.
    pub(crate) fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap()
    }

    /// Stops the app (SIGTERM), waits for it, and hands back its directory.
    pub(crate) fn stop_keep_dir(mut self) -> tempfile::TempDir {
        if self.child.try_wait().unwrap().is_none() {
            self.signal(nix::sys::signal::Signal::SIGTERM);
        }
        self.wait_exit(Duration::from_secs(15));
        let dir = tempfile::tempdir().unwrap();
        std::mem::replace(&mut self.dir, dir)
    }

    /// Stops the app (SIGTERM, unless it ended already) and starts the next
    /// one on the same repository and folders, with `config`.
    pub(crate) fn again(self, config: Option<&str>) -> App {
        let dir = self.stop_keep_dir();
        App::launch(Launch {
            config,
            reuse: Some(dir),
            ..Launch::default()
        })
    }

    /// SIGKILLs the app (what a terminal host keeps lives on) and starts the
    /// next one on the same repository and folders, with `config`.
    pub(crate) fn killed_then_again(self, config: Option<&str>) -> App {
        self.signal(nix::sys::signal::Signal::SIGKILL);
        self.again(config)
    }
}

impl Drop for App {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the CLI with a given api.json location and extra environment.
pub(crate) fn krad_cmd(api_json: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = krad_command(api_json, args);
    cmd.stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// The CLI as a client of the app whose api.json is `api_json`, outside any
/// terminal of it, and outside any repository (the CLI would look for the
/// app of the repository it runs in first): in api.json's folder.
fn krad_command(api_json: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(KRAD);
    if let Some(dir) = api_json.ancestors().skip(1).find(|dir| dir.is_dir()) {
        cmd.current_dir(dir);
    }
    cmd.args(args)
        .env("KRAD_ADE_API_JSON", api_json)
        .env_remove("KRAD_ADE_ENDPOINT")
        .env_remove("KRAD_ADE_TOKEN")
        .env_remove("KRAD_ADE_TOKEN_FILE")
        .env_remove("KRAD_ADE_ENVIRONMENT")
        .env_remove("KRAD_ADE_TERMINAL");
    cmd
}

/// An app whose repository has a first commit of `files` (path, contents),
/// with `config` if given.
pub(crate) fn app_with_first_commit(files: &[(&str, &[u8])], config: Option<&str>) -> App {
    let dir = tempfile::tempdir().unwrap();
    let repo = git_repo(dir.path());
    for (file, contents) in files {
        let path = repo.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, contents).unwrap();
    }
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    App::launch(Launch {
        reuse: Some(dir),
        config,
        ..Launch::default()
    })
}

/// Runs git in `dir` with a fixed identity; returns its stdout, trimmed.
pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    git_tried(dir, args).unwrap_or_else(|stderr| panic!("git {args:?}: {stderr}"))
}

/// [`git`], its failure returned (its stderr) rather than a panic: for a
/// read that races with the app's own git (`git worktree list` while a
/// worktree is being added reads its half-written files and fails).
pub(crate) fn git_tried(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Reads until the app closes the connection.
pub(crate) fn read_all(stream: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// What a request without fields that answers a list answers (`"Asks"` →
/// `{"Asks":[…]}`).
pub(crate) fn listed(app: &App, request: &str) -> Vec<Value> {
    app.request(json!(request))[request]
        .as_array()
        .unwrap()
        .clone()
}

/// The object of a JSON array whose `name` is `name`.
pub(crate) fn named<'a>(list: &'a Value, name: &str) -> &'a Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|item| item["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {list}"))
}

/// The `key` of each object of a JSON array (their ids, names …).
pub(crate) fn each<'a>(list: &'a Value, key: &str) -> Vec<&'a str> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|item| item[key].as_str().unwrap())
        .collect()
}

/// Every file below `dir`, at any depth (a folder that cannot be read is
/// passed over).
pub(crate) fn files_under(dir: &Path) -> Vec<PathBuf> {
    let (mut folders, mut files) = (vec![dir.to_path_buf()], Vec::new());
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for path in entries.flatten().map(|entry| entry.path()) {
            if path.is_dir() {
                folders.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files
}

/// The first line a child printed on its piped stdout (`krad serve`'s
/// `Serving` line), with its newline.
pub(crate) fn first_line(child: &mut Child) -> String {
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    first
}

/// The error code of an answer, or "" when it is not an error.
pub(crate) fn code(answer: &Value) -> &str {
    answer["Error"]["code"].as_str().unwrap_or("")
}

/// The exit code of a finished CLI run.
pub(crate) fn exit_code(output: &Output) -> i32 {
    output.status.code().unwrap_or(-1)
}

/// stdout of a CLI run as text.
pub(crate) fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// stderr of a CLI run as text.
pub(crate) fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Waits until `check` holds, polling; panics after `limit`.
pub(crate) fn wait_until(limit: Duration, mut check: impl FnMut() -> bool) {
    let until = Instant::now() + limit;
    while !check() {
        assert!(Instant::now() < until, "not true within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Tests whose assertions bound a latency (the real CLIs) share this lock for
/// reading; a test that loads the machine on purpose (the crash torture) takes
/// it for writing, so that the two never run at once.
pub(crate) static LATENCY_BOUND: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// A latency bound stretched by how loaded the machine is, since the bound is
/// about the app, not about the machine: when more processes want to run than
/// there are cores (the 1-minute load average over the number of cores), the
/// bound grows in that ratio; on an idle or normally busy machine it is `base`.
pub(crate) fn stretched(base: Duration) -> Duration {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or(0.0);
    base.mul_f64((load / cores).max(1.0))
}

/// A share of [`LATENCY_BOUND`] for a test bounding a latency.
pub(crate) fn latency_bound() -> std::sync::RwLockReadGuard<'static, ()> {
    LATENCY_BOUND.read().unwrap_or_else(|p| p.into_inner())
}

/// [`LATENCY_BOUND`] alone, for a test that loads the machine.
pub(crate) fn loading_the_machine() -> std::sync::RwLockWriteGuard<'static, ()> {
    LATENCY_BOUND.write().unwrap_or_else(|p| p.into_inner())
}
