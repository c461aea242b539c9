//! How one check runs: `sh -c COMMAND` in its variant's worktree, here or on
//! its SSH host (through the host's link), in a sandbox like its agent's when
//! that one runs contained; its processes sampled while it runs (here on their
//! own, on a host by the host's usage sample); and what its result says — the
//! outcome, the exit code, the tail of its output, its CPU time and memory.
//! The line, the records and the scoreboard are the parent's. Like it, this
//! never imports the `Core`, `requests/`, spawning, the queue or the watcher.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use krad_bus::protocol::{ApiError, CheckOutcome, CheckResultInfo};

use super::{Agent, Checks, SAMPLE_EVERY};
use crate::config::CheckSpec;
use crate::store::now_rfc3339;

/// How many of a check's last output lines are kept.
const TAIL_LINES: usize = 20;

/// The longest output line kept (longer ones are cut).
const TAIL_LINE_CHARS: usize = 400;

impl Checks {
    /// How a check runs in `environment`, here: `sh -c COMMAND`, in a
    /// sandbox like that of its variant's `agent` when it runs contained (its
    /// private home `home`, made anew); its pid noted in `pid` for its usage.
    fn here(
        &self,
        environment: &str,
        spec: &CheckSpec,
        (agent, home): (Agent, &std::path::Path),
        pid: &Arc<AtomicU32>,
    ) -> Result<(Vec<String>, crate::program::Extra), ApiError> {
        let mut argv = vec!["sh".to_owned(), "-c".to_owned(), spec.command.clone()];
        if agent.contained {
            let cwd = self.shared.environments.path(environment)?;
            argv = crate::sandbox::wrap_check(
                &self.shared.sandbox,
                (agent.terminal, &cwd),
                home,
                argv,
            )?;
        }
        let extra = crate::program::Extra {
            stdin: None,
            timeout: spec.timeout,
            env: vec![("KRAD_CHECK".to_owned(), spec.name.clone())],
            pid: Some(pid.clone()),
            host: crate::program::OnHost::default(),
        };
        Ok((argv, extra))
    }

    /// How a check (the `n`th run) runs in `environment` on SSH host `host`:
    /// `sh -c COMMAND` (`KRAD_CHECK` set), in a sandbox like that of its
    /// variant's `agent` there when it runs contained (its private home made
    /// and removed there), its pid noted there for its usage.
    async fn on_host(
        &self,
        (environment, host): (&str, &Arc<crate::hosts::Host>),
        spec: &CheckSpec,
        agent: Agent,
        n: u64,
    ) -> Result<(Vec<String>, crate::program::Extra), ApiError> {
        host.connect().await?;
        let script = format!(
            "KRAD_CHECK={}; export KRAD_CHECK; {}",
            crate::profile::shell_quote(&spec.name),
            spec.command
        );
        let argv = vec!["sh".to_owned(), "-c".to_owned(), script];
        let mut on = crate::program::OnHost {
            pid_file: agent.terminal.and_then(|id| host.check_pid_file(id, n)),
            ..Default::default()
        };
        if agent.contained {
            let cwd = self.shared.environments.path(environment)?;
            let (lines, home) = crate::sandbox::host::check_preamble(
                &self.shared.sandbox,
                host,
                (agent.terminal, &cwd.display().to_string()),
                n,
            )
            .await?;
            on.sandbox = Some(lines);
            on.remove.push(home);
        }
        let extra = crate::program::Extra {
            stdin: None,
            timeout: spec.timeout,
            env: Vec::new(),
            pid: None,
            host: on,
        };
        Ok((argv, extra))
    }

