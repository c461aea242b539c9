//! The test bed end to end: each real CLI, spawned through the bus, sends the
//! prompt to the model double and shows its reply, the record ends `idle` by the
//! agent's own hook, and the CLI kept its state under the test's HOME.

use serde_json::json;

use super::{Cli, LONG, RealApp, Turn, last_user_text};

fn hello(cli: Cli, profile: &str, state_dir: &str) {
    let bed = RealApp::start(cli);
    bed.double
        .script(vec![Turn::reply("Hello from the double")]);
    let id = bed.spawn(json!({"profile": profile, "prompt": "say hello"}));
    bed.double.wait_for_user_text("say hello", LONG);
    bed.until_screen(id, "Hello from the double");
    let record = bed.app.until(id, LONG, |r| r["state"] == "idle");
    assert_eq!(record["state_source"], "hook", "{record}");
    // One main request; the title requests were answered aside.
    let requests = bed.double.requests();
    assert_eq!(requests.len(), 1, "{:#?}", bed.double.all_requests());
    assert!(last_user_text(&requests[0]).contains("say hello"));
    assert!(
        bed.home.join(state_dir).is_dir(),
        "{state_dir} not under the test's HOME"
    );
    assert!(bed.repo.join(".git").is_dir());
}

#[test]
fn claude_code_says_hello_through_the_double() {
    hello(Cli::Claude, "claude", ".claude/projects");
}

#[test]
fn codex_says_hello_through_the_double() {
    hello(Cli::Codex, "codex", ".codex/sessions");
}
