//! The keyboard home screen (issue 47) with `--agents` agents (1,000 for
//! docs/PERFORMANCE.md): the frame after one agent's change — the record
//! applied, the rows sorted again, the frame drawn and its bytes written —
//! measured in-process (`krad_tui::bench`) against `krad ls` of the same
//! list as a process, alternated in the same run; a key press to its frame
//! against one frame at 60 Hz; and the CPU `krad tui` uses while nothing
//! changes, in a tmux pane of its own (a private socket).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use krad_bus::protocol::AgentRecord;
use krad_bus::request::list::List;

use crate::Ctx;
use crate::krad::Krad;
use crate::util::{Summary, cpu_time_exact};

/// Changes (and `krad ls` runs) per repeat.
const ROUNDS: usize = 20;
/// Key presses measured.
const KEYS: usize = 500;
/// The screen the frames are drawn for.
const COLS: u16 = 160;
const ROWS: u16 = 50;
/// How long the idle UI is watched.
const IDLE: Duration = Duration::from_secs(20);

/// Prints the figures as Markdown.
pub(crate) fn tui(ctx: &Ctx) -> anyhow::Result<()> {
    let n = ctx.agents.max(1);
    let krad = Krad::start(&ctx.krad, &[])?;
    for _ in 0..n {
        krad.spawn_exec(&["sleep", "3600"])?;
    }
    let spawned = Instant::now();
    let records: Vec<AgentRecord> = krad.call(List::default()).context("List's answer")?;
    anyhow::ensure!(
        records.len() == n,
        "List has {} of {n} agents",
        records.len()
    );
    let ids: Vec<u64> = records.iter().map(|r| r.terminal).collect();
    let mut screen = krad_tui::bench::Screen::new(records, COLS, ROWS)?;

    let (mut frames, mut lists) = (Vec::new(), Vec::new());
    for round in 0..ctx.repeats * ROUNDS {
        let id = ids[(round * 7919) % ids.len()];
        frames.push(screen.state_change(id)?.as_secs_f64() * 1e3);
        let started = Instant::now();
        // Outside any repository: the CLI would look for the app of the one it
        // runs in first.
        let ls = Command::new(&ctx.krad)
            .arg("ls")
            .current_dir(krad.dir.path())
            .env("KRAD_ADE_API_JSON", &krad.api_json)
            .env("COLUMNS", COLS.to_string())
            .env_remove("KRAD_ADE_ENDPOINT")
            .stdout(Stdio::null())
            .status()?;
        lists.push(started.elapsed().as_secs_f64() * 1e3);
        anyhow::ensure!(ls.success(), "krad ls failed");
    }
    let mut keys = Vec::with_capacity(KEYS);
    for _ in 0..KEYS {
        keys.push(screen.key_press()?.as_secs_f64() * 1e3);
    }
    let (frame, ls, key) = (
        Summary::of(&frames),
        Summary::of(&lists),
        Summary::of(&keys),
    );
    let key_p99 = p99(&keys);
    let over = keys.iter().filter(|&&k| k > 1e3 / 60.0).count();
    let frame_60 = 1e3 / 60.0;

    // The idle UI, once every time shown reads in minutes (no more ticks).
    let settle = Duration::from_secs(62).saturating_sub(spawned.elapsed());
    std::thread::sleep(settle);
    let idle = idle_cpu(&ctx.krad, &krad.api_json, n)?;

    ctx.out(&format!(
        "### The home screen (`krad tui`) with {n} agents\n\n\
         | | ms, median (min–max) |\n|---|---|\n\
         | a state change to its frame ({COLS}×{ROWS}, in-process) | {} |\n\
         | `krad ls` of the same list (a process) | {} |\n\
         | a key press (↓) to its frame | {} |\n\n\
         Frame after a change ÷ `krad ls`: {:.3}. Key to frame: {:.2} ms at the median, {:.2} ms \
         at the 99th percentile, {:.2} ms at the worst ({over} of {KEYS} over a frame), against \
         {frame_60:.1} ms per frame at 60 Hz. `krad tui` idle for {} s in a tmux pane: {:.4} s \
         of CPU ({:.3} % of one core).\n",
        frame.show(3),
        ls.show(2),
        key.show(3),
        frame.median / ls.median,
        key.median,
        key_p99,
        key.max,
        IDLE.as_secs(),
        idle.as_secs_f64(),
        idle.as_secs_f64() / IDLE.as_secs_f64() * 100.0,
    ));
    Ok(())
}

/// The 99th percentile of `values`.
fn p99(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let at = (sorted.len() as f64 * 0.99).ceil() as usize;
    sorted.get(at.saturating_sub(1)).copied().unwrap_or(0.0)
}

/// The CPU `krad tui` uses over [`IDLE`] once it shows the `n` agents.
fn idle_cpu(krad: &Path, api_json: &Path, n: usize) -> anyhow::Result<Duration> {
    let dir = tempfile::tempdir()?;
    let socket = dir.path().join("tmux.sock");
    let tmux = |args: &[&str]| -> anyhow::Result<String> {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&socket)
            .args(args)
            .output()
            .context("tmux")?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let status = Command::new("tmux")
        .arg("-S")
        .arg(&socket)
        .args([
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "tui",
            "-x",
            &COLS.to_string(),
        ])
        .args(["-y", &ROWS.to_string()])
        // Outside any repository (see the `krad ls` above).
        .args(["-c", &dir.path().display().to_string()])
        .arg(format!("exec '{}' tui", krad.display()))
        .env("KRAD_ADE_API_JSON", api_json)
        .env_remove("KRAD_ADE_ENDPOINT")
        .env_remove("TMUX")
        .status()?;
    anyhow::ensure!(status.success(), "tmux did not start");
    let result = (|| {
        let shown = format!("{n} agents");
        let until = Instant::now() + Duration::from_secs(30);
        while !tmux(&["capture-pane", "-p", "-t", "tui"])?.contains(&shown) {
            anyhow::ensure!(Instant::now() < until, "krad tui never showed {shown}");
            std::thread::sleep(Duration::from_millis(50));
        }
        let pid: u32 = tmux(&["display-message", "-p", "-t", "tui", "#{pane_pid}"])?
            .trim()
            .parse()
            .context("the pane's pid")?;
        // Its first frames and the environments' answer settle first.
        std::thread::sleep(Duration::from_secs(2));
        let before = cpu_time_exact(pid);
        std::thread::sleep(IDLE);
        Ok(cpu_time_exact(pid).saturating_sub(before))
    })();
    let _ = tmux(&["kill-server"]);
    result
}
