//! `krad serve`: starts the embedded app in a git repository and serves the bus
//! on 127.0.0.1 until `krad stop`, SIGTERM or Ctrl-C.
//!
//! One app per repository: before it opens anything of the repository's it
//! takes the repository's lock (`crate::apps::lock`), and a second app on the
//! same repository (from a worktree, a symlink, with another api.json) stops
//! there, naming the first. Once it serves it writes the repository's
//! discovery file and its entry in the per-user list of running apps, and
//! api.json unless a live app of another repository has it; all three are
//! removed when it stops, and the lock goes with the process.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use krad_app::config::Config;
use krad_app::{Durable, EmbeddedApp, Settings};
use krad_bus::api_json::{self, ApiJson};
use krad_bus::protocol::{API_VERSION, BUILD};
use krad_bus::server::{self, Bus, ServerConfig};
use krad_bus::token::Secret;
use serde_json::json;

use crate::apps::lock::{self, Holder, LockError, RepoLock};
use crate::apps::{discovery, registry, repository};
use crate::exit::{Exit, Failure};
use crate::print;
use krad_bus::private_file;

/// Arguments of `krad serve`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "With a [durable] table in the config it also serves the durable facet (Collie, \
    the phone's bridge) on a private socket ($COLLIE_DURABLE_SOCKET or [durable] socket) and, \
    with [durable.tls], over TLS; see docs/durable.md.\n\n\
    One app serves a repository: a second `krad serve` there (or in a worktree of it) \
    exits 1 naming the first. Apps of other repositories run side by side; the CLI finds the \
    app of the repository it runs in (`krad apps` lists them all).\n\n\
    Examples:\n  krad serve\n  krad serve --root ~/src/app --port 41234\n  \
    KRAD_ADE_API_JSON=/tmp/krad/api.json krad serve --json"
)]
pub(crate) struct ServeArgs {
    /// The repository to serve (default: the git repository of the current
    /// directory; `--repo PATH` says the same).
    #[arg(long, value_name = "PATH")]
    pub root: Option<PathBuf>,
    /// The config file (default: $KRAD_CONFIG, <repo>/.krad/config.toml, ~/.config/krad/config.toml).
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// The port on 127.0.0.1 (default: one the system picks).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Connections open at once before new ones are answered `busy`.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections: u32,
    /// Time for a request line to arrive, in milliseconds (tests shorten it).
    #[arg(long, default_value_t = 10_000, hide = true)]
    pub line_timeout_ms: u64,
    /// Holds the durable facet at `ready: false` this long after the restore,
    /// in milliseconds (tests watch the `503 starting` answers).
    #[arg(long, default_value_t = 0, hide = true)]
    pub durable_ready_delay_ms: u64,
}

impl ServeArgs {
    /// `krad serve --repo PATH` serves PATH, as `--root PATH` does.
    pub(crate) fn or_repo(mut self, repo: Option<PathBuf>) -> ServeArgs {
        self.root = self.root.or(repo);
        self
    }
}

/// Where the app lives, found before anything starts.
struct Place {
    root: PathBuf,
    /// The repository's identity: its canonical git common directory.
    git_dir: PathBuf,
    /// Held until the app is gone.
    lock: RepoLock,
    /// No app served this repository before: it prints what to do next.
    first_run: bool,
    exe: PathBuf,
    api_json: PathBuf,
    config: Config,
    config_path: Option<PathBuf>,
    state_dir: PathBuf,
    token_dir: PathBuf,
}

