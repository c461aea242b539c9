//! What each terminal costs the machine: CPU and resident memory of its whole
//! process tree (the program and every process below it), read from `/proc`
//! every [`crate::sampling::PERIOD`] by the one sampler ([`crate::sampling`]), off the request path, and written into the
//! records without a new rev ([`crate::store::Store::set_usage`]).
//!
//! One sample reads `/proc/<pid>/stat` of every process once (the tree is
//! found from each process's parent), so its cost grows with the machine's
//! processes, not with the terminals: docs/PERFORMANCE.md has it measured.
//!
//! Terminals on an SSH host that live in tmux there are sampled the same way
//! through the host's link, while it is up ([`crate::hosts::Host::processes_for_usage`]:
//! the panes' pids and every `/proc/<pid>/stat` of the host in one `ssh`),
//! and with each, the checks running there for its variant (their pids
//! noted in files there, read in the same `ssh`), as the checks here are
//! ([`crate::store::Store::sample_also`]). What a sample sees of each such
//! check's own tree goes to its host ([`crate::hosts::Host::saw_checks`]), to
//! be kept with the check's result.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use krad_bus::protocol::{Tenths, Usage};

use std::sync::Weak;

use crate::hosts::HostLinks;
use crate::store::Store;
use crate::store::now_rfc3339;

/// One process as `/proc/<pid>/stat` tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Process {
    parent: u32,
    /// CPU time used, in clock ticks: its own and that of its children it
    /// waited for (so a child's time is not lost when it ends).
    ticks: u64,
    /// Resident pages.
    resident_pages: u64,
}

/// Parses `/proc/<pid>/stat`. The command name may hold spaces and
/// parentheses: the fields are read after its last `)`.
fn parse_stat(text: &str) -> Option<Process> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state (0), ppid (1), … utime (11), stime (12),
    // cutime (13), cstime (14), … rss (21).
    let number = |i: usize| fields.get(i)?.parse::<u64>().ok();
    let signed = |i: usize| fields.get(i)?.parse::<i64>().ok();
    let waited = |i: usize| signed(i).map(|t| t.max(0) as u64);
    Some(Process {
        parent: u32::try_from(number(1)?).ok()?,
        ticks: number(11)? + number(12)? + waited(13)? + waited(14)?,
        resident_pages: signed(21)?.max(0) as u64,
    })
}

/// Every process on the machine now.
fn processes() -> HashMap<u32, Process> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return HashMap::new();
    };
    dir.flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            Some((pid, parse_stat(&stat)?))
        })
        .collect()
}

/// Processes from `/proc/<pid>/stat` lines (a host's, read through its
/// link): one line each, its pid first.
fn processes_from_lines(text: &str) -> HashMap<u32, Process> {
    text.lines()
        .filter_map(|line| {
            let pid = line.split_whitespace().next()?.parse().ok()?;
            Some((pid, parse_stat(line)?))
        })
        .collect()
}

/// What a host said for a sample ([`crate::hosts::Host::processes_for_usage`]).
#[derive(Debug)]
struct HostSample {
    ticks_per_second: f64,
    page_size: u64,
    /// Its panes: terminal id and pid (and a terminal's checks: its id and
    /// each one's pid).
    panes: Vec<(u64, u32)>,
    /// The checks running there: their run and pid (each also in `panes`).
    checks: Vec<(u64, u32)>,
    processes: HashMap<u32, Process>,
}

/// Reads what a host said for a sample; `None` if it makes no sense.
fn parse_host_sample(text: &str) -> Option<HostSample> {
    let mut sections = text.splitn(3, "---\n");
    let mut machine = sections.next()?.lines();
    let ticks_per_second: f64 = machine.next()?.trim().parse().ok()?;
    let page_size: u64 = machine.next()?.trim().parse().ok()?;
    // `<id> <pid>` a pane, `<id> <pid> <run>` a check.
    let (mut panes, mut checks) = (Vec::new(), Vec::new());
    for line in sections.next()?.lines() {
        let mut words = line.split_whitespace();
        let (Some(Ok(id)), Some(Ok(pid))) = (
            words.next().map(str::parse::<u64>),
            words.next().map(str::parse::<u32>),
        ) else {
            continue;
        };
        match words.next().map(str::parse::<u64>) {
            None => {}
            Some(Ok(run)) => checks.push((run, pid)),
            Some(Err(_)) => continue,
        }
        panes.push((id, pid));
    }
    let processes = processes_from_lines(sections.next().unwrap_or_default());
    (ticks_per_second > 0.0 && page_size > 0).then_some(HostSample {
        ticks_per_second,
        page_size,
        panes,
        checks,
        processes,
    })
}

