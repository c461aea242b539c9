//! The page (docs/ui.md) in a real headless Chromium, driven over the DevTools
//! protocol: log in by `krad ui`'s URL; see an agent appear and change state;
//! type into its terminal and see the output; answer its ask; comment on a
//! diff line and see the comment arrive in the agent's terminal; pick a
//! variant after its dry run. With `KRAD_UI_SCREENSHOTS=dir` it writes a
//! screenshot of each view there (docs/ui.md shows them).
//!
//! `measure_…` (ignored: run it by name with `--ignored`) measures the board's
//! first paint with 100 agents and a keystroke's round trip through the page's
//! terminal against `krad attach`, for docs/PERFORMANCE.md.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::attach::Pty;
use crate::chromium::Chromium;
use crate::support::{App, app_with_first_commit, git};
use crate::ui::login_url;

const LONG: Duration = Duration::from_secs(30);

const ASK: &str = r#"{"Ask":{"kind":"permission","tool":{"name":"Bash","input":{"command":"rm -rf build"}},"tool_call_id":"toolu_ui"}}"#;

fn row(id: u64) -> String {
    format!("document.querySelector('#agents tr[data-terminal=\"{id}\"]')")
}

fn rows_text(id: u64) -> String {
    format!("document.querySelector('.term[data-terminal=\"{id}\"] .xterm-rows').innerText")
}

fn log_in(browser: &mut Chromium, app: &App) {
    browser.navigate(&login_url(app));
    browser.until(
        "document.querySelector('#link').classList.contains('up')",
        LONG,
    );
}