/// Runs the app in the foreground.
pub(crate) fn run(args: ServeArgs, json: bool) -> anyhow::Result<Exit> {
    let place = find_place(&args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    // The app runs on a worker, not on this thread: a connection accepted
    // there starts its task on that same worker, with no thread to wake.
    runtime.block_on(async move {
        tokio::spawn(serve(args, place, json))
            .await
            .unwrap_or_else(|e| Err(anyhow::anyhow!("the app stopped abruptly: {e}")))
    })
}

/// The repository and its lock, the config and the app's directories;
/// refuses to start where another app serves the repository.
fn find_place(args: &ServeArgs) -> anyhow::Result<Place> {
    let root = repository_root(args.root.as_deref())?;
    let git_dir = git_common_dir(&root)?;
    let state_dir = repository::krad_dir(&git_dir);
    // Neither an app's lock nor its store (an earlier krad had no lock).
    let first_run = !state_dir.join(lock::FILE).exists() && !state_dir.join("state.db").exists();
    if !state_dir.exists() {
        private_file::ensure_dir(&state_dir)
            .with_context(|| format!("cannot make {}", state_dir.display()))?;
    }
    let lock = take_lock(&state_dir, &root)?;
    let exe = std::env::current_exe().context("cannot find the krad executable")?;
    let api_json = api_json::default_path()?;
    let (config, config_path) = Config::load(args.config.as_deref(), &root)
        .map_err(|e| Failure::new(Exit::Failure, e.to_string()))?;
    let token_dir = api_json
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
        .join(format!("terminals-{}", std::process::id()));
    Ok(Place {
        root,
        git_dir,
        lock,
        first_run,
        exe,
        api_json,
        config,
        config_path,
        state_dir,
        token_dir,
    })
}

/// Starts the app, publishes api.json, serves until stopped, then cleans up.
async fn serve(args: ServeArgs, mut place: Place, json: bool) -> anyhow::Result<Exit> {
    let listener = server::bind(args.port).await.map_err(|e| {
        Failure::new(
            Exit::Failure,
            format!("cannot listen on 127.0.0.1:{}: {e}", args.port),
        )
    })?;
    let address = listener.local_addr()?;
    let holder = holder(&place.root, Some(address.to_string()));
    place
        .lock
        .update(&holder)
        .with_context(|| format!("cannot write {}", place.lock.path().display()))?;
    let limits = ServerConfig {
        max_connections: args.max_connections as usize,
        line_timeout: Duration::from_millis(args.line_timeout_ms.max(1)),
        ..ServerConfig::default()
    };
    // Signals are caught from before api.json exists, so that no stop leaves it behind.
    let signals = Signals::install()?;
    let secret = Arc::new(Secret::generate()?);
    krad_bus::request::hello::announce_memory_limits(krad_app::cgroup::here().describe());
    let bus = Arc::new(Bus::new(secret.clone(), limits));
    let settings = Settings {
        root: place.root.clone(),
        state_dir: place.state_dir.clone(),
        token_dir: place.token_dir.clone(),
        krad: place.exe.clone(),
        endpoint: address,
        config: place.config.clone(),
    };
    let host = Arc::new(krad_term::pty::PtyHost::new());
    let app = Arc::new(
        EmbeddedApp::new(settings, host, secret)
            .map_err(|e| Failure::new(Exit::Failure, e.to_string()))?,
    );
    let durable = start(&app, &bus, args.durable_ready_delay_ms).await?;
    let ui = start_ui(&place, address, &bus).await?;
    let published = publish(&place, address, &bus, durable.as_ref(), ui.as_ref(), json);
    let published = match published {
        Ok(published) => published,
        Err(error) => {
            unpublish(&place, None);
            return Err(error);
        }
    };

    let stop_on_signal = {
        let bus = bus.clone();
        async move {
            signals.recv().await;
            tracing::info!("signal received; stopping");
            bus.request_shutdown(true);
        }
    };
    let signals = tokio::spawn(stop_on_signal);
    server::serve(listener, bus.clone(), app.clone()).await;
    signals.abort();
    if let Some(durable) = durable {
        durable.stop();
    }
    if let Some(ui) = &ui {
        ui.stop();
    }
    app.shutdown(bus.closes_terminals_on_shutdown()).await;
    unpublish(&place, published.as_deref());
    tracing::info!("stopped");
    // The lock goes last, with `place`.
    drop(place);
    Ok(Exit::Success)
}

/// Starts the durable facet (answering `503 starting`), restores the app's
/// records and terminals, then lets the facet say it is ready.
async fn start(
    app: &Arc<EmbeddedApp>,
    bus: &Arc<Bus>,
    ready_delay_ms: u64,
) -> anyhow::Result<Option<Durable>> {
    let durable = app.start_durable().await.map_err(|e| {
        Failure::new(
            Exit::Failure,
            format!("the durable facet cannot start: {e}"),
        )
    })?;
    for earlier in app.restore().await {
        serve_also(earlier, bus, app).await;
    }
    if let Some(durable) = &durable {
        match ready_delay_ms {
            0 => durable.set_ready(),
            delay => {
                let ready = durable.readiness();
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(delay)).await;
                    ready.set();
                });
            }
        }
    }
    Ok(durable)
}

