//! Issue 39: the real Claude Code and Codex CLIs run a whole turn, with an
//! ask answered over the bus, inside a sandbox with an allowlist
//! (`network = "allow"`), against the model double: its loopback address
//! (the CLI's base URL) is allowed by default and relayed, the hooks reach
//! the bus, the tool writes in the environment, and the connections to the
//! double show in the terminal's log.

use serde_json::{Value, json};

use super::turns::{asks, until_ask};
use super::{Cli, LONG, RealApp, Turn};

const CONTAINED: &str = "[sandbox]\nprofiles = [\"claude\", \"codex\"]\nnetwork = \"allow\"\n";

/// Runs the turn: the model asks for `tool`, the ask is allowed from the
/// CLI, the file appears, the turn ends with `"made it"`; then the log.
fn a_turn_with_an_ask(cli: Cli, command: &[&str], tool: Turn) {
    let bed = RealApp::start_configured(cli, |_| Some(CONTAINED.into()));
    bed.double.script(vec![tool, Turn::reply("made it")]);
    let profile = match cli {
        Cli::Claude => "claude",
        Cli::Codex => "codex",
    };
    let id = bed.spawn(json!({"profile": profile, "command": command, "prompt": "make a file"}));
    let ask = until_ask(&bed);
    assert_eq!(ask["title"], "Bash: touch contained.txt", "{ask}");
    let out = bed
        .app
        .krad(&["answer", ask["ask"].as_str().unwrap(), "allow"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let idle = bed.app.until(id, LONG, |r| {
        r["state"] == "idle" && r["message"] == "made it"
    });
    assert_eq!(idle["state_source"], "hook", "{idle}");
    assert!(bed.repo.join("contained.txt").exists());
    assert!(asks(&bed).is_empty());
    // It ran contained: the app's state is not there, its HOME is private.
    let sandbox_home = bed.repo.join(".git/krad/sandbox").join(id.to_string());
    assert!(sandbox_home.is_dir(), "{}", sandbox_home.display());

    let answer = bed.app.request(json!({"Connections": {"target": id}}));
    let info = &answer["Connections"];
    assert_eq!(info["network"], "allow", "{answer}");
    let double_port = bed
        .double
        .base_url()
        .rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').parse::<u64>().ok())
        .unwrap();
    let to_double: Vec<&Value> = info["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["port"] == double_port && a["allowed"] == true)
        .collect();
    assert!(!to_double.is_empty(), "no attempt to the double: {answer}");
    assert!(
        to_double.iter().any(|a| a["received"].as_u64() > Some(0)),
        "{answer}"
    );
}

#[test]
fn claude_code_runs_a_turn_with_an_ask_inside_a_sandbox() {
    a_turn_with_an_ask(
        Cli::Claude,
        &["claude", "--permission-mode", "default"],
        Turn::tool(
            "Bash",
            json!({"command": "touch contained.txt", "description": "a step"}),
        ),
    );
}

#[test]
fn codex_runs_a_turn_with_an_ask_inside_a_sandbox() {
    a_turn_with_an_ask(
        Cli::Codex,
        &["codex", "-s", "read-only", "-a", "on-request"],
        Turn::tool(
            "exec_command",
            json!({"cmd": "touch contained.txt", "sandbox_permissions": "require_escalated",
                "justification": "a step"}),
        ),
    );
}
