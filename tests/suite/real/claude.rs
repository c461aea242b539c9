//! The real Claude Code in krad terminals, against the model double:
//! the state timeline of every turn, permissions through the bus and in its own
//! terminal, API errors, a spawn without a prompt, a resume, prompts that look
//! like subcommands, and sends that always submit.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::timeline::Timeline;
use super::turns::SUBCOMMAND_LOOKING;
use super::turns::{
    asks, expect_turn, idle_then_remembering, resumed_remembers, sends_then_a_slow_turn, until_ask,
    until_no_ask,
};
use super::{Cli, LONG, RealApp, Turn};

/// Claude Code in manual mode, which asks before a tool call (2.1.332 starts in
/// auto mode by default, which asks for nothing the tests do).
const MANUAL: [&str; 3] = ["claude", "--permission-mode", "default"];

fn bash(command: &str) -> Turn {
    Turn::tool("Bash", json!({"command": command, "description": "a step"}))
}

#[test]
fn turns_sends_a_slow_turn_and_an_api_error_show_true_states() {
    let bed = RealApp::start(Cli::Claude);
    bed.double.script(vec![Turn::reply("first reply")]);
    let spawned_at = Instant::now();
    // `update` as an argument would run `claude update`: it must reach the model.
    let id = bed.spawn(json!({"profile": "claude", "prompt": "update"}));
    let timeline = Timeline::follow(&bed.app, id);
    assert_eq!(bed.app.record(id)["command"], json!(["claude"]));
    let first = expect_turn(&bed, &timeline, id, 1, spawned_at, "update");
    assert_eq!(first.idle.1["message"], "first reply");
    assert_eq!(first.idle.1["state_source"], "hook");
    // Twenty sends (KRAD_REAL_SENDS), each its own turn: submitted, none
    // glued; then a slow turn, working all along. Each idle says the reply.
    let sends = super::sends();
    sends_then_a_slow_turn(&bed, &timeline, id, ("claude", &first), |seen, text| {
        assert_eq!(seen.idle.1["message"], text);
    });
    // An API error ends the turn: idle, with the error. (2.1.332 sends a request
    // that got a 400 again, whatever `x-should-retry` says — 3 to 4 times in
    // these runs, at once: every one fails.)
    bed.double
        .script(vec![Turn::error(400, "the double says no"); 8]);
    let sent_at = Instant::now();
    bed.app
        .request(json!({"Send": {"target": id, "text": "fail now", "enter": true}}));
    bed.answered(id, sends + 3);
    let (working_at, _) = timeline.first_after(sent_at, LONG, |r| r["state"] == "working");
    let (at, idle) = timeline.first_after(working_at, LONG, |r| r["state"] == "idle");
    let failed = bed.double.requests().len();
    let (_, answered) = bed.answered(id, failed);
    timeline.assert_within_bound(at, answered);
    assert!(
        idle["message"].as_str().unwrap().starts_with("error"),
        "{idle}"
    );
    // Exactly the prompts sent, in order: none lost, none glued.
    let requests = bed.double.requests();
    let texts: Vec<String> = requests.iter().map(super::last_user_text).collect();
    assert!(texts.len() >= sends + 3, "{texts:#?}");
    assert!(
        texts[sends + 2..].iter().all(|t| t.contains("fail now")),
        "only the failed request again: {texts:#?}"
    );
    for (i, text) in texts.iter().enumerate().skip(1).take(sends) {
        assert!(text.contains(&format!("prompt number {}", i + 1)), "{text}");
        assert!(!text.contains("prompt number 1 "), "glued: {text}");
    }
}