#[test]
fn the_page_in_a_real_chromium_watches_types_answers_reviews_and_picks() {
    let app = app_with_first_commit(&[("src/lib.rs", b"fn one() -> u32 {\n    1\n}\n")], None);
    let created = app.request(json!({"CreateWorktree": {"name": "fix"}}));
    assert!(created["Environment"].is_object(), "{created}");
    let mut browser = Chromium::start();
    log_in(&mut browser, &app);
    browser.eval("document.body.dataset.agents || '0'");

    // An agent appears and changes state.
    let script = String::from(
        r#"printf 'fn one() -> u32 {\n    2\n}\n' > src/lib.rs; echo ready; read -r line; echo "got:$line"; krad raw '"#,
    ) + ASK
        + "'; krad report idle; cat";
    let id =
        app.spawn(
            json!({"profile": "exec", "environment": "fix", "command": ["sh", "-c", script]}),
        )["terminal"]
            .as_u64()
            .unwrap();
    browser.until(&format!("{} !== null", row(id)), LONG);

    // Its terminal: the output, then what is typed there, echoed back.
    browser.click(&format!("#agents tr[data-terminal=\"{id}\"] button.attach"));
    browser.until(&format!("{}.includes('ready')", rows_text(id)), LONG);
    browser.eval(&format!(
        "document.querySelector('.term[data-terminal=\"{id}\"] textarea').focus(), true"
    ));
    browser.type_text("hello");
    browser.press_enter();
    browser.until(&format!("{}.includes('got:hello')", rows_text(id)), LONG);
    browser.screenshot("#terminals", "terminals");

    // It asks: first on the board, notified, and a card with its options.
    browser.until(&format!("{}.dataset.state === 'asking'", row(id)), LONG);
    assert_eq!(
        browser.eval("document.querySelector('#agents tr').dataset.terminal"),
        id.to_string(),
        "the agent that needs the user comes first"
    );
    assert!(browser.eval("window.kradNotifications || 0").as_u64() >= Some(1));
    let card = format!(".card.ask[data-terminal=\"{id}\"]");
    browser.until(&format!("document.querySelector('{card}') !== null"), LONG);
    let options = browser.eval(&format!(
        "[...document.querySelectorAll('{card} button[data-option]')].map(b => b.dataset.option)"
    ));
    assert_eq!(options, json!(["allow", "allow-always", "deny"]));
    browser.screenshot("#board", "board");
    browser.screenshot("#asks", "asks");
    browser.click(&format!("{card} button[data-option=\"allow\"]"));
    app.until_screen(id, "\"option\":\"allow\"");
    browser.until(&format!("{}.dataset.state === 'idle'", row(id)), LONG);
    browser.until("document.querySelector('#no-asks').hidden === false", LONG);

    // A comment on a line of its diff reaches it as one message.
    browser.until(
        "document.querySelector('button.env[data-env=\"fix\"]') !== null",
        LONG,
    );
    browser.click("button.env[data-env=\"fix\"]");
    let added = ".diff[data-path=\"src/lib.rs\"] .ln.add";
    browser.until(&format!("document.querySelector('{added}') !== null"), LONG);
    assert_eq!(
        browser.eval(&format!("document.querySelector('{added}').dataset.line")),
        "2"
    );
    browser.click(&format!("{added} .no"));
    browser.type_text("use a named constant");
    browser.until("!document.querySelector('.send-review').disabled", LONG);
    browser.screenshot("#env-view", "review");
    browser.click(".send-review");
    browser.until(
        "document.querySelector('.review-status.sent') !== null",
        LONG,
    );
    let screen = app.until_screen(id, "use a named constant");
    assert!(
        screen.contains("Review comments on fix (1 comment)"),
        "{screen}"
    );
    assert!(screen.contains("src/lib.rs:2"), "{screen}");
    browser.until(
        &format!("{}.includes('use a named constant')", rows_text(id)),
        LONG,
    );
    // Kept with the environment: the next review shows what was asked.
    browser.click("button.env[data-env=\"fix\"]");
    browser.until(
        "[...document.querySelectorAll('#env-view .reviews')].some(r => r.innerText.includes('src/lib.rs:2 — use a named constant (unchanged)'))",
        LONG,
    );
    // The agent changes the line: the next review says so.
    let worktree = std::path::PathBuf::from(created["Environment"]["path"].as_str().unwrap());
    std::fs::write(
        worktree.join("src/lib.rs"),
        "fn one() -> u32 {\n    ONE\n}\n",
    )
    .unwrap();
    browser.click("button.env[data-env=\"fix\"]");
    browser.until(
        "[...document.querySelectorAll('#env-view .earlier-comment')].some(c => c.innerText.includes('(now: ONE)'))",
        LONG,
    );

    // Variants side by side; the pick shows its dry run first.
    let variants = app.request(json!({"RunVariants": {
        "count": 2, "name": "login", "profile": "exec", "prompt": "x",
        "command": ["sh", "-c", "echo \"from $KRAD_ADE_ENVIRONMENT\" > \"result-$KRAD_ADE_ENVIRONMENT.txt\""]
    }}));
    for v in variants["Variants"]["variants"].as_array().unwrap() {
        app.until_state(v["terminal"].as_u64().unwrap(), "exited");
    }
    // Issue 48, item 15: an exited agent's row offers no send.
    let exited = variants["Variants"]["variants"][0]["terminal"]
        .as_u64()
        .unwrap();
    let gone = format!("#agents tr[data-terminal=\"{exited}\"][data-state=\"exited\"]");
    browser.until(&format!("document.querySelector('{gone}') !== null"), LONG);
    assert_eq!(
        browser.eval(&format!(
            "document.querySelector('{gone} button.send') === null"
        )),
        json!(true)
    );
    let first = variants["Variants"]["variants"][0]["environment"]
        .as_str()
        .unwrap()
        .to_owned();
    let pick = ".variant[data-group=\"login\"][data-variant=\"1\"] button.pick";
    browser.until(&format!("document.querySelector('{pick}') !== null"), LONG);
    browser.until(
        "[...document.querySelectorAll('.variant[data-group=\"login\"]')].every(v => v.innerText.includes('1 files'))",
        LONG,
    );
    browser.click(pick);
    browser.until("document.querySelector('.dry-run') !== null", LONG);
    let dry = browser.eval("document.querySelector('.dry-run').innerText");
    assert!(
        dry.as_str()
            .unwrap()
            .contains(&format!("result-{first}.txt")),
        "{dry}"
    );
    assert!(
        !app.dir
            .path()
            .join("repo")
            .join(format!("result-{first}.txt"))
            .exists(),
        "the dry run changed nothing"
    );
    browser.screenshot("#environments", "variants");
    browser.click(".confirm-pick");
    browser.until(
        "document.querySelector('#pick-result .picked') !== null",
        LONG,
    );
    let repo = app.dir.path().join("repo");
    assert!(git(&repo, &["ls-files"]).contains(&format!("result-{first}.txt")));
    // Issue 48, item 15: the group, picked, says which it kept and offers no
    // pick any more.
    browser.until(
        "[...document.querySelectorAll('#groups h3')].some(h => h.innerText.includes('picked variant 1'))",
        LONG,
    );
    assert_eq!(
        browser.eval(&format!("document.querySelector('{pick}') === null")),
        json!(true)
    );

    // The forms: spawn an agent, then close it after the confirmation.
    browser.eval(
        "(() => { const f = document.querySelector('#spawn-form'); f.profile.value = 'exec'; \
         f.name.value = 'from-the-page'; f.command.value = 'sleep 600'; \
         f.querySelector('button').click(); return true; })()",
    );
    browser.until(
        "document.querySelector('#form-result').innerText.startsWith('started from-the-page')",
        LONG,
    );
    let spawned = app.request(json!("List"))["Agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "from-the-page")
        .map(|a| a["terminal"].as_u64().unwrap())
        .expect("the form's Spawn made an agent");
    browser.eval(&format!(
        "(() => {{ const f = document.querySelector('#close-form'); f.target.value = '{spawned}'; \
         f.querySelector('button[type=submit]').click(); return true; }})()"
    ));
    let confirm = browser.eval("document.querySelector('#close-form .confirm').innerText");
    assert!(confirm.as_str().unwrap().contains("SIGHUP"), "{confirm}");
    assert!(
        app.record(spawned)["state"] != "exited",
        "nothing closes before the confirmation"
    );
    browser.click("#close-form .confirm button.danger");
    browser.until(&format!("{} === null", row(spawned)), LONG);
    // An environment's close names the agents it would end.
    app.answered(json!({"CreateWorktree": {"name": "doomed"}}), "Environment");
    let inside = app.spawn(json!({"profile": "exec", "environment": "doomed", "name": "inside", "command": ["sleep", "60"]}))["terminal"]
        .as_u64()
        .unwrap();
    browser.until(&format!("{} !== null", row(inside)), LONG);
    browser.eval(
        "(() => { const f = document.querySelector('#close-form'); f.target.value = ''; \
         f.environment.value = 'doomed'; f.querySelector('button[type=submit]').click(); \
         return true; })()",
    );
    let confirm = browser.eval("document.querySelector('#close-form .confirm').innerText");
    assert!(
        confirm
            .as_str()
            .unwrap()
            .contains(&format!("It ends 1 running agent: {inside} (inside).")),
        "{confirm}"
    );
    assert_ne!(app.record(inside)["state"], "exited");
}

/// A program printing nothing, in its own terminal, for the round trips.
fn echoing(app: &App) -> u64 {
    app.spawn_sh("echo ready; exec cat")
}

fn median(mut ms: Vec<f64>) -> f64 {
    ms.sort_by(f64::total_cmp);
    ms[ms.len() / 2]
}

/// The longest name a Spawn takes (100 characters, no space) and a message of
/// 400 without a space keep the board in the window: the name is cut, whole
/// in its title, the message wraps, and the state column still shows. An
/// agent asking with no Ask open has a card saying to answer in its terminal.
#[test]
fn a_long_name_and_message_keep_the_board_in_the_window() {
    let app = App::start();
    let name = "n".repeat(100);
    let script = format!("krad report idle --message {}; sleep 60", "m".repeat(400));
    let id = app.spawn(json!({"profile": "exec", "name": name, "command": ["sh", "-c", script]}))
        ["terminal"]
        .as_u64()
        .unwrap();
    let mut browser = Chromium::start();
    log_in(&mut browser, &app);
    browser.until(&format!("{}.dataset.state === 'idle'", row(id)), LONG);
    browser.until(
        &format!(
            "{}.querySelector('td.message').innerText.includes('mmmm')",
            row(id)
        ),
        LONG,
    );
    let fits = browser.eval(&format!(
        "(() => {{ const r = {}; const state = r.querySelector('td.state').getBoundingClientRect(); \
         return {{ page: document.documentElement.scrollWidth, window: window.innerWidth, \
         state: state.right, title: r.querySelector('td.name').title }}; }})()",
        row(id)
    ));
    assert!(
        fits["page"].as_f64() <= fits["window"].as_f64(),
        "the board is wider than the window: {fits}"
    );
    assert!(
        fits["state"].as_f64() <= fits["window"].as_f64(),
        "the state column is off the window: {fits}"
    );
    assert_eq!(fits["title"], name);

    // An agent asking in its own terminal (a report, no Ask to answer here)
    // has a card that says so, and "No agent is asking" is not shown.
    let asking = app.spawn_sh("krad report asking --message 'May I run the migrations?'; sleep 60");
    let card = format!(".card.asking[data-terminal=\"{asking}\"]");
    browser.until(
        &format!(
            "document.querySelector('{card}')?.innerText.includes('May I run the migrations?')"
        ),
        LONG,
    );
    assert_eq!(
        browser.eval("document.querySelector('#no-asks').hidden"),
        true
    );
    app.request(json!({"Close": {"target": asking}}));
    browser.until("document.querySelector('#no-asks').hidden === false", LONG);
}

#[test]
#[ignore = "a measurement for docs/PERFORMANCE.md, not a test: run it by name with --ignored"]
fn measure_board_first_paint_and_keystroke_round_trip() {
    let app = App::start();
    for _ in 0..100 {
        app.spawn_sh("exec sleep 600");
    }
    let mut browser = Chromium::start();
    let mut paints = Vec::new();
    for _ in 0..7 {
        browser.navigate(&login_url(&app));
        browser.until("document.body.dataset.agents === '100'", LONG);
        paints.push(browser.eval("window.kradFirstPaint").as_f64().unwrap());
    }
    // The CLI's board in the same run: `krad ls` of the same 100 agents.
    let ls: Vec<f64> = (0..7)
        .map(|_| {
            let start = Instant::now();
            assert!(app.krad(&["ls"]).status.success());
            start.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    let page = echoing(&app);
    browser.until(&format!("{} !== null", row(page)), LONG);
    browser.click(&format!(
        "#agents tr[data-terminal=\"{page}\"] button.attach"
    ));
    browser.until(&format!("{}.includes('ready')", rows_text(page)), LONG);
    let times = browser.eval(&format!(
        "(async () => {{ const t = window.kradTerminals.get({page}); const times = [];
           for (let i = 0; i < 200; i++) {{
             const start = performance.now();
             await new Promise((done) => {{ const d = t.term.onWriteParsed(() => {{ d.dispose(); done(); }}); t.term.input('k', true); }});
             times.push(performance.now() - start);
           }} return times; }})()"
    ));
    let page_ms: Vec<f64> = times
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_f64)
        .collect();
    let attach_ms = krad_attach_round_trips(&app, echoing(&app), 200);
    eprintln!(
        "board first paint, 100 agents: median {:.1} ms of {paints:?}; krad ls: median {:.1} ms\n\
         keystroke round trip: page {:.2} ms median (p90 {:.2}), krad attach {:.2} ms median (p90 {:.2})",
        median(paints.clone()),
        median(ls),
        median(page_ms.clone()),
        p90(&page_ms),
        median(attach_ms.clone()),
        p90(&attach_ms),
    );
}

fn p90(ms: &[f64]) -> f64 {
    let mut sorted = ms.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() * 9 / 10]
}

/// `krad attach` on a real pseudo-terminal: from a key written to the
/// terminal it runs in to its echo printed there, `n` times, in milliseconds.
fn krad_attach_round_trips(app: &App, target: u64, n: usize) -> Vec<f64> {
    let mut pty = Pty::open();
    let mut child = pty.krad_attach(app, &[&target.to_string()]);
    pty.until("ready");
    let mut times = Vec::new();
    for _ in 0..n {
        let before = pty.seen_len();
        let start = Instant::now();
        pty.type_keys(b"k");
        while pty.seen_len() == before {
            assert!(start.elapsed() < LONG, "no echo through krad attach");
            std::thread::sleep(Duration::from_micros(50));
        }
        times.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    let _ = child.kill();
    let _ = child.wait();
    times
}
