//! `krad serve`: starts the embedded app in a git repository and serves the bus
//! on 127.0.0.1 until `krad stop`, SIGTERM or Ctrl-C.

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

use crate::exit::{Exit, Failure};
use crate::print;

/// Arguments of `krad serve`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "With a [durable] table in the config it also serves the durable facet (Collie, \
    the phone's bridge) on a private socket ($COLLIE_DURABLE_SOCKET or [durable] socket) and, \
    with [durable.tls], over TLS; see docs/durable.md.\n\n\
    Examples:\n  krad serve\n  krad serve --root ~/src/app --port 41234\n  \
    KRAD_ADE_API_JSON=/tmp/krad/api.json krad serve --json"
)]
pub struct ServeArgs {
    /// The repository to serve (default: the git repository of the current directory).
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

/// Where the app lives, found before anything starts.
struct Place {
    root: PathBuf,
    exe: PathBuf,
    api_json: PathBuf,
    config: Config,
    config_path: Option<PathBuf>,
    state_dir: PathBuf,
    token_dir: PathBuf,
}

/// Runs the app in the foreground.
pub fn run(args: ServeArgs, json: bool) -> anyhow::Result<Exit> {
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

/// The repository, the config and the app's directories; refuses to start
/// beside another live app of the same api.json.
fn find_place(args: &ServeArgs) -> anyhow::Result<Place> {
    let root = repository_root(args.root.as_deref())?;
    let exe = std::env::current_exe().context("cannot find the krad executable")?;
    let api_json = api_json::default_path()?;
    refuse_if_another_app_serves(&api_json)?;
    let (config, config_path) = Config::load(args.config.as_deref(), &root)
        .map_err(|e| Failure::new(Exit::Failure, e.to_string()))?;
    let state_dir = git_common_dir(&root)?.join("krad");
    let token_dir = api_json
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
        .join(format!("terminals-{}", std::process::id()));
    Ok(Place {
        root,
        exe,
        api_json,
        config,
        config_path,
        state_dir,
        token_dir,
    })
}

/// Starts the app, publishes api.json, serves until stopped, then cleans up.
async fn serve(args: ServeArgs, place: Place, json: bool) -> anyhow::Result<Exit> {
    let listener = server::bind(args.port).await.map_err(|e| {
        Failure::new(
            Exit::Failure,
            format!("cannot listen on 127.0.0.1:{}: {e}", args.port),
        )
    })?;
    let address = listener.local_addr()?;
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
    publish(&place, address, &bus, durable.as_ref(), ui.as_ref(), json)?;

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
    api_json::remove_if_ours(&place.api_json);
    tracing::info!("stopped");
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

/// Writes api.json (the endpoint and the Client token, 0600) and says where
/// the app serves.
fn publish(
    place: &Place,
    address: SocketAddr,
    bus: &Bus,
    durable: Option<&Durable>,
    ui: Option<&krad_web::Ui>,
    json: bool,
) -> anyhow::Result<()> {
    let endpoint = address.to_string();
    api_json::write(
        &place.api_json,
        &ApiJson {
            api_version: API_VERSION,
            endpoint: endpoint.clone(),
            token: bus.secret().client_token(),
            pid: std::process::id(),
            build: BUILD.to_owned(),
            started_at: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
            root: place.root.clone(),
            ui: ui.map(krad_web::Ui::url),
        },
    )?;
    announce(
        &Announced {
            root: &place.root,
            endpoint: &endpoint,
            api_json: &place.api_json,
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
    Ok(())
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
    exe: &'a Path,
    durable: Option<&'a Durable>,
    ui: Option<&'a krad_web::Ui>,
}

fn announce(announced: &Announced<'_>, json: bool) {
    let Announced {
        root,
        endpoint,
        api_json,
        exe,
        durable,
        ui,
    } = *announced;
    let socket = durable.and_then(|d| d.socket.as_ref());
    let tls = durable.and_then(|d| d.tls.as_ref());
    if json {
        print::json(&json!({"Serving": {
            "endpoint": endpoint,
            "api_json": api_json,
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
             api.json  {}",
            root.display(),
            std::process::id(),
            api_json.display()
        );
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
        print::line(&text);
    }
}

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

/// The repository's shared git directory (the same for all its worktrees).
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
    Ok(PathBuf::from(dir.trim_end_matches(['\n', '\r'])))
}

/// One api.json per location: a live app there is not silently replaced.
fn refuse_if_another_app_serves(path: &Path) -> anyhow::Result<()> {
    let Ok(existing) = api_json::read(path) else {
        return Ok(());
    };
    let answers = existing
        .endpoint
        .parse::<std::net::SocketAddr>()
        .ok()
        .and_then(|addr| std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok())
        .is_some();
    if existing.pid != std::process::id() && api_json::pid_alive(existing.pid) && answers {
        return Err(Failure::new(
            Exit::Failure,
            format!(
                "another krad app already serves {} (pid {}, {}) through {}; stop it with \
                 `krad stop`, or give this one its own KRAD_ADE_API_JSON",
                existing.root.display(),
                existing.pid,
                existing.endpoint,
                path.display()
            ),
        )
        .into());
    }
    tracing::info!(
        "replacing the stale {} (pid {} is gone)",
        path.display(),
        existing.pid
    );
    Ok(())
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