#[test]
fn permissions_through_the_bus_allow_deny_and_always_allow() {
    let bed = RealApp::start(Cli::Claude);
    bed.double
        .script(vec![bash("touch allowed.txt"), Turn::reply("made it")]);
    let id = bed.spawn(json!({"profile": "claude", "command": MANUAL, "prompt": "make a file"}));
    let timeline = Timeline::follow(&bed.app, id);
    let ask = until_ask(&bed);
    let (asked, _) = bed.double.wait_answered(1, LONG);
    let asking = timeline.shown_within_bound(asked, |r| r["state"] == "asking");
    assert_eq!(asking["message"], "Bash: touch allowed.txt");
    assert_eq!(ask["title"], "Bash: touch allowed.txt");
    let out = bed
        .app
        .krad(&["answer", ask["ask"].as_str().unwrap(), "allow"]);
    assert_eq!(out.status.code(), Some(0));
    let idle = timeline
        .first_after(asked, LONG, |r| r["state"] == "idle")
        .1;
    assert_eq!(idle["message"], "made it");
    assert!(bed.repo.join("allowed.txt").exists());

    // Deny: the tool does not run; the model hears why and the turn ends.
    bed.double
        .script(vec![bash("touch denied.txt"), Turn::reply("fine, I won't")]);
    bed.app
        .request(json!({"Send": {"target": id, "text": "make another", "enter": true}}));
    let ask = until_ask(&bed);
    let asking = bed.app.until(id, LONG, |r| r["state"] == "asking");
    assert_eq!(asking["message"], "Bash: touch denied.txt");
    let out = bed
        .app
        .krad(&["answer", ask["ask"].as_str().unwrap(), "deny"]);
    assert_eq!(out.status.code(), Some(0));
    let working = bed.app.until(id, LONG, |r| r["state"] != "asking");
    assert_ne!(
        working["message"], "Bash: touch denied.txt",
        "no leftover question"
    );
    let idle = bed.app.until(id, LONG, |r| {
        r["state"] == "idle" && r["message"] == "fine, I won't"
    });
    assert_eq!(idle["state_source"], "hook");
    assert!(!bed.repo.join("denied.txt").exists());
    let denied_result = bed.double.requests()[3].to_string();
    assert!(
        denied_result.contains("Denied by the user"),
        "{denied_result}"
    );

    // Always allow: exactly the rule Claude suggested, named on the card; it
    // covers that command and no other.
    bed.double.script(vec![
        bash("make build"),
        Turn::reply("built once"),
        bash("make build again"),
        Turn::reply("built twice"),
        bash("make clean"),
        Turn::reply("cleaned"),
    ]);
    bed.app
        .request(json!({"Send": {"target": id, "text": "build it", "enter": true}}));
    let ask = until_ask(&bed);
    let always = ask["options"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "allow-always")
        .cloned()
        .unwrap_or_else(|| panic!("no allow-always on {ask}"));
    assert_eq!(always["label"], "Always allow Bash(make build *)");
    bed.app
        .krad(&["answer", ask["ask"].as_str().unwrap(), "allow-always"]);
    bed.app.until(id, LONG, |r| r["message"] == "built once");
    bed.app
        .request(json!({"Send": {"target": id, "text": "build again", "enter": true}}));
    bed.app.until(id, LONG, |r| r["message"] == "built twice");
    assert!(
        asks(&bed).is_empty(),
        "the kept rule covered `make build again`"
    );
    bed.app
        .request(json!({"Send": {"target": id, "text": "clean", "enter": true}}));
    let ask = until_ask(&bed);
    assert_eq!(
        ask["title"], "Bash: make clean",
        "a rule for one command only"
    );
}

#[test]
fn permissions_answered_in_its_own_terminal_with_keys() {
    let bed = RealApp::start(Cli::Claude);
    bed.double
        .script(vec![bash("touch yes.txt"), Turn::reply("done with yes")]);
    let id = bed.spawn(json!({"profile": "claude", "command": MANUAL, "prompt": "make a file"}));
    until_ask(&bed);
    bed.until_screen(id, "Do you want to proceed?");
    // "1": Yes, in Claude Code's own dialog. The bus ask is moot at once.
    // (2.1.332 drops keys that come the instant its dialog opens.)
    super::turns::answer_dialog(&bed, id, &["1"], |_| asks(&bed).is_empty());
    until_no_ask(&bed);
    let idle = bed.app.until(id, LONG, |r| r["state"] == "idle");
    assert_eq!(idle["message"], "done with yes");
    assert!(bed.repo.join("yes.txt").exists());

    // "No" (3 in 2.1.197, 4 in 2.1.332). Claude Code says nothing then; its
    // screen does.
    bed.double.script(vec![bash("touch no.txt")]);
    bed.app
        .request(json!({"Send": {"target": id, "text": "make another", "enter": true}}));
    until_ask(&bed);
    bed.until_screen(id, "Do you want to proceed?");
    let asking = bed.app.record(id);
    assert_eq!(asking["state"], "asking");
    assert_eq!(asking["message"], "Bash: touch no.txt");
    let screen = bed.until_screen(id, ". No");
    let no = option_key(&screen, "No").unwrap_or_else(|| panic!("no \"No\" in {screen}"));
    super::turns::answer_dialog(&bed, id, &[no.as_str()], |_| asks(&bed).is_empty());
    until_no_ask(&bed);
    let idle = bed.app.until(id, LONG, |r| r["state"] == "idle");
    assert!(
        idle["message"].as_str().unwrap().starts_with("declined"),
        "{idle}"
    );
    assert!(!bed.repo.join("no.txt").exists());
}

