//! `krad doctor`: what stands between the running app and its agents working
//! as krad promises — the app itself (Hello), agents whose hooks did not run
//! (a Codex that skipped krad's hooks: its approvals are not asks), and SSH
//! hosts whose link is not up. Each problem says what to do next. It also
//! says whether a memory limit per terminal can work here (cgroup v2).
//!
//! Before it asks the app it checks this machine (`local`): the agent CLIs
//! and their versions, tmux, bubblewrap, ssh, cgroup v2, the page's assets,
//! git, the repository's lock and discovery file — a line each, with the fix.

mod local;

use krad_bus::protocol::{AgentRecord, HostStatus, LinkState};
use krad_bus::request::hello::Hello;
use krad_bus::request::hosts::Hosts;
use krad_bus::request::list::List;
use serde::Serialize;

use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::Exit;
use crate::print;
use crate::render;

/// Arguments of `krad doctor`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "First a line per check of this machine (ok, info, warn, PROBLEM; each \
with its fix): the agent CLIs on PATH against the tested versions, tmux, bubblewrap, ssh, \
cgroup v2 delegation, the page's assets, git and its identity, the repository's lock and \
discovery file. Then what the app knows. `warn` and `info` do not change the exit code.\n\n\
Exits 0 when nothing is wrong, 1 when a problem is listed, 7 when the app cannot be \
reached (after the machine's checks).\n\n\
Examples:\n  krad doctor\n  krad doctor --repo ~/src/app\n  \
krad doctor --json | jq -r '.checks[] | select(.level != \"ok\") | .fix'\n  \
krad doctor --json | jq -r '.problems[].problem'"
)]
pub(crate) struct DoctorArgs {}

/// One thing that is wrong, and about what.
#[derive(Debug, Serialize)]
struct Problem {
    /// `agent` or `host`.
    about: &'static str,
    /// The terminal's id, or the host's name.
    which: String,
    /// What is wrong and what to do.
    problem: String,
}

/// What `krad doctor --json` prints.
#[derive(Debug, Serialize)]
struct Report {
    ok: bool,
    endpoint: String,
    api_version: u64,
    build: String,
    agents: usize,
    hosts: usize,
    /// Whether `[limits] memory_max_mib` can work here (Hello's word).
    #[serde(skip_serializing_if = "Option::is_none")]
    memory_limits: Option<String>,
    problems: Vec<Problem>,
    /// The checks of this machine.
    checks: Vec<local::Check>,
}

/// Asks the app what it knows, and prints what is wrong.
pub(crate) fn run(_args: DoctorArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let checks = local::checks(connect.repo.as_deref());
    let app = match AppConnection::find(connect) {
        Ok(app) => app,
        Err(failure) => {
            // The machine's checks still tell what they found.
            if json {
                print::json(&serde_json::json!({"ok": false, "checks": checks}));
            } else {
                print::lines(checks.iter().map(local::Check::line));
            }
            return Err(failure.into());
        }
    };
    let hello = app.send(Hello {}, None)?.answer;
    let agents = app.send(List { environment: None }, None)?.answer;
    let hosts = app.send(Hosts {}, None)?.answer;
    let mut problems: Vec<Problem> = agents.iter().filter_map(agent_problem).collect();
    problems.extend(hosts.iter().filter_map(host_problem));
    let local_problem = checks.iter().any(|c| c.level == local::Level::Problem);
    let report = Report {
        ok: problems.is_empty() && !local_problem,
        endpoint: app.endpoint().to_string(),
        api_version: hello.api_version,
        build: hello.build,
        agents: agents.len(),
        hosts: hosts.len(),
        memory_limits: hello.memory_limits,
        problems,
        checks,
    };
    if json {
        print::json(&serde_json::to_value(&report)?);
    } else {
        print::lines(human(&report));
    }
    Ok(if report.ok {
        Exit::Success
    } else {
        Exit::Failure
    })
}

/// An agent's problem: its hooks did not run.
fn agent_problem(record: &AgentRecord) -> Option<Problem> {
    let problem = record.hook_problem.as_ref()?;
    Some(Problem {
        about: "agent",
        which: record.terminal.to_string(),
        problem: format!(
            "terminal {} ({}): {problem}",
            record.terminal, record.profile
        ),
    })
}

/// A host's problem: its link is down or failed.
fn host_problem(host: &HostStatus) -> Option<Problem> {
    let what = match host.state {
        LinkState::Down => "is down, being re-opened",
        LinkState::Failed => "could not be reached",
        _ => return None,
    };
    let why = host.error.as_deref().unwrap_or("no reason given");
    Some(Problem {
        about: "host",
        which: host.name.clone(),
        problem: format!(
            "host {} ({}) {what}: {why}; `krad hosts check {}` tries again now",
            host.name, host.ssh, host.name
        ),
    })
}

/// The report as lines of text: the app, then each problem.
fn human(report: &Report) -> Vec<String> {
    let mut lines: Vec<String> = report.checks.iter().map(local::Check::line).collect();
    lines.push(format!(
        "ok      app at {} (agents API v{}, build {}): {}, {}",
        report.endpoint,
        report.api_version,
        report.build,
        render::counted(report.agents, "agent"),
        render::counted(report.hosts, "host"),
    ));
    if let Some(memory) = &report.memory_limits {
        lines.push(format!("info    memory limits per terminal: {memory}"));
    }
    if report.problems.is_empty() {
        lines.push("ok      no agent or host has a problem krad can see".to_owned());
    }
    for problem in &report.problems {
        lines.push(format!("PROBLEM {}", problem.problem));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_agent_whose_hooks_did_not_run_is_a_problem_with_what_to_do() {
        let mut record: AgentRecord = serde_json::from_value(json!({
            "terminal": 5, "environment": "main", "name": null, "profile": "codex",
            "command": ["codex"], "lead": false, "parent": null, "group": null,
            "variant": null, "state": "asking", "state_source": "hook", "message": null,
            "exit_code": null, "signal": null, "pid": 1, "title": null,
            "started_at": "", "state_since": "", "rev": 1
        }))
        .unwrap();
        assert!(agent_problem(&record).is_none());
        record.hook_problem = Some("Codex skipped krad's hooks; answer in its terminal".into());
        let problem = agent_problem(&record).unwrap();
        assert_eq!(problem.which, "5");
        let report = Report {
            ok: false,
            endpoint: "127.0.0.1:1".into(),
            api_version: 1,
            build: "0.1.0".into(),
            agents: 1,
            hosts: 0,
            memory_limits: None,
            problems: vec![problem],
            checks: Vec::new(),
        };
        let lines = human(&report);
        assert_eq!(
            lines[1],
            "PROBLEM terminal 5 (codex): Codex skipped krad's hooks; answer in its terminal"
        );
    }
}
