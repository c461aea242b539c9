//! `krad doctor`: what stands between the running app and its agents working
//! as krad promises — the app itself (Hello), agents whose hooks did not run
//! (a Codex that skipped krad's hooks: its approvals are not asks), and SSH
//! hosts whose link is not up. Each problem says what to do next. It also
//! says whether a memory limit per terminal can work here (cgroup v2).

use krad_bus::protocol::{AgentRecord, HostStatus, LinkState};
use krad_bus::request::hello::Hello;
use krad_bus::request::hosts::Hosts;
use krad_bus::request::list::List;
use serde::Serialize;

use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::Exit;
use crate::print;

/// Arguments of `krad doctor`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exits 0 when nothing is wrong, 1 when a problem is listed, 7 when \
the app cannot be reached.\n\n\
Examples:\n  krad doctor\n  krad doctor --json | jq -r '.problems[].problem'"
)]
pub struct DoctorArgs {}

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
}

/// Asks the app what it knows, and prints what is wrong.
pub fn run(_args: DoctorArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let app = AppConnection::find(connect)?;
    let hello = app.send(Hello {}, None)?.answer;
    let agents = app.send(List { environment: None }, None)?.answer;
    let hosts = app.send(Hosts {}, None)?.answer;
    let mut problems: Vec<Problem> = agents.iter().filter_map(agent_problem).collect();
    problems.extend(hosts.iter().filter_map(host_problem));
    let report = Report {
        ok: problems.is_empty(),
        endpoint: app.endpoint().to_string(),
        api_version: hello.api_version,
        build: hello.build,
        agents: agents.len(),
        hosts: hosts.len(),
        memory_limits: hello.memory_limits,
        problems,
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
    let mut lines = vec![format!(
        "ok      app at {} (agents API v{}, build {}): {} agents, {} hosts",
        report.endpoint, report.api_version, report.build, report.agents, report.hosts
    )];
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
        };
        let lines = human(&report);
        assert_eq!(
            lines[1],
            "PROBLEM terminal 5 (codex): Codex skipped krad's hooks; answer in its terminal"
        );
    }
}