/// Regression (issue 36): a lead's Claude that runs subagents must not flicker
/// idle between them. Claude Code 2.1.332 runs a subagent in the background: its
/// main turn stops (`Stop` with the subagent in `background_tasks`) and a new
/// turn starts when the subagent is done. (2.1.197 runs it in the foreground.)
#[test]
fn a_subagent_keeps_it_working_until_the_turn_that_reads_its_report_ends() {
    let bed = RealApp::start(Cli::Claude);
    let replies = ["first words", "second words", "all done"];
    // The main turn's request comes first and is answered slowly: the subagent
    // is done before that turn stops, so its Stop names no background work
    // (the harder case; the other is a unit test's).
    let mut script = vec![
        Turn::tool(
            "Agent",
            json!({"description": "check a thing", "prompt": "SUBTASK check the thing",
                   "subagent_type": "general-purpose"}),
        ),
        Turn::Slow {
            text: replies[0].into(),
            secs: 2,
        },
    ];
    script.extend(replies[1..].iter().map(|r| Turn::reply(*r)));
    bed.double.script(script);
    let spawned_at = Instant::now();
    // Manual mode: 2.1.332's auto mode would ask its server-side check about
    // the subagent, which the double does not serve.
    let id = bed.spawn(json!({"profile": "claude", "command": MANUAL, "prompt": "use a subagent"}));
    let timeline = Timeline::follow(&bed.app, id);
    let (working_at, _) = timeline.first_after(spawned_at, LONG, |r| r["state"] == "working");
    // Settled: idle, and no request to the model for 2 s.
    let until = Instant::now() + LONG;
    let mut seen = 0;
    loop {
        std::thread::sleep(Duration::from_secs(2));
        let n = bed.double.requests().len();
        if n == seen && n >= 3 && bed.app.record(id)["state"] == "idle" {
            break;
        }
        seen = n;
        assert!(
            Instant::now() < until,
            "never settled: {}",
            timeline.describe()
        );
    }
    let n = bed.double.requests().len();
    let (_, answered) = bed.answered(id, n);
    let during = timeline.between(working_at, Instant::now());
    let first_idle = during.iter().position(|s| s.starts_with("idle")).unwrap();
    let (before, after) = during.split_at(first_idle);
    assert!(
        before
            .iter()
            .all(|s| s.starts_with("working") || s.starts_with("asking")),
        "{during:#?}"
    );
    let done = format!("idle (hook) {}", replies[n - 2]);
    assert!(
        after.iter().all(|s| *s == done),
        "idle before the turn that read the subagent's report: {during:#?}"
    );
    timeline.shown_within_bound(answered, |r| r["state"] == "idle");
}

/// The number of the dialog's option that reads `label` (`❯ 4. No` → `4`).
fn option_key(screen: &str, label: &str) -> Option<String> {
    screen.lines().find_map(|line| {
        let line = line.trim_start().trim_start_matches('❯').trim();
        let (number, rest) = line.split_once(". ")?;
        (rest.trim() == label && number.chars().all(|c| c.is_ascii_digit()))
            .then(|| number.to_owned())
    })
}

#[test]
fn without_a_prompt_it_is_idle_and_a_resumed_session_too() {
    let bed = RealApp::start(Cli::Claude);
    let (id, _, seen) = idle_then_remembering(&bed, json!({"profile": "claude"}), "❯");
    assert_eq!(seen.idle.1["message"], "remembered");
    // Its session, from Claude Code's own files under the test's HOME.
    let session = session_id(&bed, "remember this");
    let resumed = json!({"profile": "claude", "command": ["claude", "--resume", session]});
    let idle = resumed_remembers(&bed, id, resumed);
    assert_eq!(idle["state_source"], "hook", "{idle}");
}

