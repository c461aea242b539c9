//! What the app's usage sampler costs (issue 38): one sample of N terminals'
//! process trees — every `/proc/<pid>/stat` of the machine read, the trees
//! summed — against `ps -e -o pid,ppid,rss,time` (what a person would run to
//! read the same), alternated in the same run, with N `sleep` processes
//! standing for the terminals.

use std::process::{Command, Stdio};
use std::time::Instant;

use crate::Ctx;
use crate::util::Summary;

/// Samples per repeat, each side.
const ROUNDS: usize = 20;

/// Prints the sample's cost, the ratio to `ps` and the share of one core it
/// takes at the app's 2-s period.
pub(crate) fn usage(ctx: &Ctx) -> anyhow::Result<()> {
    let terminals = ctx.agents.max(1);
    let mut children = Vec::with_capacity(terminals);
    for _ in 0..terminals {
        children.push(
            Command::new("sleep")
                .arg("600")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn()?,
        );
    }
    let pids: Vec<u32> = children.iter().map(|c| c.id()).collect();
    let (mut sampled, mut listed) = (Vec::new(), Vec::new());
    let mut found = 0;
    for _ in 0..ctx.repeats * ROUNDS {
        let started = Instant::now();
        found = krad_app::usage::sample_once(&pids);
        sampled.push(started.elapsed().as_secs_f64() * 1e3);
        let started = Instant::now();
        let ps = Command::new("ps")
            .args(["-e", "-o", "pid,ppid,rss,time"])
            .stdout(Stdio::piped())
            .output()?;
        listed.push(started.elapsed().as_secs_f64() * 1e3);
        anyhow::ensure!(ps.status.success(), "ps failed");
    }
    let processes = std::fs::read_dir("/proc")?
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .count();
    for mut child in children {
        let _ = child.kill();
        let _ = child.wait();
    }
    anyhow::ensure!(found == terminals, "sampled {found} of {terminals} trees");
    let (sample, ps) = (Summary::of(&sampled), Summary::of(&listed));
    let period_ms = krad_app::sampling::PERIOD.as_secs_f64() * 1e3;
    ctx.out(&format!(
        "### Usage sampling: {terminals} terminals ({processes} processes on the machine)\n\n\
         | | ms per sample, median (min–max) |\n|---|---|\n\
         | krad's sample (every /proc/<pid>/stat, {terminals} trees summed) | {} |\n\
         | `ps -e -o pid,ppid,rss,time` | {} |\n\n\
         krad ÷ ps: {:.2}. At one sample every {:.0} s: {:.2} % of one core.\n",
        sample.show(2),
        ps.show(2),
        sample.median / ps.median,
        period_ms / 1e3,
        sample.median / period_ms * 100.0,
    ));
    Ok(())
}
