//! `krad-bench`: krad's benchmark harness.
//!
//! Every benchmark compares, in the same run, the app with a baseline the harness
//! starts itself, alternating the two back to back with the same load generator,
//! and prints figures (median of several repeats, with min and max), ratios and the
//! CPU steal of the machine meanwhile, as Markdown for `docs/PERFORMANCE.md`.
//!
//! ```sh
//! scripts/build-release        # the release krad (static on Linux with glibc)
//! cargo run --release -p krad-bench -- all
//! ```

mod baseline;
mod bus;
mod durable;
mod krad;
mod load;
mod parsers;
mod proxy;
mod sandbox;
mod store;
mod stream;
mod term;
mod tui;
mod usage;
mod util;
mod waits;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};

/// Benchmarks of krad against baselines it starts itself.
#[derive(Debug, Parser)]
#[command(name = "krad-bench")]
struct Cli {
    /// The krad binary (default: what scripts/build-release builds — under
    /// $CARGO_TARGET_DIR, else target: <host triple>/release/krad on Linux with
    /// glibc, release/krad elsewhere or when that is missing).
    #[arg(long, global = true)]
    krad: Option<PathBuf>,
    /// Build `krad` with scripts/build-release before measuring.
    #[arg(long, global = true)]
    build: bool,
    /// Pairs of runs (baseline, krad) per point.
    #[arg(long, global = true, default_value_t = 5)]
    repeats: usize,
    /// Seconds per throughput run [default: 2; 1 for `durable`].
    #[arg(long, global = true)]
    secs: Option<f64>,
    /// Client counts for Hello.
    #[arg(
        long,
        global = true,
        value_delimiter = ',',
        default_value = "1,4,16,64"
    )]
    clients: Vec<usize>,
    /// Agents for List.
    #[arg(long, global = true, default_value_t = 100)]
    agents: usize,
    /// Concurrent Waits.
    #[arg(long, global = true, default_value_t = 10_000)]
    waiters: usize,
    /// Subscribers for SubscribeAgents.
    #[arg(long, global = true, default_value_t = 1000)]
    subscribers: usize,
    /// Agent changes per second for SubscribeAgents.
    #[arg(long, global = true, default_value_t = 1000)]
    rate: u64,
    /// MiB a terminal prints in the terminal benchmark.
    #[arg(long, global = true, default_value_t = 32)]
    mib: usize,
    /// Agents in the durable facet's snapshot.
    #[arg(long, global = true, default_value_t = 50)]
    panes: usize,
    #[command(subcommand)]
    bench: Bench,
}

#[derive(Debug, Subcommand)]
enum Bench {
    /// Everything below, in order.
    All,
    /// Hello throughput and latency at each client count.
    Hello,
    /// List of many agents.
    List,
    /// `krad api` as a process, against a minimal client and nc.
    Api,
    /// Many concurrent Waits: memory and release time.
    Waits,
    /// SubscribeAgents fan-out: delivery latency and memory.
    Subscribe,
    /// Terminal output throughput through the PTY and the screen parser.
    Term,
    /// Spawn-to-running latency.
    Spawn,
    /// CPU the app uses while agents sit idle.
    Idle,
    /// The home screen (`krad tui`): a frame after a change against `krad ls`,
    /// a key to its frame, idle CPU (`--agents 1000` for the docs' figures).
    Tui,
    /// What sampling the terminals' CPU and memory costs (`--agents` of them).
    Usage,
    /// What running in a sandbox (bubblewrap) adds to Spawn-to-running.
    Sandbox,
    /// A download through a sandbox's allowlist proxy against a direct one
    /// (`--mib` each).
    Proxy,
    /// The durable facet on its Unix socket: the 304 snapshot poll against HTTP
    /// baselines, the full snapshot and an events read (~1 min).
    Durable,
    /// The app's store: a change and its request id's answer committed in
    /// state.db, against rewriting the JSON files of earlier versions.
    Store,
    /// (internal) A baseline server; prints its address, then serves until killed.
    #[command(hide = true)]
    BaselineServer {
        #[arg(long, value_enum)]
        mode: baseline::Mode,
        #[arg(long, default_value_t = 200)]
        reply_bytes: usize,
    },
    /// (internal) Prints the KiB one terminal of a screen model holds once fed a file.
    #[command(hide = true)]
    ParserMemory {
        #[arg(long, value_enum)]
        candidate: parsers::Candidate,
        #[arg(long)]
        output: PathBuf,
    },
    /// (internal) An HTTP baseline on a Unix socket; prints `ready`, then serves until killed.
    #[command(hide = true)]
    DurableBaseline {
        #[arg(long, value_enum)]
        kind: durable::HttpKind,
        #[arg(long)]
        socket: PathBuf,
        #[arg(long)]
        etag: String,
        #[arg(long)]
        reply_file: PathBuf,
    },
}

/// What every benchmark needs.
pub struct Ctx {
    /// The krad binary.
    pub krad: PathBuf,
    /// Pairs per point.
    pub repeats: usize,
    /// Seconds per run.
    pub secs: f64,
    /// Client counts.
    pub clients: Vec<usize>,
    /// Agents for List.
    pub agents: usize,
    /// Concurrent waiters.
    pub waiters: usize,
    /// Subscribers.
    pub subscribers: usize,
    /// Changes per second.
    pub rate: u64,
    /// MiB printed.
    pub mib: usize,
    /// Agents in the durable facet's snapshot.
    pub panes: usize,
    /// Seconds per run of the durable facet.
    pub durable_secs: f64,
}