/// Starts the page (`[ui]`, on by default): a client of this bus with the
/// client token, on 127.0.0.1.
async fn start_ui(
    place: &Place,
    address: SocketAddr,
    bus: &Bus,
) -> anyhow::Result<Option<krad_web::Ui>> {
    let config = &place.config.ui;
    if !config.on() {
        return Ok(None);
    }
    let settings = krad_web::WebSettings {
        bus: address,
        client_token: bus.secret().client_token(),
        state_dir: place.state_dir.clone(),
    };
    let ui = krad_web::start(config.port, settings).await.map_err(|e| {
        Failure::new(
            Exit::Failure,
            format!(
                "cannot serve the page on 127.0.0.1:{}: {e} (set [ui] port to a free one, or \
                 enabled = false)",
                config.port
            ),
        )
    })?;
    Ok(Some(ui))
}

/// Writes the repository's discovery file, api.json (unless a live app of
/// another repository has it) and the entry in the list of running apps, and
/// says where the app serves. The entry's path, to remove at the end.
fn publish(
    place: &Place,
    address: SocketAddr,
    bus: &Bus,
    durable: Option<&Durable>,
    ui: Option<&krad_web::Ui>,
    json: bool,
) -> anyhow::Result<Option<PathBuf>> {
    let endpoint = address.to_string();
    let started_at = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let contents = ApiJson {
        api_version: API_VERSION,
        endpoint: endpoint.clone(),
        token: bus.secret().client_token(),
        pid: std::process::id(),
        build: BUILD.to_owned(),
        started_at: started_at.clone(),
        root: place.root.clone(),
        ui: ui.map(krad_web::Ui::url),
    };
    discovery::write(&place.git_dir, &contents)?;
    let api_json_owner = claim_api_json(&place.api_json, &contents)?;
    let entry = registry::Entry {
        pid: std::process::id(),
        root: place.root.clone(),
        git_dir: place.git_dir.clone(),
        endpoint: endpoint.clone(),
        ui: contents.ui.clone(),
        build: BUILD.to_owned(),
        started_at,
    };
    // The entries of apps that died without removing theirs (SIGKILL) go
    // now, not only at the next `krad apps`.
    let _ = registry::live();
    let registered = match registry::register(&entry) {
        Ok(path) => Some(path),
        Err(error) => {
            tracing::warn!(%error, "this app is not in the list of running apps (`krad apps`)");
            None
        }
    };
    announce(
        &Announced {
            root: &place.root,
            endpoint: &endpoint,
            api_json: &place.api_json,
            api_json_owner: api_json_owner.as_ref(),
            discovery: &discovery::path(&place.git_dir),
            first_run: place.first_run,
            exe: &place.exe,
            durable,
            ui,
        },
        json,
    );
    match &place.config_path {
        Some(path) => tracing::info!("config: {}", path.display()),
        None => tracing::info!("no config file; built-in profiles"),
    }
    tracing::info!(%endpoint, root = %place.root.display(), "serving");
    Ok(registered)
}

