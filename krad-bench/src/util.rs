//! Small measuring tools: summaries of repeats, percentiles, what /proc says
//! about a process and about the machine's CPU (steal included).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Starts a helper server of the benchmark (a baseline) and reads the line it
/// prints once it serves (its endpoint, or `ready`); empty if it printed none.
pub(crate) fn start_server(command: &mut Command) -> std::io::Result<(Child, String)> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut first = String::new();
    if let Some(out) = child.stdout.take() {
        BufReader::new(out).read_line(&mut first)?;
    }
    Ok((child, first))
}

/// The median, min and max of a few repeats.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Summary {
    /// The median.
    pub median: f64,
    /// The smallest.
    pub min: f64,
    /// The largest.
    pub max: f64,
}

impl Summary {
    /// Summarizes `values` (all zero when there are none).
    pub(crate) fn of(values: &[f64]) -> Summary {
        if values.is_empty() {
            return Summary::default();
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let mid = v.len() / 2;
        let median = if v.len() % 2 == 1 {
            v[mid]
        } else {
            (v[mid - 1] + v[mid]) / 2.0
        };
        Summary {
            median,
            min: v[0],
            max: v[v.len() - 1],
        }
    }

    /// `median (min–max)` with `decimals` decimals.
    pub(crate) fn show(&self, decimals: usize) -> String {
        format!(
            "{:.d$} ({:.d$}–{:.d$})",
            self.median,
            self.min,
            self.max,
            d = decimals
        )
    }
}

/// The `p`-th percentile (0–100) of sorted samples.
pub(crate) fn percentile(sorted: &[u32], p: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// The machine's CPU counters (jiffies), from the first line of /proc/stat.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CpuTimes {
    total: u64,
    steal: u64,
    idle: u64,
}

impl CpuTimes {
    /// Reads /proc/stat now.
    pub(crate) fn now() -> CpuTimes {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let fields: Vec<u64> = stat
            .lines()
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .skip(1)
            .filter_map(|f| f.parse().ok())
            .collect();
        let get = |i: usize| fields.get(i).copied().unwrap_or(0);
        // user nice system idle iowait irq softirq steal (guest is inside user)
        let total = (0..8).map(get).sum();
        CpuTimes {
            total,
            steal: get(7),
            idle: get(3) + get(4),
        }
    }
}

/// What the machine did between two readings.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CpuUse {
    /// Percent of CPU time stolen by the hypervisor.
    pub steal_pct: f64,
    /// Percent of CPU time busy (neither idle nor stolen).
    pub busy_pct: f64,
}

/// The CPU use between `a` and `b`.
pub(crate) fn cpu_between(a: CpuTimes, b: CpuTimes) -> CpuUse {
    let total = b.total.saturating_sub(a.total).max(1) as f64;
    let steal = b.steal.saturating_sub(a.steal) as f64;
    let idle = b.idle.saturating_sub(a.idle) as f64;
    CpuUse {
        steal_pct: 100.0 * steal / total,
        busy_pct: 100.0 * (total - idle - steal) / total,
    }
}

/// A process's resident memory in KiB (0 if it is gone).
pub(crate) fn rss_kib(pid: u32) -> u64 {
    status_field(pid, "VmRSS:")
}

/// A process's thread count.
pub(crate) fn threads(pid: u32) -> u64 {
    status_field(pid, "Threads:")
}

fn status_field(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// CPU time the live threads of a process ran so far, to the nanosecond (the
/// first field of each `/proc/PID/task/TID/schedstat`); threads that ended are
/// not counted.
pub(crate) fn cpu_time_exact(pid: u32) -> Duration {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Duration::ZERO;
    };
    let nanos: u64 = tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(nanos)
}

/// CPU time a process used so far (user + system), from /proc/PID/stat.
pub(crate) fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name is in parentheses and may hold spaces: count after ')'.
    let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
    let fields: Vec<u64> = after
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    // After ')': state(0) ppid(1) … utime is field 14 of the line, index 11 here.
    let ticks = fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0);
    Duration::from_secs_f64(ticks as f64 / clock_ticks() as f64)
}

fn clock_ticks() -> u64 {
    use std::sync::OnceLock;
    static TICKS: OnceLock<u64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .unwrap_or(100)
    })
}

/// Raises this process's open-file limit to its hard limit (children inherit it);
/// returns the new soft limit.
pub(crate) fn raise_nofile() -> u64 {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) => {
            if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
                hard
            } else {
                soft
            }
        }
        Err(_) => 0,
    }
}

/// A short description of the machine: CPU model, cores, memory, kernel.
pub(crate) fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    format!(
        "{model}, {cores} cores, {:.1} GiB, Linux {}; load average at start {}",
        mem as f64 / 1024.0 / 1024.0,
        kernel.trim(),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    )
}

/// Today's date, UTC, as YYYY-MM-DD.
pub(crate) fn today() -> String {
    std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}
