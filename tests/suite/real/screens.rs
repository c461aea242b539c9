//! Screens that ask the user something no hook tells — Claude Code without a
//! login, Codex in a folder it does not trust yet or without a login — are
//! `asking` with what to do, and a prompt is never typed into them.

use serde_json::json;

use super::{Cli, LONG, RealApp};

fn asking_with(bed: &RealApp, id: u64, message: &str) {
    let record = bed.app.until(id, LONG, |r| r["state"] == "asking");
    assert_eq!(record["message"], message, "{record}");
    assert_eq!(record["state_source"], "screen");
}

#[test]
fn claude_code_not_logged_in_needs_you_to_log_in() {
    let bed = RealApp::start(Cli::Claude);
    // 2.1.197 says so at startup, 2.1.332 once it gets a prompt.
    let id = bed.spawn(json!({"profile": "claude", "prompt": "hello",
        "env": {"ANTHROPIC_API_KEY": ""}}));
    asking_with(&bed, id, "needs you: log in");
}

#[test]
fn codex_in_a_folder_it_does_not_trust_needs_you_to_trust_it() {
    let bed = RealApp::start(Cli::Codex);
    let config = bed.home.join(".codex/config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    let trusted = text.find("[projects.").unwrap();
    std::fs::write(&config, &text[..trusted]).unwrap();
    bed.double.script(vec![super::Turn::reply("trusted, done")]);
    let id = bed.spawn(json!({"profile": "codex", "prompt": "the task"}));
    asking_with(&bed, id, "needs you: trust this folder");
    assert!(bed.double.requests().is_empty());
    // "1. Trust and continue": then the task runs.
    super::turns::answer_dialog(&bed, id, &["Enter"], |r| r["state"] != "asking");
    bed.double.wait_for_user_text("the task", LONG);
    bed.app.until(id, LONG, |r| r["message"] == "trusted, done");
}

#[test]
fn codex_without_a_login_needs_you_to_log_in() {
    let bed = RealApp::start(Cli::Codex);
    let config = bed.home.join(".codex/config.toml");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("model_provider = \"double\"\n", "");
    std::fs::write(&config, text).unwrap();
    let id = bed.spawn(json!({"profile": "codex"}));
    asking_with(&bed, id, "needs you: log in");
}