/// Removes what [`publish`] wrote (each only if it still names this app).
fn unpublish(place: &Place, registered: Option<&Path>) {
    if let Some(entry) = registered {
        registry::unregister(entry);
    }
    discovery::remove_if_ours(&place.git_dir);
    api_json::remove_if_ours(&place.api_json);
}

/// What this app writes into its repository's lock file.
fn holder(root: &Path, endpoint: Option<String>) -> Holder {
    Holder {
        pid: std::process::id(),
        root: root.to_path_buf(),
        endpoint,
        started_at: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
    }
}

/// Takes the repository's lock, or says which app holds it.
fn take_lock(state_dir: &Path, root: &Path) -> anyhow::Result<RepoLock> {
    match RepoLock::acquire(state_dir, &holder(root, None)) {
        Ok(lock) => Ok(lock),
        Err(LockError::Held { path, holder }) => {
            let first = match &holder {
                Some(h) => format!(
                    "{} (pid {}, bus {})",
                    h.root.display(),
                    h.pid,
                    h.endpoint.as_deref().unwrap_or("not listening yet")
                ),
                None => format!("it (its lock {} names no app)", path.display()),
            };
            let served = holder.as_ref().map_or(root, |h| h.root.as_path());
            Err(Failure::new(
                Exit::Failure,
                format!(
                    "another krad app already serves {first}; one app serves a repository at a \
                     time. Use that one (`krad ls` in {}), or stop it first: `krad stop --repo {}`",
                    served.display(),
                    served.display()
                ),
            )
            .into())
        }
        Err(other @ LockError::Io { .. }) => {
            Err(Failure::new(Exit::Failure, other.to_string()).into())
        }
    }
}

/// Writes api.json unless it names a live app of another process: then
/// that app's, which is left to it (a plain client keeps reaching that
/// one). The check and the write are made holding a lock beside the file,
/// so two apps starting at once never both take it.
fn claim_api_json(path: &Path, contents: &ApiJson) -> anyhow::Result<Option<ApiJson>> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let lock = path.with_file_name(format!(".{name}.lock"));
    private_file::exclusively(&lock, || match another_app_has(path) {
        Some(owner) => Ok(Some(owner)),
        None => api_json::write(path, contents).map(|()| None),
    })
    .with_context(|| format!("cannot lock {}", lock.display()))?
    .map_err(Into::into)
}

/// The live app of another process that api.json names, if any: api.json is
/// then left to it.
fn another_app_has(path: &Path) -> Option<ApiJson> {
    let existing = api_json::read(path).ok()?;
    let answers = existing
        .endpoint
        .parse::<std::net::SocketAddr>()
        .ok()
        .and_then(|addr| std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok())
        .is_some();
    if existing.pid != std::process::id() && api_json::pid_alive(existing.pid) && answers {
        return Some(existing);
    }
    tracing::info!(
        "replacing the stale {} (pid {} is gone)",
        path.display(),
        existing.pid
    );
    None
}

/// Serves the bus on an endpoint that terminals taken back from an earlier run
/// were given, when this run listens elsewhere.
async fn serve_also(endpoint: SocketAddr, bus: &Arc<Bus>, app: &Arc<EmbeddedApp>) {
    match server::bind(endpoint.port()).await {
        Ok(listener) => {
            tracing::info!(%endpoint, "also serving the bus where earlier terminals look for it");
            tokio::spawn(server::serve(listener, bus.clone(), app.clone()));
        }
        Err(error) => tracing::warn!(
            %endpoint, %error,
            "terminals taken back look for the bus at an endpoint this app cannot listen on; \
             their `krad` calls fail until they are restarted (`krad serve --port` keeps one endpoint)"
        ),
    }
}