impl Ctx {
    /// The length of one throughput run.
    pub fn run(&self) -> Duration {
        Duration::from_secs_f64(self.secs)
    }

    /// The length of one run of the durable facet.
    pub fn durable_run(&self) -> Duration {
        Duration::from_secs_f64(self.durable_secs)
    }

    /// Prints a line of the report at once.
    pub fn out(&self, text: &str) {
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{text}");
        let _ = stdout.flush();
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("krad-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn find_krad(flag: Option<PathBuf>, build: bool) -> anyhow::Result<PathBuf> {
    if build {
        let script = workspace().join("scripts").join("build-release");
        let built = std::process::Command::new(&script)
            .stderr(std::process::Stdio::inherit())
            .output()
            .with_context(|| format!("cannot run {}", script.display()))?;
        anyhow::ensure!(built.status.success(), "scripts/build-release failed");
        if flag.is_none() {
            let path = String::from_utf8_lossy(&built.stdout).trim().to_owned();
            return Ok(workspace().join(path).canonicalize()?);
        }
    }
    if let Some(path) = flag {
        // Absolute: the benchmarks run it from directories of their own.
        return std::path::absolute(&path)
            .with_context(|| format!("--krad {}: cannot make it absolute", path.display()));
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"));
    let plain = target.join("release").join("krad");
    let krad = static_build(&target)
        .filter(|path| path.exists())
        .unwrap_or(plain);
    anyhow::ensure!(
        krad.exists(),
        "{} is missing: build it (scripts/build-release) or pass --build",
        krad.display()
    );
    Ok(krad.canonicalize()?)
}

/// Where scripts/build-release puts the static build, on Linux with glibc.
fn static_build(target: &std::path::Path) -> Option<PathBuf> {
    let triple = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
    cfg!(all(target_os = "linux", target_env = "gnu"))
        .then(|| target.join(triple).join("release").join("krad"))
}

fn run(cli: Cli) -> anyhow::Result<()> {
    if let Bench::BaselineServer { mode, reply_bytes } = cli.bench {
        util::raise_nofile();
        return baseline::serve(mode, reply_bytes);
    }
    if let Bench::DurableBaseline {
        kind,
        socket,
        etag,
        reply_file,
    } = &cli.bench
    {
        return durable::serve_baseline(*kind, socket, etag, reply_file);
    }
    if let Bench::ParserMemory { candidate, output } = &cli.bench {
        return parsers::print_memory(*candidate, output);
    }
    let nofile = util::raise_nofile();
    let krad = if matches!(cli.bench, Bench::Store | Bench::Usage) {
        // Measures the store alone: no app to find.
        PathBuf::from("krad")
    } else {
        find_krad(cli.krad, cli.build).context("finding krad")?
    };
    let ctx = Ctx {
        krad,
        repeats: cli.repeats.max(1),
        secs: cli.secs.unwrap_or(2.0),
        clients: cli.clients,
        agents: cli.agents,
        waiters: cli.waiters,
        subscribers: cli.subscribers,
        rate: cli.rate.max(1),
        mib: cli.mib.max(1),
        panes: cli.panes.max(1),
        durable_secs: cli.secs.unwrap_or(1.0),
    };
    ctx.out(&format!(
        "<!-- krad-bench {:?} -->\nMachine: {}. Open-file limit {nofile}. Run {}.\n",
        cli.bench,
        util::machine(),
        util::today()
    ));
    let all = matches!(cli.bench, Bench::All);
    if all || matches!(cli.bench, Bench::Hello) {
        bus::hello(&ctx)?;
    }
    if all || matches!(cli.bench, Bench::List) {
        bus::list(&ctx)?;
    }
    if all || matches!(cli.bench, Bench::Api) {
        bus::api(&ctx)?;
    }
    if all || matches!(cli.bench, Bench::Waits) {
        waits::waits(&ctx)?;
    }
    if all || matches!(cli.bench, Bench::Subscribe) {
        stream::subscribe(&ctx)?;
    }
    if all || matches!(cli.bench, Bench::Term) {
        term::output(&ctx)?;
    }
    if all || matches!(cli.bench, Bench::Spawn) {
        term::spawn(&ctx)?;
    }
    if all || matches!(cli.bench, Bench::Idle) {
        term::idle(&ctx)?;
    }
    if all || matches!(cli.bench, Bench::Tui) {
        tui::tui(&ctx)?;
    }
    if all || matches!(cli.bench, Bench::Durable) {
        durable::durable(&ctx)?;
    }
    if all || matches!(cli.bench, Bench::Store) {
        store::store(&ctx)?;
    }
    if all || matches!(cli.bench, Bench::Usage) {
        usage::usage(&ctx)?;
    }
    if all || matches!(cli.bench, Bench::Sandbox) {
        sandbox::sandbox(&ctx)?;
    }
    if all || matches!(cli.bench, Bench::Proxy) {
        proxy::proxy(&ctx)?;
    }
    Ok(())
}