    /// Runs a check's command in `environment`, sampling its processes.
    pub(super) async fn run_check(
        &self,
        environment: &str,
        spec: &CheckSpec,
        mut result: CheckResultInfo,
        agent: Agent,
    ) -> CheckResultInfo {
        let n = self.shared.runs.fetch_add(1, Ordering::Relaxed);
        let pid = Arc::new(AtomicU32::new(0));
        // Here, a contained variant's check has its private home here.
        let home = crate::sandbox::check_home(&self.shared.sandbox, agent.terminal, n);
        let (host, how) = match self.shared.environments.host_of(environment) {
            Ok(None) => (None, self.here(environment, spec, (agent, &home), &pid)),
            Ok(Some(host)) => {
                let how = self.on_host((environment, &host), spec, agent, n).await;
                (Some(host), how)
            }
            Err(e) => (None, Err(e)),
        };
        // On a host, the most its usage sampler saw the run use, taken from
        // the host (which then forgets the run).
        let take_seen_on_host = || host.as_ref().and_then(|host| host.check_usage(n));
        let (command, extra) = match how {
            Ok(how) => how,
            Err(e) => {
                // Nothing ran.
                take_seen_on_host();
                result.outcome = CheckOutcome::Error;
                result.ran_at = Some(now_rfc3339());
                result.tail = vec![e.message];
                return result;
            }
        };
        // Counted here only when it runs here (a host's are sampled there).
        let terminal = agent.terminal.filter(|_| extra.pid.is_some());
        let started = Instant::now();
        let run = crate::program::run_in(&self.shared.environments, environment, &command, extra);
        tokio::pin!(run);
        let (mut cpu_ms, mut max_rss) = (None::<u64>, None::<u64>);
        // Counted in the variant's agent's usage while it runs.
        let mut counted = None;
        let done = loop {
            tokio::select! {
                done = &mut run => break done,
                () = tokio::time::sleep(SAMPLE_EVERY) => {
                    let pid = pid.load(Ordering::Relaxed);
                    if pid == 0 {
                        continue;
                    }
                    if let (Some(id), None) = (terminal, counted) {
                        self.shared.store.sample_also(id, pid);
                        counted = Some((id, pid));
                    }
                    if let Some((ms, rss)) = crate::usage::tree_now(pid) {
                        cpu_ms = Some(cpu_ms.unwrap_or(0).max(ms));
                        max_rss = Some(max_rss.unwrap_or(0).max(rss));
                    }
                }
            }
        };
        if let Some((id, pid)) = counted {
            self.shared.store.stop_sampling_also(id, pid);
        }
        if home.exists() {
            let _ = std::fs::remove_dir_all(&home);
            // Its folder too, once no other run of the variant's is in it.
            if let Some(folder) = home.parent() {
                let _ = std::fs::remove_dir(folder);
            }
        }
        let elapsed = started.elapsed();
        if let Some((ms, rss)) = take_seen_on_host() {
            (cpu_ms, max_rss) = (Some(ms), Some(rss));
        }
        result.cpu_ms = cpu_ms;
        result.max_rss_bytes = max_rss;
        result.ran_at = Some(now_rfc3339());
        match done {
            Err(e) => {
                result.outcome = CheckOutcome::Error;
                result.duration_ms = Some(millis(elapsed));
                result.tail = vec![e.message];
            }
            Ok(ran) => {
                result.exit_code = ran.exit_code;
                result.duration_ms = Some(ran.duration_ms);
                let timed_out = ran.exit_code.is_none()
                    && ran.signal == Some(9)
                    && Duration::from_millis(ran.duration_ms) + Duration::from_millis(50)
                        >= spec.timeout;
                result.outcome = match ran.exit_code {
                    Some(0) => CheckOutcome::Passed,
                    _ if timed_out => CheckOutcome::TimedOut,
                    _ => CheckOutcome::Failed,
                };
                result.tail = tail(&ran.stdout, &ran.stderr);
            }
        }
        result
    }
}

/// The number of this app's first check run: now, in milliseconds since 1970.
pub(super) fn first_run() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(millis)
        .unwrap_or_default()
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The last [`TAIL_LINES`] lines of the output: stdout's, then stderr's.
fn tail(stdout: &str, stderr: &str) -> Vec<String> {
    let lines: Vec<&str> = stdout.lines().chain(stderr.lines()).collect();
    let from = lines.len().saturating_sub(TAIL_LINES);
    lines[from..]
        .iter()
        .map(|line| line.chars().take(TAIL_LINE_CHARS).collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_is_the_last_lines_stdout_first() {
        let out: String = (1..=30).map(|n| format!("line {n}\n")).collect();
        let lines = tail(&out, "err\n");
        assert_eq!(lines.len(), TAIL_LINES);
        assert_eq!(lines.last().map(String::as_str), Some("err"));
        assert_eq!(lines[0], "line 12");
        assert_eq!(tail("", ""), Vec::<String>::new());
    }
}