/// What `krad serve` says it serves.
struct Announced<'a> {
    root: &'a Path,
    endpoint: &'a str,
    api_json: &'a Path,
    api_json_owner: Option<&'a ApiJson>,
    discovery: &'a Path,
    first_run: bool,
    exe: &'a Path,
    durable: Option<&'a Durable>,
    ui: Option<&'a krad_web::Ui>,
}

fn announce(announced: &Announced<'_>, json: bool) {
    let Announced {
        root,
        endpoint,
        api_json,
        api_json_owner,
        discovery,
        first_run,
        exe,
        durable,
        ui,
    } = *announced;
    let socket = durable.and_then(|d| d.socket.as_ref());
    let tls = durable.and_then(|d| d.tls.as_ref());
    if json {
        print::json(&json!({"Serving": {
            "endpoint": endpoint,
            "api_json": api_json_owner.is_none().then_some(api_json),
            "api_json_owner": api_json_owner.map(|o| json!({"pid": o.pid, "root": o.root})),
            "discovery": discovery,
            "first_run": first_run,
            "root": root,
            "pid": std::process::id(),
            "build": BUILD,
            "api_version": API_VERSION,
            "krad": exe,
            "ui": ui.map(krad_web::Ui::url),
            "durable": durable.map(|_| json!({
                "socket": socket,
                "tls": tls.map(|t| json!({
                    "address": t.address.to_string(),
                    "fingerprint": t.fingerprint,
                    "cert": t.cert,
                    "token_file": t.token_file,
                })),
            })),
        }}));
    } else {
        let mut text = format!(
            "krad: serving {}\n  bus       {endpoint} (agents API v{API_VERSION}, build {BUILD}, pid {})\n  \
             found by  `krad` in any folder of {} ({})",
            root.display(),
            std::process::id(),
            root.display(),
            discovery.display()
        );
        match api_json_owner {
            None => text.push_str(&format!("\n  api.json  {}", api_json.display())),
            Some(owner) => text.push_str(&format!(
                "\n  api.json  {} is left to the app of {} (pid {}); elsewhere, `krad --repo {}` \
                 reaches this one",
                api_json.display(),
                owner.root.display(),
                owner.pid,
                root.display()
            )),
        }
        if let Some(socket) = socket {
            text.push_str(&format!("\n  durable   socket {}", socket.display()));
        }
        if let Some(tls) = tls {
            text.push_str(&format!(
                "\n  durable   https://{}/session/v1 (token in {})\n  \
                 certificate sha256 {}",
                tls.address,
                tls.token_file.display(),
                tls.fingerprint
            ));
        }
        if let Some(ui) = ui {
            text.push_str(&format!(
                "\n  ui        {} (`krad ui` opens it logged in)",
                ui.url()
            ));
        }
        text.push_str("\n  stop it with `krad stop` or Ctrl-C");
        if first_run {
            text.push_str(NEXT_STEPS);
        }
        print::line(&text);
    }
}

/// What the first `krad serve` in a repository says to do next.
const NEXT_STEPS: &str = "\n\nFirst time here? In another shell, in this repository:\n  \
    krad spawn --profile claude --prompt 'fix the login bug'   start an agent (or codex, or \
    `--profile exec -- CMD`)\n  \
    krad                     the home screen: every agent, its screen, diffs and asks, \
    from the keyboard\n  \
    krad ls                  the agents and their states (`krad watch` for a live table)\n  \
    krad attach ID           its terminal, here (Ctrl-\\ to leave)\n  \
    krad ui                  the page in a browser: every terminal, live\n  \
    krad apps                every app running on this machine\n  \
    krad doctor              what is missing here (agent CLIs, tmux, bubblewrap, ...)";