/// The id of the session Claude Code keeps under the test's HOME with `prompt`
/// in it (its transcript is `<id>.jsonl`).
/// (Claude Code writes it a moment after the turn: waited for.)
fn session_id(bed: &RealApp, prompt: &str) -> String {
    let projects = bed.home.join(".claude/projects");
    let until = Instant::now() + LONG;
    loop {
        for dir in std::fs::read_dir(&projects).into_iter().flatten().flatten() {
            for file in std::fs::read_dir(dir.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                let name = file.file_name().to_string_lossy().into_owned();
                let text = std::fs::read_to_string(file.path()).unwrap_or_default();
                if let Some(id) = name.strip_suffix(".jsonl")
                    && text.contains(prompt)
                {
                    return id.to_owned();
                }
            }
        }
        assert!(
            Instant::now() < until,
            "no session with {prompt:?} under {}",
            projects.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn prompts_that_look_like_subcommands_or_flags_reach_the_model() {
    let bed = RealApp::start(Cli::Claude);
    let ids = super::turns::spawn_with_prompts(&bed, "claude", &SUBCOMMAND_LOOKING);
    // Several lines arrive whole, as one prompt.
    let id = bed.spawn(json!({"profile": "claude", "prompt": "first line\nsecond line"}));
    bed.double
        .wait_for_user_text("first line\nsecond line", LONG);
    bed.app.until(id, LONG, |r| r["state"] == "idle");
    for id in ids {
        let record = bed.app.until(id, LONG, |r| r["state"] == "idle");
        assert_eq!(record["command"], json!(["claude"]));
        assert_eq!(record["exit_code"], Value::Null, "still running: {record}");
    }
}

#[test]
fn a_folder_not_trusted_yet_is_asking_and_gets_no_prompt_typed_into_the_dialog() {
    let bed = RealApp::start(Cli::Claude);
    // Forget the trust the bed gave the repository.
    let config = bed.home.join(".claude.json");
    let mut settings: Value = serde_json::from_slice(&std::fs::read(&config).unwrap()).unwrap();
    settings["projects"] = json!({});
    std::fs::write(&config, settings.to_string()).unwrap();
    bed.double.script(vec![Turn::reply("trusted and done")]);
    let id = bed.spawn(json!({"profile": "claude", "prompt": "do the task"}));
    let asking = bed.app.until(id, LONG, |r| r["state"] == "asking");
    assert_eq!(asking["message"], "needs you: trust this folder");
    assert_eq!(asking["state_source"], "screen");
    assert!(bed.double.requests().is_empty());
    // The prompt is typed once: had it gone into the dialog, it would never reach
    // the model below. (2.1.332's dialog has "No, exit" first.) The question
    // (which makes it `asking`) may show before its options: a loaded run once
    // read the screen between the two and chose "No, exit".
    let mut screen = String::new();
    crate::support::wait_until(LONG, || {
        screen = bed.screen(id);
        screen.contains('❯')
    });
    let trust: &[&str] = if screen.contains("❯ No, exit") {
        &["Down", "Enter"]
    } else {
        &["Enter"]
    };
    bed.app
        .request(json!({"Send": {"target": id, "keys": trust}}));
    if bed
        .double
        .wait_for(LONG, |b| super::last_user_text(b).contains("do the task"))
        .is_none()
    {
        let screen = bed.app.request(json!({"Output": {"target": id}}));
        panic!(
            "the prompt never reached the model: {screen}\n{}",
            bed.app.record(id)
        );
    }
    let idle = bed.app.until(id, LONG, |r| {
        r["state"] == "idle" && r["message"] == "trusted and done"
    });
    assert_eq!(idle["state_source"], "hook");
}

#[test]
fn an_expired_permission_ask_leaves_it_asking_while_its_dialog_is_up() {
    let bed = RealApp::start(Cli::Claude);
    bed.double
        .script(vec![bash("touch late.txt"), Turn::reply("done late")]);
    let id = bed.spawn(
        json!({"profile": "claude", "command": MANUAL, "prompt": "make a file",
        "env": {"KRAD_PERMISSION_ASK_SECS": "2"}}),
    );
    let ask = until_ask(&bed);
    bed.until_screen(id, "Do you want to proceed?");
    // Nobody answered on the bus: decided by timeout, gone from `krad asks`.
    until_no_ask(&bed);
    let out = bed
        .app
        .krad(&["answer", ask["ask"].as_str().unwrap(), "allow"]);
    assert_eq!(out.status.code(), Some(8), "already decided: a conflict");
    // Its dialog is still up: still asking, with the same question.
    bed.until_screen(id, "Do you want to proceed?");
    let asking = bed.app.record(id);
    assert_eq!(asking["state"], "asking", "{asking}");
    assert_eq!(asking["message"], "Bash: touch late.txt");
    super::turns::answer_dialog(&bed, id, &["1"], |r| r["state"] != "asking");
    let idle = bed.app.until(id, LONG, |r| r["state"] == "idle");
    assert_eq!(idle["message"], "done late");
}