/// A tree's totals: ticks, resident pages, processes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Totals {
    ticks: u64,
    resident_pages: u64,
    processes: u32,
}

/// The totals of each root's tree (a root that is gone has none).
fn trees(all: &HashMap<u32, Process>, roots: &[u32]) -> HashMap<u32, Totals> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (&pid, process) in all {
        children.entry(process.parent).or_default().push(pid);
    }
    let mut totals = HashMap::new();
    for &root in roots {
        if !all.contains_key(&root) {
            continue;
        }
        let mut sum = Totals::default();
        let mut stack = vec![root];
        while let Some(pid) = stack.pop() {
            let Some(process) = all.get(&pid) else {
                continue;
            };
            sum.ticks += process.ticks;
            sum.resident_pages += process.resident_pages;
            sum.processes += 1;
            stack.extend(children.get(&pid).into_iter().flatten().copied());
        }
        totals.insert(root, sum);
    }
    totals
}

/// What the last sample saw of each terminal: each of its roots (its
/// program, and the checks counted as its own) and that tree's ticks.
type Seen = HashMap<(u64, u32), u64>;

/// The sampler: what it needs of the machine, and what it saw last.
struct Sampler {
    ticks_per_second: f64,
    page_size: u64,
    seen: Seen,
    at: Instant,
}

impl Sampler {
    /// A sampler of this machine's processes.
    fn local() -> Sampler {
        let sysconf = |name| nix::unistd::sysconf(name).ok().flatten().filter(|&v| v > 0);
        Sampler::with(
            sysconf(nix::unistd::SysconfVar::CLK_TCK).unwrap_or(100) as f64,
            sysconf(nix::unistd::SysconfVar::PAGE_SIZE).unwrap_or(4096) as u64,
        )
    }

    /// A sampler of a machine whose clock ticks and pages are these.
    fn with(ticks_per_second: f64, page_size: u64) -> Sampler {
        Sampler {
            ticks_per_second,
            page_size,
            seen: Seen::new(),
            at: Instant::now(),
        }
    }

    /// One sample of `terminals` (id, pid; an id may come with several pids,
    /// whose trees add up) among the processes `all`: each one's usage. A
    /// tree seen for the first time gets its CPU from its next sample on (0
    /// until then).
    fn sample(
        &mut self,
        all: &HashMap<u32, Process>,
        terminals: &[(u64, u32)],
    ) -> Vec<(u64, Usage)> {
        let now = Instant::now();
        let elapsed = now.duration_since(self.at).as_secs_f64();
        self.at = now;
        let roots: Vec<u32> = terminals.iter().map(|&(_, pid)| pid).collect();
        let totals = trees(all, &roots);
        let sampled_at = now_rfc3339();
        let mut seen = Seen::new();
        let mut sums: Vec<(u64, f64, Totals)> = Vec::new();
        for &(id, pid) in terminals {
            let Some(tree) = totals.get(&pid) else {
                continue;
            };
            let cpu = match self.seen.get(&(id, pid)) {
                Some(&was_ticks) if elapsed > 0.0 => {
                    tree.ticks.saturating_sub(was_ticks) as f64 / self.ticks_per_second / elapsed
                        * 100.0
                }
                _ => 0.0,
            };
            seen.insert((id, pid), tree.ticks);
            match sums.iter_mut().find(|(seen_id, _, _)| *seen_id == id) {
                Some((_, sum_cpu, sum)) => {
                    *sum_cpu += cpu;
                    sum.resident_pages += tree.resident_pages;
                    sum.processes += tree.processes;
                }
                None => sums.push((id, cpu, *tree)),
            }
        }
        self.seen = seen;
        sums.into_iter()
            .map(|(id, cpu, tree)| {
                (
                    id,
                    Usage {
                        cpu_percent: Tenths::of(cpu),
                        rss_bytes: tree.resident_pages * self.page_size,
                        processes: tree.processes,
                        sampled_at: sampled_at.clone(),
                    },
                )
            })
            .collect()
    }