/// The top of the git repository at `dir` (default: the current directory).
fn repository_root(dir: Option<&Path>) -> anyhow::Result<PathBuf> {
    let dir = match dir {
        Some(dir) => dir.to_path_buf(),
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    if !dir.is_dir() {
        return Err(
            Failure::new(Exit::Usage, format!("{} is not a directory", dir.display())).into(),
        );
    }
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(&dir)
        .args(["rev-parse", "--show-toplevel"])
        .output()
        .map_err(|e| {
            Failure::new(
                Exit::Failure,
                format!("cannot run git (is it installed?): {e}"),
            )
        })?;
    if !out.status.success() {
        if inside_git_dir(&dir) {
            return Err(Failure::new(
                Exit::Failure,
                format!(
                    "{} is a git directory with no work tree (a bare repository, or inside \
                     .git): agents work in files; run `krad serve` in a checkout of it (`git \
                     clone` or `git worktree add` makes one) or pass --root PATH",
                    dir.display()
                ),
            )
            .into());
        }
        let reason = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        return Err(Failure::new(
            Exit::Failure,
            format!(
                "{} is not inside a git repository ({reason}); run `krad serve` in your \
                 repository or pass --root PATH",
                dir.display()
            ),
        )
        .into());
    }
    let top =
        String::from_utf8(out.stdout).context("git printed a repository path that is not UTF-8")?;
    Ok(PathBuf::from(top.trim_end_matches(['\n', '\r'])))
}

/// Whether `dir` is in a git directory itself: a bare repository, or a `.git`.
fn inside_git_dir(dir: &Path) -> bool {
    std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["rev-parse", "--is-inside-git-dir"])
        .output()
        .is_ok_and(|out| out.status.success() && out.stdout.starts_with(b"true"))
}

/// The repository's shared git directory (the same for all its worktrees),
/// canonicalized: the repository's identity for its lock.
fn git_common_dir(root: &Path) -> anyhow::Result<PathBuf> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["rev-parse", "--path-format=absolute", "--git-common-dir"])
        .output()
        .context("cannot run git")?;
    if !out.status.success() {
        anyhow::bail!(
            "git cannot tell the git directory of {}: {}",
            root.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let dir = String::from_utf8(out.stdout).context("git printed a path that is not UTF-8")?;
    let dir = PathBuf::from(dir.trim_end_matches(['\n', '\r']));
    dir.canonicalize()
        .with_context(|| format!("cannot resolve {}", dir.display()))
}

/// SIGTERM and SIGINT, both of which stop the app cleanly.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    /// SIGHUP stops the app too — unless it was started ignoring SIGHUP
    /// (`nohup`): then it is caught and ignored.
    hup: tokio::signal::unix::Signal,
    hup_ignored: bool,
}

impl Signals {
    /// Catches SIGTERM, SIGINT and SIGHUP. Caught (rather than ignored),
    /// they are back to their defaults in the programs the app starts: an app
    /// started with `nohup` must not start terminals deaf to SIGHUP, which Close
    /// and the end of the app send them.
    fn install() -> anyhow::Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        let hup_ignored = ignored_at_start(1);
        Ok(Signals {
            term: signal(SignalKind::terminate()).context("cannot catch SIGTERM")?,
            int: signal(SignalKind::interrupt()).context("cannot catch SIGINT")?,
            hup: signal(SignalKind::hangup()).context("cannot catch SIGHUP")?,
            hup_ignored,
        })
    }

    async fn recv(mut self) {
        loop {
            tokio::select! {
                _ = self.term.recv() => return,
                _ = self.int.recv() => return,
                _ = self.hup.recv() => {
                    if !self.hup_ignored {
                        return;
                    }
                    tracing::info!("SIGHUP ignored: the app was started ignoring it");
                }
            }
        }
    }
}

/// Whether signal `number` was ignored when the process started (as `nohup`
/// leaves SIGHUP), from the `SigIgn` mask of `/proc/self/status`. Read before
/// the signal is caught.
fn ignored_at_start(number: u32) -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    status
        .lines()
        .find_map(|line| line.strip_prefix("SigIgn:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (number - 1)) != 0)
}
