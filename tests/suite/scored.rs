//! Scored variants (issue 50): `[checks]` run in every variant's worktree when
//! its agent stops, at most `parallel` at once; the scoreboard on the bus and
//! in the CLI; a pick by rule (`--best`) and its refusals; MergeVariants
//! landing compatible variants and stopping at a conflict; Wait with
//! `scored`; results kept across a SIGKILL of the app — with real git
//! worktrees and plain programs as agents.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{App, Launch, code, exit_code, git, stdout, wait_until};

/// One check, `test`: passes, fails or hangs past its 3 s limit as the
/// variant's `verdict` file says.
const CONFIG: &str = r#"
[checks]
parallel = 1
test = { command = "v=$(cat verdict); echo \"checking $v\"; case $v in pass) sleep 1; echo fine;; fail) sleep 1; echo broken >&2; exit 1;; *) sleep 30;; esac", timeout_secs = 3 }
"#;

/// The agent of every variant: variant 1 passes, 2 fails, 3 hangs; every
/// variant of a group named `bad…` fails.
const AGENT: &str = r#"n=${KRAD_ADE_ENVIRONMENT##*-}
case "$KRAD_ADE_ENVIRONMENT" in
  bad*) v=fail ;;
  *) case $n in 1) v=pass ;; 2) v=fail ;; *) v=hang ;; esac ;;
esac
echo $v > verdict
echo "work of $KRAD_ADE_ENVIRONMENT" > "result-$KRAD_ADE_ENVIRONMENT.txt""#;

fn repo(app: &App) -> PathBuf {
    app.dir.path().join("repo")
}

fn app(config: Option<&str>) -> App {
    crate::support::app_with_first_commit(
        &[("README.md", b"hello\n"), ("src/lib.rs", b"fn one() {}\n")],
        config,
    )
}

/// Runs `count` variants of `script` in group `name`.
fn run(app: &App, name: &str, count: u32, script: &str) -> Value {
    app.answered(
        json!({"RunVariants": {
            "count": count, "name": name, "profile": "exec",
            "command": ["sh", "-c", script, "sh"], "prompt": "fix it"
        }}),
        "Variants",
    )
}

fn scores(app: &App, group: &str) -> Value {
    app.answered(json!({"Scores": {"group": group}}), "Scores")
}

/// The `test` check of variant `n`.
fn check_of(scores: &Value, n: u64) -> Value {
    let variant = scores["variants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["variant"] == n)
        .unwrap_or_else(|| panic!("no variant {n}: {scores}"));
    variant["checks"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == "test"))
        .cloned()
        .unwrap_or(Value::Null)
}

fn wait_scored(app: &App, group: &str) {
    let answer =
        app.request(json!({"Wait": {"group": group, "scored": true, "timeout_secs": 120}}));
    assert!(answer["Agents"].is_array(), "{answer}");
}

/// Milliseconds of the day of an RFC 3339 UTC time (`…T04:51:05.123Z`).
fn ms_of_day(at: &str) -> u64 {
    let time = at.split('T').nth(1).unwrap().trim_end_matches('Z');
    let mut parts = time.split(':');
    let h: u64 = parts.next().unwrap().parse().unwrap();
    let m: u64 = parts.next().unwrap().parse().unwrap();
    let s: f64 = parts.next().unwrap().parse().unwrap();
    (h * 3600 + m * 60) * 1000 + (s * 1000.0).round() as u64
}

/// The most checks that ran at once, from their start and end times.
fn most_at_once(runs: &[(u64, u64)]) -> usize {
    runs.iter()
        .map(|&(start, _)| {
            runs.iter()
                .filter(|&&(s, e)| s <= start && start < e)
                .count()
        })
        .max()
        .unwrap_or(0)
}

fn relaunch(mut app: App, kill: bool) -> App {
    if kill {
        app.child.kill().unwrap();
        app.wait_exit(Duration::from_secs(10));
    }
    let dir = app.stop_keep_dir();
    App::launch(Launch {
        reuse: Some(dir),
        ..Launch::default()
    })
}

fn head(dir: &Path) -> String {
    git(dir, &["rev-parse", "HEAD"])
}