    /// The CPU time (ms, its processes' and their waited children's) and
    /// resident bytes of each run's process tree (run and pid) among the
    /// processes `all`: a check's so far. A run whose process is gone has none.
    fn runs(&self, all: &HashMap<u32, Process>, runs: &[(u64, u32)]) -> Vec<(u64, (u64, u64))> {
        let roots: Vec<u32> = runs.iter().map(|&(_, pid)| pid).collect();
        let totals = trees(all, &roots);
        runs.iter()
            .filter_map(|&(run, pid)| {
                let tree = totals.get(&pid)?;
                let ms = tree.ticks as f64 * 1000.0 / self.ticks_per_second;
                Some((run, (ms as u64, tree.resident_pages * self.page_size)))
            })
            .collect()
    }
}

/// The usage sampler between two samples: what it saw of this machine's
/// processes and of each SSH host's.
pub(crate) struct Usages {
    here: Sampler,
    hosts: HashMap<String, Sampler>,
}

impl Usages {
    pub(crate) fn new() -> Usages {
        Usages {
            here: Sampler::local(),
            hosts: HashMap::new(),
        }
    }

    /// Samples the terminals once — this machine's, then each SSH host's (at
    /// most `host_limit` each) — and writes their usage into their records;
    /// `None` once the app is gone.
    pub(crate) async fn sample(
        &mut self,
        store: &Weak<Store>,
        hosts: &Weak<HostLinks>,
        host_limit: Duration,
    ) -> Option<()> {
        let live = store.upgrade()?;
        let terminals = live.usage_targets();
        let on_hosts = live.host_usage_targets();
        drop(live);
        if terminals.is_empty() {
            self.here.seen.clear();
        } else {
            let mut here = std::mem::replace(&mut self.here, Sampler::local());
            let (back, usages) = tokio::task::spawn_blocking(move || {
                let usages = here.sample(&processes(), &terminals);
                (here, usages)
            })
            .await
            .ok()?;
            self.here = back;
            store.upgrade()?.set_usage(usages);
        }
        let mut by_host: HashMap<String, Vec<u64>> = HashMap::new();
        for (host, id) in on_hosts {
            by_host.entry(host).or_default().push(id);
        }
        self.hosts.retain(|name, _| by_host.contains_key(name));
        for (name, ids) in by_host {
            let Some(usages) = sample_host(hosts, &name, &ids, &mut self.hosts, host_limit).await
            else {
                continue;
            };
            store.upgrade()?.set_usage(usages);
        }
        Some(())
    }
}

/// One sample of host `name`'s terminals `ids` through its link; `None`
/// when the link is not up (or the host not in tmux, or too slow to answer).
/// What it saw of the checks running there goes to the host
/// ([`crate::hosts::Host::saw_checks`]).
async fn sample_host(
    hosts: &Weak<HostLinks>,
    name: &str,
    ids: &[u64],
    samplers: &mut HashMap<String, Sampler>,
    limit: Duration,
) -> Option<Vec<(u64, Usage)>> {
    let host = hosts.upgrade()?.get(name).ok()?;
    let said = tokio::time::timeout(limit, host.processes_for_usage())
        .await
        .ok()??;
    let sample = parse_host_sample(&said)?;
    let sampler = samplers
        .entry(name.to_owned())
        .or_insert_with(|| Sampler::with(sample.ticks_per_second, sample.page_size));
    sampler.ticks_per_second = sample.ticks_per_second;
    sampler.page_size = sample.page_size;
    if !sample.checks.is_empty() {
        host.saw_checks(&sampler.runs(&sample.processes, &sample.checks));
    }
    let terminals: Vec<(u64, u32)> = sample
        .panes
        .into_iter()
        .filter(|(id, _)| ids.contains(id))
        .collect();
    Some(sampler.sample(&sample.processes, &terminals))
}

/// The CPU time (ms) and resident bytes of the process tree under `pid` on
/// this machine now (a check's usage, sampled while it runs); `None` once
/// it is gone.
pub(crate) fn tree_now(pid: u32) -> Option<(u64, u64)> {
    let sampler = Sampler::local();
    let (_, now) = sampler.runs(&processes(), &[(0, pid)]).pop()?;
    Some(now)
}

