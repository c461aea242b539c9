//! A real Claude Code lead runs scored variants through the bus (issue 50):
//! it starts three variants of plain programs, waits for their scores with
//! `krad variants wait --scored`, and picks the best with `krad variants pick
//! --best --yes` — its every step a Bash call the model double scripts, each
//! allowed through the bus.

use std::time::{Duration, Instant};

use serde_json::json;

use super::turns::asks;
use super::{Cli, LONG, RealApp, Turn};

/// Manual mode: each Bash call asks, and the test allows it through the bus.
const MANUAL: [&str; 3] = ["claude", "--permission-mode", "default"];

const CHECKS: &str = "[checks]\nparallel = 1\n\
    test = { command = \"v=$(cat verdict); [ \\\"$v\\\" = pass ] || { echo \\\"not $v\\\"; exit 1; }\", timeout_secs = 30 }\n";

/// Variant 1 passes its check, the others fail it.
const VARIANT: &str = "n=${KRAD_ADE_ENVIRONMENT##*-}; if [ $n = 1 ]; then v=pass; else v=fail; fi; \
    echo $v > verdict; echo \"work of $KRAD_ADE_ENVIRONMENT\" > result-$KRAD_ADE_ENVIRONMENT.txt";

fn bash(command: &str) -> Turn {
    Turn::tool("Bash", json!({"command": command, "description": "a step"}))
}

#[test]
fn a_claude_lead_runs_variants_waits_for_their_scores_and_picks_the_best() {
    let bed = RealApp::start_with_config(Cli::Claude, CHECKS);
    std::fs::write(bed.repo.join("README.md"), "hello\n").unwrap();
    crate::support::git(&bed.repo, &["add", "README.md"]);
    crate::support::git(&bed.repo, &["commit", "-q", "-m", "first"]);
    bed.double.script(vec![
        bash(&format!(
            "krad variants run 3 --profile exec --name lead --prompt go -- sh -c '{VARIANT}'"
        )),
        bash("krad variants wait lead --scored --timeout 300"),
        bash("krad variants pick lead --best --yes"),
        Turn::reply("kept the best variant"),
    ]);
    let id = bed.spawn(json!({
        "profile": "claude", "command": MANUAL, "lead": true,
        "prompt": "run the task as three variants and keep the best"
    }));
    // Each Bash call asks; allowed through the bus until the turn is over.
    let until = Instant::now() + LONG * 3;
    loop {
        for ask in asks(&bed) {
            let out = bed
                .app
                .krad(&["answer", ask["ask"].as_str().unwrap(), "allow"]);
            assert_eq!(out.status.code(), Some(0), "{out:?}");
        }
        let record = bed.app.record(id);
        if record["state"] == "idle" && record["message"] == "kept the best variant" {
            break;
        }
        assert!(
            Instant::now() < until,
            "the lead never finished; it shows:\n{}\nthe model got: {:#?}",
            bed.screen(id),
            bed.double.requests().len()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // What the lead's commands printed reached the model: the scores, then the pick.
    let seen: Vec<String> = bed
        .double
        .requests()
        .iter()
        .map(|r| r.to_string())
        .collect();
    let waited = &seen[2];
    assert!(waited.contains("best: variant 1"), "{waited}");
    assert!(waited.contains("test passed"), "{waited}");
    assert!(waited.contains("test failed(1)"), "{waited}");
    let picked = &seen[3];
    assert!(picked.contains("picked variant 1"), "{picked}");
    assert_eq!(
        std::fs::read_to_string(bed.repo.join("result-lead-1.txt")).unwrap(),
        "work of lead-1\n"
    );
    assert!(!bed.repo.join("result-lead-2.txt").exists());
}
