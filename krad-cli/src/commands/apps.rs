//! `krad apps`: every app running on this machine for this user — its
//! repository, bus, pid, agents (and how many are asking) and page — from the
//! per-user list of running apps; entries of apps that are gone are removed
//! on the way. Each app is asked for its agents (List) with the client token
//! of its repository's discovery file.

use std::path::PathBuf;
use std::time::Duration;

use krad_bus::api_json;
use krad_bus::client::Client;
use krad_bus::protocol::{AgentState, Caller};
use krad_bus::request::list::List;
use serde::Serialize;
use serde_json::json;

use crate::apps::{discovery, registry};
use crate::exit::Exit;
use crate::print;
use crate::render::{self, Column};

/// Arguments of `krad apps`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
One app serves a repository; `krad` in a folder of that repository (or with --repo PATH) \
reaches it. `(default)` after a repository (`default` in --json) marks the app api.json \
names: the one reached from outside any repository. AGENTS and ASKING are `?` when the app did not answer within two seconds.

Examples:
  krad apps
  krad apps --json | jq -r '.Apps[] | select(.asking > 0) | .root'")]
pub(crate) struct AppsArgs {}

/// One running app, as `krad apps` shows it.
#[derive(Debug, Serialize)]
struct Shown {
    root: PathBuf,
    git_dir: PathBuf,
    endpoint: String,
    pid: u32,
    /// Agents the app hosts; `None` when it did not answer.
    agents: Option<usize>,
    /// Of those, how many are asking.
    asking: Option<usize>,
    ui: Option<String>,
    build: String,
    started_at: String,
    /// Whether api.json names it (a plain client outside a repository reaches it).
    default: bool,
}

const COLUMNS: [Column; 6] = [
    Column::new("REPOSITORY", 10, usize::MAX),
    Column::new("ENDPOINT", 8, 21),
    Column::new("PID", 3, 8),
    Column::new("AGENTS", 6, 6),
    Column::new("ASKING", 6, 6),
    Column::new("PAGE", 4, 40),
];

/// Lists the running apps.
pub(crate) fn run(_args: AppsArgs, json: bool) -> anyhow::Result<Exit> {
    let default_pid = api_json::default_path()
        .ok()
        .and_then(|path| api_json::read(&path).ok())
        .map(|found| found.pid);
    let shown: Vec<Shown> = live_with_agents()
        .into_iter()
        .map(|(entry, counted)| {
            let (agents, asking) = counted.unzip();
            Shown {
                default: default_pid == Some(entry.pid),
                root: entry.root,
                git_dir: entry.git_dir,
                endpoint: entry.endpoint,
                pid: entry.pid,
                agents,
                asking,
                ui: entry.ui,
                build: entry.build,
                started_at: entry.started_at,
            }
        })
        .collect();
    if json {
        print::json(&json!({ "Apps": shown }));
    } else {
        print::lines(table(&shown, render::terminal_width()));
    }
    Ok(Exit::Success)
}

/// The apps running on this machine, each with its agents and how many of
/// them are asking (`agents_of`). The apps are asked all at once, so that one
/// that does not answer costs its two seconds once, not once per app after it.
pub(crate) fn live_with_agents() -> Vec<(registry::Entry, Option<(usize, usize)>)> {
    with_agents(registry::live())
}

/// How many agents are asking in the running apps but the one whose bus is
/// `here` (the home screen's header).
pub(crate) fn asking_elsewhere(here: &str) -> usize {
    let others = registry::live()
        .into_iter()
        .filter(|entry| entry.endpoint != here)
        .collect();
    with_agents(others)
        .into_iter()
        .filter_map(|(_, counted)| counted.map(|(_, asking)| asking))
        .sum()
}

/// Each of `entries` with its agents and how many of them are asking, asked
/// all at once.
fn with_agents(entries: Vec<registry::Entry>) -> Vec<(registry::Entry, Option<(usize, usize)>)> {
    let counts: Vec<Option<(usize, usize)>> = std::thread::scope(|scope| {
        let asked: Vec<_> = entries
            .iter()
            .map(|entry| scope.spawn(move || agents_of(entry)))
            .collect();
        asked
            .into_iter()
            .map(|asking| asking.join().ok().flatten())
            .collect()
    });
    entries.into_iter().zip(counts).collect()
}

/// How many agents the app hosts and how many of them are asking, if it
/// answers List in time.
fn agents_of(entry: &registry::Entry) -> Option<(usize, usize)> {
    let found = discovery::live(&entry.git_dir).filter(|f| f.pid == entry.pid)?;
    let client = Client::new(&found.endpoint, found.token, Caller::Client).ok()?;
    let answered = client
        .call_within(List { environment: None }, Duration::from_secs(2))
        .ok()?;
    let agents = answered.answer.ok()?;
    let asking = agents
        .iter()
        .filter(|a| a.state == AgentState::Asking)
        .count();
    Some((agents.len(), asking))
}

/// The table, or a line saying no app runs.
fn table(shown: &[Shown], width: usize) -> Vec<String> {
    if shown.is_empty() {
        return vec!["no app is running (start one with `krad serve` in a repository)".to_owned()];
    }
    let count = |n: Option<usize>| n.map_or_else(|| "?".to_owned(), |n| n.to_string());
    let rows: Vec<Vec<String>> = shown
        .iter()
        .map(|app| {
            let mut root = app.root.display().to_string();
            if app.default {
                root.push_str(" (default)");
            }
            vec![
                root,
                app.endpoint.clone(),
                app.pid.to_string(),
                count(app.agents),
                count(app.asking),
                app.ui.clone().unwrap_or_else(|| "-".to_owned()),
            ]
        })
        .collect();
    render::table(&COLUMNS, &rows, width)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_per_app_and_a_line_for_none() {
        let app = Shown {
            root: "/src/app".into(),
            git_dir: "/src/app/.git".into(),
            endpoint: "127.0.0.1:41234".into(),
            pid: 48211,
            agents: Some(3),
            asking: None,
            ui: Some("http://127.0.0.1:41235/".into()),
            build: "0.1.0".into(),
            started_at: String::new(),
            default: true,
        };
        let lines = table(&[app], 120);
        assert!(lines[0].starts_with("REPOSITORY"), "{lines:#?}");
        assert!(
            lines[1].contains("/src/app (default)")
                && lines[1].contains("48211")
                && lines[1].contains(" 3 ")
                && lines[1].contains('?'),
            "{lines:#?}"
        );
        assert!(table(&[], 80)[0].starts_with("no app is running"));
    }
}