/// One sample of the given processes' trees, for `krad-bench usage`: how
/// long a sample of `pids` takes is what the sampler costs the app.
pub fn sample_once(pids: &[u32]) -> usize {
    trees(&processes(), pids).len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_is_read_after_the_name_whatever_it_holds() {
        let line = "4242 (my (odd) prog) S 100 4242 4242 34816 4242 4194304 300 0 0 0 \
                    150 50 7 3 20 0 1 0 123456 10485760 2560 18446744073709551615";
        assert_eq!(
            parse_stat(line),
            Some(Process {
                parent: 100,
                ticks: 150 + 50 + 7 + 3,
                resident_pages: 2560
            })
        );
        assert_eq!(parse_stat("4242 (cut short) S 1"), None);
        assert_eq!(parse_stat("no name at all"), None);
    }

    #[test]
    fn a_host_s_sample_is_read_section_by_section() {
        let said = "100\n4096\n---\n3 4242\n\n7 99\n7 4300 12\n7 4301 x\n---\n\
                    4242 (sh) S 1 1 1 0 1 0 0 0 0 0 10 5 0 0 20 0 1 0 1 100 300\n\
                    4243 (sleep) S 4242 1 1 0 1 0 0 0 0 0 1 1 0 0 20 0 1 0 1 100 200\n\
                    4300 (sh) S 1 1 1 0 1 0 0 0 0 0 30 10 50 10 20 0 1 0 1 100 100\n\
                    4302 (make) S 4300 1 1 0 1 0 0 0 0 0 100 0 0 0 20 0 1 0 1 100 400\n";
        let host = parse_host_sample(said).unwrap();
        assert_eq!((host.ticks_per_second, host.page_size), (100.0, 4096));
        // A check's line counts in its terminal's too; a line that makes no
        // sense is left out.
        assert_eq!(host.panes, [(3, 4242), (7, 99), (7, 4300)]);
        assert_eq!(host.checks, [(12, 4300)]);
        let totals = trees(&host.processes, &[4242]);
        assert_eq!(totals[&4242].processes, 2);
        assert_eq!(totals[&4242].resident_pages, 500);
        // Check run 12 so far: 200 ticks (its waited children's included) at
        // 100 a second, 500 pages.
        let sampler = Sampler::with(host.ticks_per_second, host.page_size);
        assert_eq!(
            sampler.runs(&host.processes, &host.checks),
            [(12, (2000, 500 * 4096))]
        );
        assert!(parse_host_sample("no numbers\n---\n").is_none());
    }

    #[test]
    fn a_tree_sums_its_processes_and_not_its_neighbours() {
        let process = |parent, ticks, resident_pages| Process {
            parent,
            ticks,
            resident_pages,
        };
        let all = HashMap::from([
            (10, process(1, 100, 10)),
            (11, process(10, 20, 5)),
            (12, process(11, 3, 1)),
            (20, process(1, 999, 999)),
        ]);
        let totals = trees(&all, &[10, 20, 30]);
        assert_eq!(
            totals[&10],
            Totals {
                ticks: 123,
                resident_pages: 16,
                processes: 3
            }
        );
        assert_eq!(totals[&20].processes, 1);
        assert!(
            !totals.contains_key(&30),
            "a root that is gone has no totals"
        );
    }

    #[test]
    fn a_busy_process_shows_in_its_terminal_s_cpu() {
        // This test's own process stands for a terminal: a thread of it spins.
        let me = std::process::id();
        let mut sampler = Sampler::local();
        assert_eq!(
            sampler.sample(&processes(), &[(1, me)])[0].1.cpu_percent,
            Tenths(0)
        );
        // Spins until it has had 0.3 s of CPU, however long a loaded machine
        // takes to give it that.
        let cpu_ticks = || {
            let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
            let after = stat.rsplit_once(')').map_or("", |(_, after)| after);
            let fields: Vec<u64> = after
                .split_whitespace()
                .skip(11)
                .take(2)
                .filter_map(|f| f.parse().ok())
                .collect();
            fields.iter().sum::<u64>()
        };
        let (start, until) = (cpu_ticks(), Instant::now() + Duration::from_secs(30));
        let mut spins = 0u64;
        while cpu_ticks() < start + 30 && Instant::now() < until {
            for _ in 0..100_000 {
                spins = spins.wrapping_add(1);
            }
            std::hint::black_box(spins);
        }
        let usage = &sampler.sample(&processes(), &[(1, me)])[0].1;
        assert!(usage.cpu_percent > Tenths(0), "{usage:?}");
        assert!(usage.rss_bytes > 0 && usage.processes >= 1, "{usage:?}");
    }
}
