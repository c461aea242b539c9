//! The real Codex CLI in krad terminals, against the model double: the state
//! timeline of every turn (from its OSC 7501 announcements), approvals as bus
//! asks (through its PermissionRequest hook) answered from the CLI, a lead and
//! the phone, and answered with keys in its own
//! dialog, a hook Codex does not trust, API errors, a spawn without a prompt, a
//! resume, prompts that look like subcommands, and sends that always submit.

use std::path::Path;
use std::time::Instant;

use serde_json::{Value, json};

use super::timeline::Timeline;
use super::turns::SUBCOMMAND_LOOKING;
use super::turns::{
    answer_dialog, asks, expect_turn, idle_then_remembering, resumed_remembers,
    sends_then_a_slow_turn, until_ask,
};
use super::{Cli, LONG, RealApp, Turn};

/// Codex asks before running a command only in a read-only sandbox that asks.
const ASKING_CODEX: [&str; 5] = ["codex", "-s", "read-only", "-a", "on-request"];

fn escalated(command: &str) -> Turn {
    Turn::tool(
        "exec_command",
        json!({"cmd": command, "sandbox_permissions": "require_escalated", "justification": "a step"}),
    )
}

#[test]
fn turns_sends_a_slow_turn_and_an_api_error_show_true_states() {
    let bed = RealApp::start(Cli::Codex);
    bed.double.script(vec![Turn::reply("first reply")]);
    let spawned_at = Instant::now();
    let id = bed.spawn(json!({"profile": "codex", "prompt": "review"}));
    let timeline = Timeline::follow(&bed.app, id);
    let record = bed.app.record(id);
    let command: Vec<&str> = record["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(command, ["codex", "--", "review"], "the argv run");
    let first = expect_turn(&bed, &timeline, id, 1, spawned_at, "review");
    // The hidden title turn's notify must not be taken for the reply.
    let idle = bed.app.until(id, LONG, |r| r["message"] == "first reply");
    assert_eq!(idle["state"], "idle");
    // Each turn's message may come after its idle (Codex's notify).
    let sends = super::sends();
    sends_then_a_slow_turn(&bed, &timeline, id, ("codex", &first), |_, text| {
        let said = bed.app.until(id, LONG, |r| r["message"] == text);
        assert_eq!(said["state"], "idle");
    });
    // An API error ends the turn: idle, with the error.
    bed.double
        .script(vec![Turn::error(400, "the double says no")]);
    let sent_at = Instant::now();
    bed.app
        .request(json!({"Send": {"target": id, "text": "fail now", "enter": true}}));
    let (_, answered) = bed.answered(id, sends + 3);
    let (working_at, _) = timeline.first_after(sent_at, LONG, |r| r["state"] == "working");
    let (at, idle) = timeline.first_after(working_at, LONG, |r| r["state"] == "idle");
    timeline.assert_within_bound(at, answered);
    assert!(
        idle["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("error"),
        "{idle}"
    );
    // The error's words, once Codex drew them.
    bed.app.until(id, LONG, |r| {
        r["state"] == "idle"
            && r["message"]
                .as_str()
                .is_some_and(|m| m.contains("the double says no"))
    });
    let texts: Vec<String> = bed
        .double
        .requests()
        .iter()
        .map(super::last_user_text)
        .collect();
    assert_eq!(texts.len(), sends + 3, "{texts:#?}");
}

#[test]
fn approvals_are_bus_asks_answered_from_the_cli_without_a_key() {
    let bed = RealApp::start(Cli::Codex);
    bed.double
        .script(vec![escalated("touch allowed.txt"), Turn::reply("made it")]);
    let id =
        bed.spawn(json!({"profile": "codex", "command": ASKING_CODEX, "prompt": "make a file"}));
    let timeline = Timeline::follow(&bed.app, id);
    let ask = until_ask(&bed);
    let (asked, _) = bed.double.wait_answered(1, LONG);
    let asking = timeline.shown_within_bound(asked, |r| r["state"] == "asking");
    assert_eq!(asking["message"], "Bash: touch allowed.txt");
    assert_eq!(asking["state_source"], "hook");
    assert_eq!(ask["title"], "Bash: touch allowed.txt");
    assert_eq!(ask["kind"], "permission");
    // Codex takes no rule to keep from a hook: no "always allow" on its card.
    let options: Vec<&str> = ask["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap())
        .collect();
    assert_eq!(options, ["allow", "deny"]);
    // While the hook waits, Codex shows no dialog of its own.
    assert!(
        !bed.screen(id).contains("Would you like to run"),
        "{}",
        bed.screen(id)
    );
    let out = bed
        .app
        .krad(&["answer", ask["ask"].as_str().unwrap(), "allow"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let idle = timeline
        .first_after(asked, LONG, |r| r["state"] == "idle")
        .1;
    assert_eq!(idle["message"], "made it", "{}", timeline.describe());
    assert!(bed.repo.join("allowed.txt").exists());
    assert!(asks(&bed).is_empty());

    // Deny: the command does not run; the model hears why and the turn ends.
    bed.double.script(vec![
        escalated("touch denied.txt"),
        Turn::reply("fine, I won't"),
    ]);
    bed.app
        .request(json!({"Send": {"target": id, "text": "make another", "enter": true}}));
    let ask = until_ask(&bed);
    let asking = bed.app.until(id, LONG, |r| r["state"] == "asking");
    assert_eq!(asking["message"], "Bash: touch denied.txt");
    let out = bed
        .app
        .krad(&["answer", ask["ask"].as_str().unwrap(), "deny"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let idle = bed.app.until(id, LONG, |r| {
        r["state"] == "idle" && r["message"] == "fine, I won't"
    });
    assert_eq!(idle["state_source"], "hook");
    assert!(!bed.repo.join("denied.txt").exists());
    let heard = bed.double.requests().last().unwrap().to_string();
    assert!(
        heard.contains("Denied by the user (via krad, client)"),
        "{heard}"
    );
}

/// The same card answered by the other two who may: a lead agent over the
/// bus, then the phone over the durable facet. Each answer reaches Codex
/// without a key press.
#[test]
fn approvals_are_answered_by_a_lead_and_from_the_phone() {
    let (bed, socket) = RealApp::start_with_phone(Cli::Codex);
    bed.double.script(vec![
        escalated("touch by-lead.txt"),
        escalated("touch by-phone.txt"),
        Turn::reply("both made"),
    ]);
    let lead = bed.spawn(json!({"profile": "exec", "lead": true, "command": ["sleep", "600"]}));
    let lead_token = bed.app.terminal_token(lead);
    let id =
        bed.spawn(json!({"profile": "codex", "command": ASKING_CODEX, "prompt": "make two files"}));

    let ask = until_ask(&bed);
    assert_eq!(ask["title"], "Bash: touch by-lead.txt");
    let answered = bed.app.call_as(
        lead,
        &lead_token,
        json!({"Answer": {"ask": ask["ask"], "answer": {"option": "allow"}}}),
    );
    assert!(answered.get("Error").is_none(), "{answered}");

    let mut phone = crate::collie::Collie::connect(&socket);
    let pane = format!("p{id}");
    let until = Instant::now() + LONG;
    let card = loop {
        if let Some(card) = phone
            .asks(&pane)
            .into_iter()
            .find(|a| a["title"] == "Bash: touch by-phone.txt")
        {
            break card;
        }
        assert!(Instant::now() < until, "no second ask on the phone");
        std::thread::sleep(std::time::Duration::from_millis(25));
    };
    assert!(bed.repo.join("by-lead.txt").exists(), "allowed by the lead");
    let taken = phone.answer(&pane, &card, "allow");
    assert_eq!(
        (taken.status, taken.body["result"].as_str()),
        (200, Some("taken")),
        "{}",
        taken.text
    );
    bed.app.until(id, LONG, |r| {
        r["state"] == "idle" && r["message"] == "both made"
    });
    assert!(
        bed.repo.join("by-phone.txt").exists(),
        "allowed by the phone"
    );
    assert!(asks(&bed).is_empty());
    assert!(
        !bed.screen(id).contains("Would you like to run"),
        "no dialog of Codex's own: {}",
        bed.screen(id)
    );
}

#[test]
fn a_hook_codex_does_not_trust_is_said_on_the_record() {
    let bed = RealApp::start(Cli::Codex);
    bed.double.script(vec![
        escalated("touch unhooked.txt"),
        Turn::reply("made it"),
    ]);
    // A later override takes back the trust the profile gave its hook.
    let mut command: Vec<&str> = vec!["codex", "-c", "hooks.state={}"];
    command.extend(&ASKING_CODEX[1..]);
    let id = bed.spawn(json!({"profile": "codex", "command": command, "prompt": "make a file"}));
    // Codex asks at startup whether to trust it: once skipped, it runs without.
    let review = bed.app.until(id, LONG, |r| r["state"] == "asking");
    assert_eq!(review["message"], "needs you: review Codex's hooks");
    assert_eq!(review["state_source"], "screen");
    bed.until_screen(id, "Continue without trusting");
    // (Its approval dialog may follow at once: gone is when the message changed.
    // Were "3" pressed again, it would decline the approval.)
    answer_dialog(&bed, id, &["3"], |r| r["message"] != review["message"]);
    let asking = bed.app.until(id, LONG, |r| {
        r["state"] == "asking"
            && r["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("needs your approval to run: touch unhooked.txt"))
    });
    assert_eq!(
        asking["message"],
        "needs your approval to run: touch unhooked.txt \
         (krad's approval hook did not run: answer in its terminal)"
    );
    assert!(asks(&bed).is_empty(), "the hook never ran: no ask");
    // The record keeps it, and `krad doctor` lists it with what to do.
    let problem = asking["hook_problem"].as_str().unwrap_or_default();
    assert!(
        problem.contains("PermissionRequest hook never saw"),
        "{asking}"
    );
    let doctor = bed.app.krad(&["doctor"]);
    assert_eq!(doctor.status.code(), Some(1), "{doctor:?}");
    let said = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        said.contains(&format!(
            "PROBLEM terminal {id} (codex): Codex showed an approval dialog"
        )),
        "{said}"
    );
    answer_dialog(&bed, id, &["y"], |r| r["state"] != "asking");
    bed.app.until(id, LONG, |r| r["message"] == "made it");
}

#[test]
fn approvals_are_asking_with_the_command_and_answered_with_keys() {
    let bed = RealApp::start(Cli::Codex);
    bed.double
        .script(vec![escalated("touch once.txt"), Turn::reply("made once")]);
    // Nobody answers on the bus: after 2 s Codex shows its own dialog.
    let id = bed.spawn(json!({"profile": "codex", "command": ASKING_CODEX,
        "prompt": "make a file", "env": {"KRAD_PERMISSION_ASK_SECS": "2"}}));
    let timeline = Timeline::follow(&bed.app, id);
    let (asked, _) = bed.double.wait_answered(1, LONG);
    timeline.shown_within_bound(asked, |r| r["state"] == "asking");
    let asking = bed.app.until(id, LONG, |r| {
        r["message"] == "needs your approval to run: touch once.txt"
    });
    assert_eq!(asking["state_source"], "hook");
    // "y": yes, this time. The keys claim nothing: Codex says it works again.
    answer_dialog(&bed, id, &["y"], |r| r["state"] != "asking");
    let idle = bed.app.until(id, LONG, |r| r["message"] == "made once");
    assert_eq!(idle["state"], "idle");
    assert!(bed.repo.join("once.txt").exists());

    // Option 2, by arrow and Enter: don't ask again for this command.
    bed.double.script(vec![
        escalated("touch twice.txt"),
        Turn::reply("made twice"),
        escalated("touch twice.txt"),
        Turn::reply("made it again"),
    ]);
    bed.app
        .request(json!({"Send": {"target": id, "text": "again", "enter": true}}));
    bed.app.until(id, LONG, |r| {
        r["state"] == "asking" && r["message"] == "needs your approval to run: touch twice.txt"
    });
    bed.until_screen(id, "don't ask again");
    answer_dialog(&bed, id, &["Down", "Enter"], |r| r["state"] != "asking");
    bed.app.until(id, LONG, |r| r["message"] == "made twice");
    bed.app
        .request(json!({"Send": {"target": id, "text": "once more", "enter": true}}));
    let idle = bed.app.until(id, LONG, |r| r["message"] == "made it again");
    assert_eq!(idle["state"], "idle");

    // Escape declines: the turn stops, idle.
    bed.double.script(vec![escalated("touch never.txt")]);
    bed.app
        .request(json!({"Send": {"target": id, "text": "one more", "enter": true}}));
    bed.app.until(id, LONG, |r| {
        r["message"] == "needs your approval to run: touch never.txt"
    });
    answer_dialog(&bed, id, &["Escape"], |r| r["state"] != "asking");
    let idle = bed.app.until(id, LONG, |r| r["state"] == "idle");
    assert_ne!(
        idle["message"],
        "needs your approval to run: touch never.txt"
    );
    assert!(!bed.repo.join("never.txt").exists());
}

#[test]
fn without_a_prompt_it_is_idle_and_a_resumed_session_too() {
    let bed = RealApp::start(Cli::Codex);
    let (id, _, seen) = idle_then_remembering(&bed, json!({"profile": "codex"}), "›");
    assert!(seen.request == 1);
    bed.app.until(id, LONG, |r| r["message"] == "remembered");
    let session = thread_id(&bed.home.join(".codex/sessions"), "remember this");
    resumed_remembers(
        &bed,
        id,
        json!({"profile": "codex", "command": ["codex", "resume", session]}),
    );
}

/// The thread id of the rollout (under `sessions`) whose text has `prompt`.
fn thread_id(sessions: &Path, prompt: &str) -> String {
    for path in crate::support::files_under(sessions) {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let first: Value = text
            .lines()
            .next()
            .and_then(|l| serde_json::from_str(l).ok())
            .unwrap_or(Value::Null);
        if text.contains(prompt)
            && !text.contains("Generate a concise")
            && let Some(id) = first.pointer("/payload/id").and_then(Value::as_str)
        {
            return id.to_owned();
        }
    }
    panic!("no rollout with {prompt:?} under {}", sessions.display());
}

#[test]
fn prompts_that_look_like_subcommands_or_flags_reach_the_model() {
    let bed = RealApp::start(Cli::Codex);
    let ids = super::turns::spawn_with_prompts(&bed, "codex", &SUBCOMMAND_LOOKING);
    for id in ids {
        let record = bed.app.until(id, LONG, |r| r["state"] == "idle");
        assert_eq!(record["exit_code"], Value::Null, "still running: {record}");
    }
}

/// Issue 48, item 18: Codex runs its shell commands in a login shell by
/// default, whose `/etc/profile` sets `PATH` anew; an agent of the `codex`
/// profile still reaches `krad` with Codex's own defaults (no `login` asked
/// for either way), as a lead's first step does.
#[test]
fn a_codex_agent_reaches_krad_from_its_default_shell() {
    let bed = RealApp::start(Cli::Codex);
    bed.double.script(vec![
        Turn::tool(
            "exec_command",
            json!({"cmd": "krad ls --json > seen.json; echo $? > code.txt"}),
        ),
        Turn::reply("listed"),
    ]);
    let id = bed.spawn(json!({"profile": "codex",
        "command": ["codex", "-s", "danger-full-access", "-a", "never"],
        "prompt": "list the agents"}));
    bed.app.until(id, LONG, |r| {
        r["state"] == "idle" && r["message"] == "listed"
    });
    let code = std::fs::read_to_string(bed.repo.join("code.txt")).unwrap_or_default();
    assert_eq!(code.trim(), "0", "krad did not run: {}", bed.screen(id));
    let seen = std::fs::read_to_string(bed.repo.join("seen.json")).unwrap_or_default();
    assert!(
        seen.contains(&format!("\"terminal\":{id}")),
        "krad ls did not list the agent: {seen}"
    );
}