#[test]
fn checks_pass_fail_and_time_out_one_at_a_time_survive_a_kill_and_the_best_is_picked() {
    let app = app(Some(CONFIG));
    run(&app, "sc", 3, AGENT);
    // Killed while a check runs: that check runs again at the next start.
    wait_until(Duration::from_secs(60), || {
        let board = scores(&app, "sc");
        (1..=3).any(|n| check_of(&board, n)["outcome"] == "running")
    });
    let app = relaunch(app, true);
    wait_scored(&app, "sc");
    let board = scores(&app, "sc");
    assert_eq!(board["checks"], json!(["test"]), "{board}");
    let (one, two, three) = (
        check_of(&board, 1),
        check_of(&board, 2),
        check_of(&board, 3),
    );
    assert_eq!(one["outcome"], "passed", "{board}");
    assert_eq!(one["exit_code"], 0);
    assert!(one["tail"].to_string().contains("fine"), "{one}");
    assert_eq!(two["outcome"], "failed", "{board}");
    assert_eq!(two["exit_code"], 1);
    assert!(two["tail"].to_string().contains("broken"), "{two}");
    assert_eq!(three["outcome"], "timed_out", "{board}");
    assert!(three["duration_ms"].as_u64().unwrap() >= 3000, "{three}");
    for check in [&one, &two, &three] {
        assert_eq!(check["commit"].as_str().map(str::len), Some(40), "{check}");
        assert_eq!(check["gates"], true);
    }
    assert_eq!(board["best"], 1, "{board}");
    assert_eq!(board["ranking"][0], 1, "{board}");
    let first = &board["variants"][0];
    assert_eq!(first["checked"], true, "{board}");
    assert_eq!(first["gates_passed"], true, "{board}");
    assert_eq!(
        (first["files"].as_u64(), first["added"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(board["variants"][1]["gates_passed"], false, "{board}");
    // At most `parallel` (1) at once, measured from the runs' own times.
    let runs: Vec<(u64, u64)> = [&one, &two, &three]
        .iter()
        .map(|c| {
            (
                ms_of_day(c["started_at"].as_str().unwrap()),
                ms_of_day(c["ran_at"].as_str().unwrap()),
            )
        })
        .collect();
    assert_eq!(most_at_once(&runs), 1, "{runs:?}");

    // The scoreboard in the CLI.
    let out = app.krad_ok(&["variants", "ls", "sc"]);
    for want in [
        "test passed",
        "test failed(1)",
        "test timed_out",
        "best: variant 1",
    ] {
        assert!(out.contains(want), "{want:?} in\n{out}");
    }
    let json: Value =
        serde_json::from_str(&app.krad_ok(&["variants", "ls", "sc", "--json"])).unwrap();
    assert_eq!(json["Scores"]["best"], 1, "{json}");
    // Asked again, nothing already checked runs again.
    let again = app.request(json!({"CheckVariants": {"group": "sc"}}));
    assert!(again["Scores"].is_object(), "{again}");
    wait_scored(&app, "sc");
    assert_eq!(check_of(&scores(&app, "sc"), 1)["ran_at"], one["ran_at"]);

    // Kept across a SIGKILL of the app.
    let app = relaunch(app, true);
    wait_scored(&app, "sc");
    let kept = scores(&app, "sc");
    for n in 1..=3 {
        assert_eq!(check_of(&kept, n), check_of(&board, n), "variant {n}");
    }

    // No variant passing: refused with the table, nothing changed.
    run(&app, "bad", 2, AGENT);
    wait_scored(&app, "bad");
    let before = head(&repo(&app));
    let refused = app.krad(&["variants", "pick", "bad", "--best", "--yes"]);
    assert_eq!(exit_code(&refused), 8, "{refused:?}");
    assert!(stdout(&refused).contains("RANK"), "{refused:?}");
    let answer = app.request(json!({"PickVariant": {"group": "bad", "best": true}}));
    assert_eq!(code(&answer), "conflict", "{answer}");
    assert!(
        answer["Error"]["detail"]["scores"]["variants"].is_array(),
        "{answer}"
    );
    assert_eq!(head(&repo(&app)), before);

    // --best without --yes: the ranking and the dry run, nothing picked.
    let shown = app.krad_ok(&["variants", "pick", "sc", "--best"]);
    assert!(shown.contains("the best is variant 1"), "{shown}");
    assert!(shown.contains("dry run"), "{shown}");
    assert_eq!(head(&repo(&app)), before);
    // With --yes: variant 1 lands.
    let picked = app.krad_ok(&["variants", "pick", "sc", "--best", "--yes"]);
    assert!(picked.contains("picked variant 1"), "{picked}");
    assert_eq!(
        std::fs::read_to_string(repo(&app).join("result-sc-1.txt")).unwrap(),
        "work of sc-1\n"
    );
    assert!(!repo(&app).join("result-sc-2.txt").exists());
}

#[test]
fn merge_lands_compatible_variants_and_stops_at_a_conflict_with_nothing_half_applied() {
    // Variants 1 and 3 change README.md each their own way; 2 adds a file.
    let script = r#"n=${KRAD_ADE_ENVIRONMENT##*-}
case $n in
  2) echo "new of 2" > two.txt ;;
  *) echo "readme of $n" > README.md ;;
esac"#;
    let app = app(Some("[checks]\nparallel = 2\nok = \"true\"\n"));
    run(&app, "mg", 3, script);
    let waited = app.request(json!({"Wait": {"group": "mg", "scored": true, "timeout_secs": 60}}));
    assert_eq!(
        waited["Agents"].as_array().map(Vec::len),
        Some(3),
        "{waited}"
    );
    let board = scores(&app, "mg");
    let conflicts = |n: usize| board["variants"][n]["conflicts_with"].clone();
    assert_eq!(conflicts(0), json!([3]), "{board}");
    assert_eq!(conflicts(1), json!([]), "{board}");
    assert_eq!(conflicts(2), json!([1]), "{board}");
    let out = app.krad(&["variants", "merge", "mg", "--json"]);
    assert_eq!(exit_code(&out), 8, "{out:?}");
    let merged: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let merged = &merged["Merged"];
    assert_eq!(merged["order"][0], 2, "{merged}");
    let landed: Vec<u64> = merged["landed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["variant"].as_u64().unwrap())
        .collect();
    assert_eq!(landed.len(), 2, "{merged}");
    let stopped = merged["stopped"]["variant"].as_u64().unwrap();
    assert!(!landed.contains(&stopped), "{merged}");
    assert_eq!(merged["stopped"]["files"], json!(["README.md"]), "{merged}");
    let main = repo(&app);
    assert_eq!(
        std::fs::read_to_string(main.join("two.txt")).unwrap(),
        "new of 2\n"
    );
    let readme = std::fs::read_to_string(main.join("README.md")).unwrap();
    let other = landed.iter().find(|&&n| n != 2).unwrap();
    assert_eq!(readme, format!("readme of {other}\n"));
    // Nothing half applied: no merge under way, nothing uncommitted.
    assert_eq!(
        git(&main, &["status", "--porcelain", "--untracked-files=no"]),
        ""
    );
    assert!(!main.join(".git").join("MERGE_HEAD").exists());
}

/// A Chromium on the app's page, logged in, its link to the app up.
fn logged_in(app: &App) -> crate::chromium::Chromium {
    let mut browser = crate::chromium::Chromium::start();
    browser.navigate(&crate::ui::login_url(app));
    browser.until(
        "document.querySelector('#link').classList.contains('up')",
        Duration::from_secs(30),
    );
    browser
}

#[test]
fn the_page_shows_the_scoreboard_and_picks_the_best_after_its_dry_run() {
    const LONG: Duration = Duration::from_secs(30);
    let app = app(Some(CONFIG));
    run(&app, "web", 3, AGENT);
    wait_scored(&app, "web");
    let mut browser = logged_in(&app);
    let board = ".scores[data-group=\"web\"] table";
    browser.until(&format!("document.querySelector('{board}') !== null"), LONG);
    let text = browser.eval("document.querySelector('.scores[data-group=\"web\"]').innerText");
    let text = text.as_str().unwrap_or_default().to_owned();
    for want in [
        "test passed",
        "test failed(1)",
        "test timed_out",
        "best: variant 1",
    ] {
        assert!(text.contains(want), "{want:?} in {text}");
    }
    browser.screenshot("#groups", "scores");
    browser.click("button.pick-best");
    browser.until("document.querySelector('.best-dry-run') !== null", LONG);
    let dry = browser.eval("document.querySelector('.best-dry-run').innerText");
    assert!(
        dry.as_str().unwrap_or_default().contains("Best: variant 1"),
        "{dry}"
    );
    assert!(
        !repo(&app).join("result-web-1.txt").exists(),
        "the dry run changed nothing"
    );
    browser.click(".confirm-best");
    browser.until(
        "document.querySelector('#pick-result .picked') !== null",
        LONG,
    );
    assert_eq!(
        std::fs::read_to_string(repo(&app).join("result-web-1.txt")).unwrap(),
        "work of web-1\n"
    );
}

/// The page refuses a pick by rule as the bus does: with no variant passing
/// and with two that tie, "pick the best…" shows the refusal and the
/// scoreboard, offers no pick, and nothing is picked.
#[test]
fn the_page_refuses_a_pick_by_rule_with_a_tie_or_none_passing_and_shows_the_table() {
    const LONG: Duration = Duration::from_secs(30);
    let app = app(Some(CONFIG));
    run(&app, "bad", 2, AGENT);
    wait_scored(&app, "bad");
    // Two that pass, their agents closed: no cost, no time, no conflict —
    // equal on every rule.
    let even = run(
        &app,
        "even",
        2,
        "echo pass > verdict; echo \"work of $KRAD_ADE_ENVIRONMENT\" > \"result-$KRAD_ADE_ENVIRONMENT.txt\"",
    );
    wait_scored(&app, "even");
    for variant in even["variants"].as_array().unwrap() {
        let id = variant["terminal"].as_u64().unwrap();
        assert_eq!(app.request(json!({"Close": {"target": id}})), json!("Ok"));
    }
    let tied = scores(&app, "even");
    assert!(
        tied["why"].as_str().is_some_and(|w| w.contains("tie")),
        "{tied}"
    );
    let before = head(&repo(&app));
    let mut browser = logged_in(&app);
    for (group, why) in [("bad", "no variant passed"), ("even", "tie on every rule")] {
        let board = format!("document.querySelector('.scores[data-group=\"{group}\"]')");
        browser.until(
            &format!("{board} !== null && {board}.querySelector('table') !== null"),
            LONG,
        );
        browser.eval(&format!(
            "{board}.parentElement.querySelector('button.pick-best').click()"
        ));
        let panel = format!("{board}.nextElementSibling");
        browser.until(&format!("{panel}.querySelector('.refused') !== null"), LONG);
        let said = browser.eval(&format!("{panel}.querySelector('.refused').innerText"));
        let said = said.as_str().unwrap_or_default().to_owned();
        assert!(said.contains(why), "{group}: {said}");
        let table = browser.eval(&format!(
            "{panel}.querySelector('table.score-table').innerText"
        ));
        let table = table.as_str().unwrap_or_default().to_owned();
        assert!(
            table.contains(&format!("{group}-1")) && table.contains(&format!("{group}-2")),
            "{table}"
        );
        assert!(table.contains("test"), "{table}");
        let offered = browser.eval(&format!(
            "{panel}.querySelector('.confirm-best, .best-dry-run') !== null"
        ));
        assert_eq!(offered, json!(false), "{group}: a pick is offered");
        if group == "even" {
            browser.screenshot(
                &format!(".scores[data-group=\"{group}\"] + .confirm"),
                "scores-refused",
            );
        }
    }
    let picked = browser.eval("document.querySelector('#pick-result .picked') !== null");
    assert_eq!(picked, json!(false));
    assert_eq!(head(&repo(&app)), before, "nothing was picked");
    for group in ["bad", "even"] {
        assert_eq!(scores(&app, group)["picked"], Value::Null, "{group}");
        assert!(!repo(&app).join(format!("result-{group}-1.txt")).exists());
    }
}

#[test]
fn checks_run_at_most_parallel_at_once_and_wait_for_room_under_limits() {
    // Four variants, a check of 1 s each, two at once.
    let config = "[limits]\nmax_working = 1\n[checks]\nparallel = 2\n\
                  slow = \"sleep 1; cat verdict\"\n";
    let app = app(Some(config));
    for n in 1..=4 {
        // One variant at a time: max_working = 1 leaves room for one start.
        let answer = app.request(json!({"RunVariants": {
            "count": 1, "name": format!("par{n}"), "profile": "exec",
            "command": ["sh", "-c", "echo $KRAD_ADE_ENVIRONMENT > verdict", "sh"], "prompt": "x"
        }}));
        let id = answer["Variants"]["variants"][0]["terminal"]
            .as_u64()
            .unwrap();
        app.until_state(id, "exited");
    }
    let mut runs = Vec::new();
    for n in 1..=4 {
        wait_scored(&app, &format!("par{n}"));
        let check = scores(&app, &format!("par{n}"))["variants"][0]["checks"][0].clone();
        assert_eq!(check["outcome"], "passed", "{check}");
        runs.push((
            ms_of_day(check["started_at"].as_str().unwrap()),
            ms_of_day(check["ran_at"].as_str().unwrap()),
        ));
    }
    let at_once = most_at_once(&runs);
    eprintln!("checks at once with parallel = 2: {at_once} ({runs:?})");
    assert!((1..=2).contains(&at_once), "{runs:?}");

    // An agent working fills max_working: a check asked for waits, queued.
    let busy = app.spawn_sh("echo busy; sleep 600");
    app.until_state(busy, "working");
    let env = scores(&app, "par1")["variants"][0]["environment"]
        .as_str()
        .unwrap()
        .to_owned();
    let worktree = repo(&app).join(".krad").join("worktrees").join(&env);
    let worktree = if worktree.exists() {
        worktree
    } else {
        PathBuf::from(
            app.request(json!("Environments"))["Environments"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["name"] == env.as_str())
                .unwrap()["path"]
                .as_str()
                .unwrap(),
        )
    };
    std::fs::write(worktree.join("more.txt"), "more\n").unwrap();
    let asked = app.request(json!({"CheckVariants": {"group": "par1"}}));
    assert!(asked["Scores"].is_object(), "{asked}");
    let outcome = || check_of_named(&scores(&app, "par1"), "slow")["outcome"].clone();
    // Still queued a while later: no room under [limits].
    let until = std::time::Instant::now() + Duration::from_millis(1500);
    while std::time::Instant::now() < until {
        assert_eq!(outcome(), "queued");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Room again: it runs.
    let closed = app.request(json!({"Close": {"target": busy}}));
    assert_eq!(closed, json!("Ok"), "{closed}");
    wait_scored(&app, "par1");
    assert_eq!(outcome(), "passed");
}

/// The check `name` of the first variant.
fn check_of_named(scores: &Value, name: &str) -> Value {
    scores["variants"][0]["checks"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == name))
        .cloned()
        .unwrap_or(Value::Null)
}

/// Tries to write beside the repository's own checkout (outside the
/// worktree): a sandbox refuses it.
const PROBE: &[u8] = b"out=\"$(git rev-parse --path-format=absolute --git-common-dir)/../escaped-$(basename \"$PWD\")\"\n\
if (echo x > \"$out\") 2>/dev/null; then echo escaped; exit 1; fi\n\
echo contained\n";

#[test]
fn a_contained_variant_s_checks_run_in_its_sandbox() {
    let app = crate::support::app_with_first_commit(
        &[("README.md", b"hello\n"), ("probe.sh", PROBE)],
        Some("[checks]\nparallel = 2\nprobe = \"sh ./probe.sh\"\n"),
    );
    for (group, sandbox) in [("box", true), ("open", false)] {
        app.answered(
            json!({"RunVariants": {
                "count": 1, "name": group, "profile": "exec", "sandbox": sandbox,
                "command": ["sh", "-c", "echo done > done.txt"], "prompt": "x"
            }}),
            "Variants",
        );
        wait_scored(&app, group);
    }
    let outcome = |group: &str| check_of_named(&scores(&app, group), "probe");
    let boxed = outcome("box");
    assert_eq!(boxed["outcome"], "passed", "{boxed}");
    assert!(boxed["tail"].to_string().contains("contained"), "{boxed}");
    let open = outcome("open");
    assert_eq!(open["outcome"], "failed", "{open}");
    assert!(!repo(&app).join("escaped-box-1").exists());
    assert!(repo(&app).join("escaped-open-1").exists());
}

#[test]
fn a_variant_on_an_ssh_host_is_checked_there() {
    let sshd = crate::ssh::Sshd::start();
    let (app, remote) = crate::ssh::app_with_host_configured(
        &sshd,
        "",
        "\n[checks]\nparallel = 1\nthere = \"cat app.txt; pwd\"\n",
    );
    let run = app.request(json!({"RunVariants": {
        "count": 1, "name": "far", "host": "far", "profile": "exec",
        "command": ["sh", "-c", "echo done > done.txt"], "prompt": "x"
    }}));
    assert!(run["Variants"].is_object(), "{run}");
    wait_scored(&app, "far");
    let board = scores(&app, "far");
    let check = check_of_named(&board, "there");
    assert_eq!(check["outcome"], "passed", "{board}");
    // It ran in the variant's worktree there: app.txt is the host's alone.
    assert!(!repo(&app).join("app.txt").exists());
    assert_eq!(check["tail"][0], "on the host", "{check}");
    let cwd = check["tail"][1].as_str().unwrap_or_default();
    assert!(cwd.ends_with("far-1"), "{check}");
    assert!(
        !remote.join("done.txt").exists(),
        "the work stays in the worktree"
    );
    assert_eq!(board["variants"][0]["gates_passed"], true, "{board}");
}

/// The probe as a `[checks]` entry of its own (a TOML literal string), with
/// `more` after it: `probe` prints `contained` (and exits 0) only when it
/// cannot write beside the repository's checkout, and says whether `$HOME`
/// is the user's.
fn probe_check(more: &str) -> String {
    let probe = std::str::from_utf8(PROBE).unwrap();
    format!("probe = '''\n{more}\necho ran > \"$HOME/check-ran.txt\"\n{probe}'''\n")
}

/// Runs one variant in group `group` on host `far` (contained when the
/// config says so) whose agent stays, idle; its terminal.
fn variant_on_far(app: &App, group: &str) -> u64 {
    let run = app.request(json!({"RunVariants": {
        "count": 1, "name": group, "host": "far", "profile": "exec",
        "command": ["sh", "-c", "echo done > done.txt; krad report idle -m done; exec sleep 600"],
        "prompt": "x"
    }}));
    assert!(run["Variants"].is_object(), "{run}");
    run["Variants"]["variants"][0]["terminal"].as_u64().unwrap()
}

/// What every contained check on the host shows: it passed in its sandbox
/// there — it could not write beside the host's checkout, its `$HOME` was
/// its own (not the host's), and its private home went with it.
fn checked_inside_on_the_host(
    sshd: &crate::ssh::Sshd,
    remote: &Path,
    board: &Value,
    id: u64,
) -> Value {
    let check = check_of_named(board, "probe");
    assert_eq!(check["outcome"], "passed", "{board}");
    assert!(check["tail"].to_string().contains("contained"), "{check}");
    assert!(!remote.join("escaped-boxed-1").exists(), "it wrote outside");
    let host_home = sshd.dir.path().join("home");
    assert!(!host_home.join("check-ran.txt").exists(), "the host's HOME");
    let homes = app_files_on_host(sshd, |name| name.contains(&format!("{id}-check-")));
    assert!(homes.is_empty(), "the check's home stays: {homes:?}");
    check
}

/// The files in the app's folders on the test's SSH host (`~/.krad-ade/*/`)
/// whose names `wanted` takes.
fn app_files_on_host(sshd: &crate::ssh::Sshd, wanted: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let folders = std::fs::read_dir(sshd.dir.path().join("home/.krad-ade")).unwrap();
    folders
        .flatten()
        .flat_map(|dir| {
            std::fs::read_dir(dir.path())
                .into_iter()
                .flatten()
                .flatten()
        })
        .filter(|e| wanted(&e.file_name().to_string_lossy()))
        .map(|e| e.path())
        .collect()
}

/// A variant contained on an SSH host: its checks run in a sandbox of the
/// same kind there, built by the host's launcher lines — never outside —
/// with its agent's network: the host's with `network = "all"`, none with
/// `"none"`.
#[test]
fn a_contained_variant_on_an_ssh_host_has_its_checks_run_in_a_sandbox_there() {
    for (network, reached) in [("all", true), ("none", false)] {
        let (server, taken) = crate::sandbox_net::http_server("FROM-A-SERVER");
        let sshd = crate::ssh::Sshd::start();
        let (app, remote) = crate::ssh::app_with_host_configured(
            &sshd,
            "",
            &format!(
                "\n[sandbox]\nprofiles = [\"exec\"]\nnetwork = \"{network}\"\n\
                 [checks]\nparallel = 1\n{}",
                probe_check(&reach_probe(server))
            ),
        );
        let id = variant_on_far(&app, "boxed");
        wait_scored(&app, "boxed");
        let board = scores(&app, "boxed");
        let check = checked_inside_on_the_host(&sshd, &remote, &board, id);
        reached_or_not(&check, &taken, reached, network);
    }
}

/// A check's probe of the network: a server on this machine's loopback
/// (the host's too, on loopback), reached or not.
fn reach_probe(server: u16) -> String {
    format!(
        "if curl -s --max-time 10 http://127.0.0.1:{server}/; then echo; echo REACHED; \
         else echo NO-NETWORK; fi"
    )
}

/// The check reached the server as its network allows, and only then.
fn reached_or_not(check: &Value, taken: &AtomicUsize, reached: bool, network: &str) {
    let tail = check["tail"].to_string();
    if reached {
        assert!(
            tail.contains("FROM-A-SERVER") && tail.contains("REACHED"),
            "{network}: {check}"
        );
        assert_eq!(taken.load(Ordering::SeqCst), 1, "{network}: {check}");
    } else {
        assert!(tail.contains("NO-NETWORK"), "{network}: {check}");
        assert!(!tail.contains("FROM-A-SERVER"), "{network}: {check}");
        assert_eq!(taken.load(Ordering::SeqCst), 0, "{network}: {check}");
    }
}

/// Closes variant `group`-1's agent `id`, changes its work and checks it
/// again: the check that follows runs with the agent gone.
fn check_again_after_its_agent_closed(app: &App, group: &str, id: u64) -> Value {
    assert_eq!(app.request(json!({"Close": {"target": id}})), json!("Ok"));
    let worktree = repo(app).join(".krad/worktrees").join(format!("{group}-1"));
    std::fs::write(worktree.join("more.txt"), "more\n").unwrap();
    let asked = app.request(json!({"CheckVariants": {"group": group}}));
    assert!(asked["Scores"].is_object(), "{asked}");
    wait_scored(app, group);
    check_of_named(&scores(app, group), "probe")
}

/// Here, under `network = "none"`, a contained variant's check has no
/// network at all, as its agent: a server on loopback is not reached — its
/// agent closed too (the variant's record says it runs contained).
#[test]
fn with_no_network_a_contained_variant_s_checks_reach_nothing() {
    let (server, taken) = crate::sandbox_net::http_server("FROM-A-SERVER");
    let config = format!(
        "[sandbox]\nnetwork = \"none\"\n[checks]\nparallel = 1\n{}",
        probe_check(&reach_probe(server))
    );
    let app = crate::support::app_with_first_commit(&[("README.md", b"hello\n")], Some(&config));
    let variants = app.answered(
        json!({"RunVariants": {
            "count": 1, "name": "box", "profile": "exec", "sandbox": true,
            "command": ["sh", "-c", "echo done > done.txt; krad report idle -m done; exec sleep 600"],
            "prompt": "x"
        }}),
        "Variants",
    );
    let id = variants["variants"][0]["terminal"]
        .as_u64()
        .unwrap_or_else(|| panic!("{variants}"));
    wait_scored(&app, "box");
    let check = check_of_named(&scores(&app, "box"), "probe");
    assert_eq!(check["outcome"], "passed", "{check}");
    assert!(check["tail"].to_string().contains("contained"), "{check}");
    reached_or_not(&check, &taken, false, "none");
    let again = check_again_after_its_agent_closed(&app, "box", id);
    assert_ne!(again["ran_at"], check["ran_at"], "{again}");
    assert_eq!(again["outcome"], "passed", "{again}");
    assert!(again["tail"].to_string().contains("contained"), "{again}");
    reached_or_not(&again, &taken, false, "none, its agent closed");
}

/// Under `network = "allow"` a contained variant's check on an SSH host
/// shares its agent's network: the agent's allowlist, enforced by this
/// machine's app over the link, every attempt in the agent's log.
#[test]
fn on_an_ssh_host_a_contained_variant_s_checks_share_its_agent_s_allowlist() {
    let (allowed, allowed_taken) = crate::sandbox_net::http_server("FROM-ALLOWED");
    let (internet, internet_taken) = crate::sandbox_net::http_server("FROM-THE-INTERNET");
    let sshd = crate::ssh::Sshd::start();
    let (app, remote) = crate::ssh::app_with_host_configured(
        &sshd,
        "",
        &format!(
            "\n[sandbox]\nprofiles = [\"exec\"]\nnetwork = \"allow\"\n\
             allow = [\"127.0.0.1:{allowed}\"]\n[checks]\nparallel = 1\n{}",
            probe_check(&net_probes(allowed, internet))
        ),
    );
    let id = variant_on_far(&app, "boxed");
    wait_scored(&app, "boxed");
    let board = scores(&app, "boxed");
    let check = checked_inside_on_the_host(&sshd, &remote, &board, id);
    only_the_allowlist_was_reached(&app, id, &check, (allowed, &allowed_taken));
    assert_eq!(internet_taken.load(Ordering::SeqCst), 0, "{check}");
}

/// A check's probes of the network: the allowed server through its relay,
/// the other through the proxy (refused with a 403) and directly.
fn net_probes(allowed: u16, internet: u16) -> String {
    format!(
        "echo \"relay:$(curl -s --max-time 20 http://127.0.0.1:{allowed}/)\"\n\
         echo \"refused:$(curl -s --max-time 20 --noproxy '' -x \"$HTTPS_PROXY\" -w ' %{{http_code}}' http://127.0.0.1:{internet}/)\"\n\
         curl -s --max-time 20 http://127.0.0.1:{internet}/ || echo DIRECT-REFUSED"
    )
}

/// The check reached the allowed server through the agent's relay, was
/// refused the other, and the agent's log has both attempts.
fn only_the_allowlist_was_reached(
    app: &App,
    agent: u64,
    check: &Value,
    (allowed, allowed_taken): (u16, &AtomicUsize),
) {
    let tail = check["tail"].to_string();
    for said in ["relay:FROM-ALLOWED", "refused:", "403", "DIRECT-REFUSED"] {
        assert!(tail.contains(said), "no {said:?} in {check}");
    }
    assert!(!tail.contains("FROM-THE-INTERNET"), "{check}");
    assert_eq!(allowed_taken.load(Ordering::SeqCst), 1, "{check}");
    let log = app.request(json!({"Connections": {"target": agent}}));
    let attempts = log["Connections"]["attempts"].as_array().cloned();
    let attempts = attempts.unwrap_or_else(|| panic!("{log}"));
    let seen = |port: u16, via: &str, ok: bool| {
        attempts
            .iter()
            .any(|a| a["port"] == port && a["via"] == via && a["allowed"] == ok)
    };
    assert!(seen(allowed, "relay", true), "{log}");
    assert!(
        attempts
            .iter()
            .any(|a| a["via"] == "proxy" && a["allowed"] == false),
        "{log}"
    );
}

/// Here, under `network = "allow"`, a contained variant's check shares its
/// agent's network too — and leaves the agent's private home as it was.
#[test]
fn with_an_allowlist_a_contained_variant_s_checks_share_its_agent_s_network() {
    let (allowed, allowed_taken) = crate::sandbox_net::http_server("FROM-ALLOWED");
    let (internet, internet_taken) = crate::sandbox_net::http_server("FROM-THE-INTERNET");
    let config = format!(
        "[sandbox]\nnetwork = \"allow\"\nallow = [\"127.0.0.1:{allowed}\"]\n\
         [checks]\nparallel = 1\n{}",
        probe_check(&net_probes(allowed, internet))
    );
    let app = crate::support::app_with_first_commit(&[("README.md", b"hello\n")], Some(&config));
    let answer = app.request(json!({"RunVariants": {
        "count": 1, "name": "box", "profile": "exec", "sandbox": true,
        "command": ["sh", "-c", "echo mine > \"$HOME/agent.txt\"; echo done > done.txt; \
                     krad report idle -m done; exec sleep 600"],
        "prompt": "x"
    }}));
    let id = answer["Variants"]["variants"][0]["terminal"]
        .as_u64()
        .unwrap_or_else(|| panic!("{answer}"));
    wait_scored(&app, "box");
    let board = scores(&app, "box");
    let check = check_of_named(&board, "probe");
    assert_eq!(check["outcome"], "passed", "{board}");
    assert!(check["tail"].to_string().contains("contained"), "{check}");
    assert!(!repo(&app).join("escaped-box-1").exists());
    only_the_allowlist_was_reached(&app, id, &check, (allowed, &allowed_taken));
    assert_eq!(internet_taken.load(Ordering::SeqCst), 0, "{check}");
    let sandboxes = repo(&app).join(".git/krad/sandbox");
    assert_eq!(
        std::fs::read_to_string(sandboxes.join(format!("{id}/agent.txt"))).ok(),
        Some("mine\n".to_owned()),
        "the agent's home is as it was"
    );
    assert!(!sandboxes.join(format!("{id}/check-ran.txt")).exists());
    let left = std::fs::read_dir(sandboxes.join(format!("{id}.check")))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(left, 0, "the check's home went with it");
    // Its agent closed, its network is gone: the check is refused, not run
    // outside (where it would reach the allowed server directly).
    let again = check_again_after_its_agent_closed(&app, "box", id);
    assert_eq!(again["outcome"], "error", "{again}");
    assert!(
        again["tail"].to_string().contains("not run outside"),
        "{again}"
    );
    assert_eq!(allowed_taken.load(Ordering::SeqCst), 1, "{again}");
}

/// A check on an SSH host counts in its variant's agent's usage there, as
/// here: the host's sample reads the check's pid from a file there; and what
/// those samples saw it use is kept with its result.
#[test]
fn a_running_check_on_an_ssh_host_counts_in_its_variant_s_usage() {
    let sshd = crate::ssh::Sshd::start();
    let busy = "end=$(($(date +%s)+8)); while [ $(date +%s) -lt $end ]; do :; done";
    let (app, _) = crate::ssh::app_with_host_configured(
        &sshd,
        "",
        &format!("\n[checks]\nbusy = \"{busy}\"\n"),
    );
    let id = variant_on_far(&app, "use");
    let idle = app.until(id, Duration::from_secs(60), |r| r["message"] == "done");
    assert_eq!(idle["state"], "idle", "{idle}");
    // The check's processes and their CPU, whatever share of a loaded
    // machine's cores it gets (see the test of a check here).
    app.until(id, Duration::from_secs(60), |r| {
        r["usage"]["processes"].as_u64().unwrap_or(0) >= 3
            && r["usage"]["cpu_percent"].as_f64().unwrap_or(0.0) > 0.0
    });
    wait_scored(&app, "use");
    let check = check_of_named(&scores(&app, "use"), "busy");
    assert_eq!(check["outcome"], "passed", "{check}");
    // What the host's samples saw it use is kept with its result: CPU time
    // (whatever share of a loaded machine it got) and memory.
    assert!(check["cpu_ms"].as_u64().unwrap_or(0) > 0, "{check}");
    assert!(check["max_rss_bytes"].as_u64().unwrap_or(0) > 0, "{check}");
    // Its pid file there went with it.
    let left = app_files_on_host(&sshd, |name| name.ends_with(".check-pid"));
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_running_check_counts_in_its_variant_s_usage() {
    // Six seconds of a busy shell: the sampler (every 2 s) sees it twice.
    let busy = "end=$(($(date +%s)+6)); while [ $(date +%s) -lt $end ]; do :; done";
    let app = app(Some(&format!("[checks]\nbusy = \"{busy}\"\n")));
    let run = app.request(json!({"RunVariants": {
        "count": 1, "name": "use", "profile": "exec",
        "command": ["sh", "-c", "echo x > work.txt; krad report idle -m done; sleep 600"],
        "prompt": "x"
    }}));
    let id = run["Variants"]["variants"][0]["terminal"].as_u64().unwrap();
    let idle = app.until(id, Duration::from_secs(30), |r| r["message"] == "done");
    assert_eq!(idle["state"], "idle", "{idle}");
    // While the check runs, the agent's usage has its processes (the agent's
    // own are two: `sh` and `sleep`, idle) and their CPU — whatever share of
    // a loaded machine's cores the busy shell gets (about a fifth at a load
    // of 10 on two cores: a loaded run saw less than 20 %).
    app.until(id, Duration::from_secs(30), |r| {
        r["usage"]["processes"].as_u64().unwrap_or(0) >= 3
            && r["usage"]["cpu_percent"].as_f64().unwrap_or(0.0) > 0.0
    });
    wait_scored(&app, "use");
    let check = check_of_named(&scores(&app, "use"), "busy");
    assert_eq!(check["outcome"], "passed", "{check}");
    assert!(check["cpu_ms"].as_u64().unwrap() >= 1000, "{check}");
    assert!(check["max_rss_bytes"].as_u64().unwrap() > 0, "{check}");
}
