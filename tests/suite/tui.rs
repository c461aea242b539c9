//! The keyboard home screen (`krad tui`), driven as a person would: the real
//! UI in a tmux server of its own (a private socket under the test's temp
//! directory), keys sent with send-keys, the screen read with capture-pane,
//! against a real app running plain programs. Every wait is a condition with
//! a deadline.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::apps::{Plain, krad_in};
use crate::support::{
    App, KRAD, Launch, app_with_first_commit, exit_code, git, listed, stderr, stretched, wait_until,
};

/// `krad tui` in a pane of a private tmux server.
struct Screen {
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Screen {
    /// Opens `krad tui` for the app whose api.json is `api_json`, on a
    /// terminal of `cols` × `rows`.
    fn open(api_json: &Path, cols: u16, rows: u16) -> Screen {
        Screen::open_with(api_json, cols, rows, &[])
    }

    /// [`Screen::open`] with more environment for the UI.
    fn open_with(api_json: &Path, cols: u16, rows: u16, env: &[(&str, &str)]) -> Screen {
        Screen::open_running(&format!("'{KRAD}' tui"), api_json, cols, rows, env)
    }

    /// A pane running `ui` (a shell command that runs the UI).
    fn open_running(
        ui: &str,
        api_json: &Path,
        cols: u16,
        rows: u16,
        env: &[(&str, &str)],
    ) -> Screen {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("tmux.sock");
        let config = dir.path().join("tmux.conf");
        std::fs::write(&config, "set -g status off\n").unwrap();
        // The pane stays after the UI ends, to read how it left the terminal:
        // its line discipline's modes (raw mode off: `icanon echo`), then
        // the UI's exit status.
        let command = format!(
            r#"{ui}; s=$?; echo "tty: $(stty -a | tr ' ;' '\n\n' | grep -E '^-?(icanon|echo)$' | tr '\n' ' ')"; echo "ui ended: $s"; exec sleep 600"#
        );
        let status = Command::new("tmux")
            .arg("-S")
            .arg(&socket)
            .arg("-f")
            .arg(&config)
            .args([
                "new-session",
                "-c",
                &dir.path().display().to_string(),
                "-d",
                "-s",
                "tui",
                "-x",
                &cols.to_string(),
                "-y",
                &rows.to_string(),
            ])
            .arg(command)
            .env("KRAD_ADE_API_JSON", api_json)
            .env("HOME", dir.path())
            .env_remove("KRAD_ADE_ENDPOINT")
            .env_remove("KRAD_ADE_TOKEN")
            .env_remove("KRAD_ADE_TOKEN_FILE")
            .env_remove("KRAD_ADE_ENVIRONMENT")
            .env_remove("KRAD_ADE_TERMINAL")
            .env_remove("NO_COLOR")
            .env_remove("TMUX")
            .envs(env.iter().copied())
            .status()
            .unwrap();
        assert!(status.success(), "tmux did not start");
        Screen { socket, _dir: dir }
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The screen's text.
    fn text(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "tui"])
    }

    /// The screen's text with its colours (SGR sequences).
    fn colours(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-e", "-t", "tui"])
    }

    /// A tmux format of the pane (`#{alternate_on}`, …).
    fn pane(&self, format: &str) -> String {
        self.tmux(&["display-message", "-p", "-t", "tui", format])
            .trim()
            .to_owned()
    }

    /// Presses keys (tmux's names).
    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "tui"];
        args.extend(keys);
        self.tmux(&args);
    }

    /// Types text as it is.
    fn type_text(&self, text: &str) {
        self.tmux(&["send-keys", "-t", "tui", "-l", text]);
    }

    /// Waits until the screen satisfies `check`; returns it.
    fn until(&self, what: &str, check: impl Fn(&str) -> bool) -> String {
        let limit = stretched(Duration::from_secs(20));
        let until = Instant::now() + limit;
        loop {
            let text = self.text();
            if check(&text) {
                return text;
            }
            assert!(
                Instant::now() < until,
                "the screen never showed {what} within {limit:?}:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(30));
        }
    }

    /// Waits until the screen shows `text`.
    fn until_shows(&self, text: &str) -> String {
        self.until(&format!("{text:?}"), |screen| screen.contains(text))
    }

    /// Waits until the UI ended; returns its exit status.
    fn until_ended(&self) -> String {
        let text = self.until("the UI's end", |s| s.contains("ui ended: "));
        let status = text.split("ui ended: ").nth(1).unwrap_or("");
        status.lines().next().unwrap_or("").trim().to_owned()
    }

    /// The terminal's line discipline after the UI ended (`icanon echo`
    /// when raw mode is off).
    fn tty_modes(&self) -> String {
        let text = self.until("the terminal's modes", |s| s.contains("ui ended: "));
        let modes = text.split("tty: ").nth(1).unwrap_or("");
        modes.lines().next().unwrap_or("").trim().to_owned()
    }

    /// Asserts the terminal is as it was before the UI: the main screen, the
    /// cursor shown, raw mode off.
    fn assert_given_back(&self) {
        assert_eq!(self.pane("#{alternate_on}"), "0");
        assert_eq!(self.pane("#{cursor_flag}"), "1");
        assert_eq!(self.tty_modes(), "icanon echo");
    }

    /// The pid of `krad tui` (a child of the pane's shell).
    fn ui_pid(&self) -> i32 {
        let shell = self.pane("#{pane_pid}");
        let children =
            std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children")).unwrap();
        children.split_whitespace().next().unwrap().parse().unwrap()
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        self.tmux(&["kill-server"]);
    }
}

/// The app's agents (List).
fn agents(app: &App) -> Vec<Value> {
    app.request(json!("List"))["Agents"]
        .as_array()
        .unwrap()
        .clone()
}

/// Whether an SGR-coloured line sets foreground colour `n` (0–7), in either
/// of the forms tmux writes.
fn has_fg(line: &str, n: u8) -> bool {
    line.contains(&format!("\x1b[3{n}m")) || line.contains(&format!("38;5;{n}m"))
}

/// The line of the screen that contains `text`.
fn line_of<'s>(screen: &'s str, text: &str) -> &'s str {
    screen.lines().find(|l| l.contains(text)).unwrap_or("")
}

/// The home screen (100 × 30) on `app`, once it shows `shown`.
fn home_showing(app: &App, shown: &str) -> Screen {
    let screen = Screen::open(&app.api_json, 100, 30);
    screen.until_shows(shown);
    screen
}

/// An agent named `name` that says `greeting`, reads a line and says it back
/// after `prefix:`; once it said `greeting`.
fn reader(app: &App, name: &str, greeting: &str, prefix: &str) -> u64 {
    let script = format!(r#"echo {greeting}; read line; echo "{prefix}:$line"; sleep 600"#);
    let id = spawn_named(app, name, &script);
    app.until_screen(id, greeting);
    id
}

/// Enter attaches to the `reader` (greeting `ready`, prefix `got`), `hello`
/// typed reaches it, and the detach key is pressed.
fn attach_and_type_hello(screen: &Screen) {
    screen.keys(&["Enter"]);
    screen.until("the agent's own screen", |s| {
        s.contains("ready") && !s.contains("q quit")
    });
    screen.type_text("hello");
    screen.keys(&["Enter"]);
    screen.until_shows("got:hello");
    screen.keys(&["C-\\"]);
}

fn spawn_named(app: &App, name: &str, script: &str) -> u64 {
    app.spawn(json!({"profile": "exec", "name": name, "command": ["sh", "-c", script]}))["terminal"]
        .as_u64()
        .unwrap()
}

/// The list follows the app live (a new agent, a state), an agent that starts
/// asking is counted and highlighted, and q leaves with every agent running
/// and the terminal given back.
#[test]
fn the_list_is_live_and_q_leaves_the_agents_running() {
    let app = App::start();
    spawn_named(&app, "first-agent", "sleep 600");
    let screen = home_showing(&app, "first-agent");
    assert!(screen.text().contains("1 agent "), "{}", screen.text());
    let second = spawn_named(&app, "second-agent", "sleep 600");
    screen.until("two agents", |s| {
        s.contains("second-agent") && s.contains("2 agents")
    });
    let token = app.terminal_token(second);
    let reported = app.call_as(
        second,
        &token,
        json!({"Report": {"state": "asking", "message": "may I deploy?"}}),
    );
    assert_eq!(reported, json!("Ok"));
    let text = screen.until("the asking agent", |s| {
        s.contains("1 asking") && line_of(s, "second-agent").contains("may I deploy?")
    });
    let row = line_of(&text, "second-agent");
    assert!(row.contains("asking"), "{row}");
    // Asking sorts first in its group.
    let first_at = text.find("first-agent").unwrap();
    assert!(text.find("second-agent").unwrap() < first_at, "{text}");
    // Highlighted (yellow) while not selected.
    let coloured = screen.colours();
    let row = line_of(&coloured, "second-agent");
    assert!(row.contains("43m") || row.contains("48;5;3m"), "{row:?}");
    screen.keys(&["q"]);
    assert_eq!(screen.until_ended(), "0");
    assert_eq!(screen.pane("#{alternate_on}"), "0");
    let listed = agents(&app);
    assert_eq!(listed.len(), 2);
    assert!(listed.iter().all(|a| a["state"] != "exited"), "{listed:?}");
}

/// The preview shows the selected terminal's screen, its colours kept.
#[test]
fn the_preview_shows_the_terminal_with_its_colours() {
    let app = App::start();
    spawn_named(
        &app,
        "painter",
        r"printf '\033[31mpreview-marker\033[0m plain\n'; sleep 600",
    );
    let screen = home_showing(&app, "preview-marker plain");
    let coloured = screen.colours();
    let row = line_of(&coloured, "preview-marker");
    assert!(has_fg(row, 1), "{row:?}");
}

/// The diff tab shows a worktree's changed files and the patch, coloured.
#[test]
fn the_diff_tab_shows_a_worktree_change() {
    let app = app_with_first_commit(&[("README.md", b"hello\n")], None);
    let created = app.request(json!({"CreateWorktree": {"name": "feat"}}));
    let path = PathBuf::from(created["Environment"]["path"].as_str().unwrap());
    std::fs::write(path.join("notes.txt"), "a line the diff shows\n").unwrap();
    app.spawn(
        json!({"environment": "feat", "profile": "exec", "name": "differ",
        "command": ["sleep", "600"]}),
    );
    let screen = Screen::open(&app.api_json, 110, 30);
    screen.until_shows("differ");
    screen.keys(&["Tab"]);
    let text = screen.until_shows("+a line the diff shows");
    assert!(text.contains("notes.txt"), "{text}");
    assert!(text.contains("environment feat"), "{text}");
    let coloured = screen.colours();
    assert!(
        has_fg(line_of(&coloured, "+a line the diff shows"), 2),
        "{coloured:?}"
    );
}

/// `a` opens the agent's asks; its options are keys; the answer reaches it.
#[test]
fn answering_an_ask_with_its_option_key() {
    let app = App::start();
    let id = spawn_named(
        &app,
        "chooser",
        r#"krad raw '{"Ask":{"kind":"choice","title":"Which database?","options":[{"id":"pg","label":"Postgres"},{"id":"lite","label":"SQLite"}]}}'; sleep 600"#,
    );
    app.until_state(id, "asking");
    let screen = home_showing(&app, "chooser");
    screen.keys(&["a"]);
    // The asks tab: the ask and its options on keys.
    screen.until("the asks tab", |s| {
        s.contains("Which database?") && s.contains("a then")
    });
    screen.keys(&["a"]);
    screen.until("the options on keys", |s| {
        s.contains("1  Postgres") && s.contains("2  SQLite")
    });
    screen.keys(&["2"]);
    screen.until_shows("answered");
    app.until_screen(id, "lite");
    assert!(listed(&app, "Asks").is_empty());
}

/// Enter attaches to the agent's real TUI (keys reach it), the detach key
/// comes back to the list, the agent goes on.
#[test]
fn attaching_and_detaching() {
    let app = App::start();
    let id = reader(&app, "reader", "ready", "got");
    let screen = home_showing(&app, "reader");
    attach_and_type_hello(&screen);
    let text = screen.until_shows("detached from terminal 1");
    assert!(line_of(&text, "reader").contains("working"), "{text}");
    assert_ne!(app.record(id)["state"], "exited");
}

/// `n` starts an agent from the form; `x` closes it after asking.
#[test]
fn creating_and_closing_an_agent() {
    let app = App::start();
    let screen = home_showing(&app, "No agents yet");
    screen.keys(&["n"]);
    screen.until_shows("New agent");
    screen.type_text("shell");
    screen.keys(&["Tab", "Tab", "Tab"]);
    screen.type_text("made-in-tui");
    screen.keys(&["Enter"]);
    screen.until_shows("started terminal");
    screen.until("the new agent's row", |s| {
        line_of(s, "made-in-tui").starts_with(char::is_numeric)
    });
    let listed = agents(&app);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["name"], "made-in-tui");
    assert_eq!(listed[0]["profile"], "shell");
    screen.keys(&["x"]);
    screen.until_shows("Close terminal");
    screen.keys(&["y"]);
    screen.until_shows("closed terminal");
    let until = Instant::now() + stretched(Duration::from_secs(20));
    while !agents(&app).is_empty() {
        assert!(Instant::now() < until, "the agent was never closed");
        std::thread::sleep(Duration::from_millis(50));
    }
    screen.until_shows("No agents yet");
}

/// `p` on a variant shows the pick's dry run first; `y` picks it.
#[test]
fn picking_a_variant_after_its_dry_run() {
    let app = app_with_first_commit(&[("README.md", b"hello\n")], None);
    let answer = app.request(json!({"RunVariants": {
        "count": 2, "name": "login", "profile": "exec",
        "command": ["sh", "-c", "echo \"variant of $KRAD_ADE_ENVIRONMENT\" > \"result-$KRAD_ADE_ENVIRONMENT.txt\""],
        "prompt": "fix it"
    }}));
    let variants: Vec<Value> = answer["Variants"]["variants"].as_array().unwrap().clone();
    for v in &variants {
        app.until_state(v["terminal"].as_u64().unwrap(), "exited");
    }
    let screen = Screen::open(&app.api_json, 110, 32);
    screen.until_shows("variants login");
    screen.keys(&["p"]);
    let text = screen.until_shows("Pick variant 1 of login");
    assert!(text.contains("result-login-1.txt"), "{text}");
    let repo = app.dir.path().join("repo");
    assert!(
        !repo.join("result-login-1.txt").exists(),
        "the dry run changed nothing"
    );
    screen.keys(&["y"]);
    screen.until_shows("picked variant 1 of login");
    assert_eq!(
        std::fs::read_to_string(repo.join("result-login-1.txt")).unwrap(),
        "variant of login-1\n"
    );
    assert!(git(&repo, &["log", "--oneline"]).lines().count() >= 2);
}

/// `P` on a variant shows its group's scores, the ranking and the best
/// one's dry run; `y` picks that one (docs/environments.md, "Scored variants").
#[test]
fn picking_the_best_variant_after_its_scores_and_dry_run() {
    let config = "[checks]\nparallel = 1\ntest = \"test \\\"$(cat verdict)\\\" = pass\"\n";
    let app = app_with_first_commit(&[("README.md", b"hello\n")], Some(config));
    app.answered(
        json!({"RunVariants": {
            "count": 2, "name": "best", "profile": "exec",
            "command": ["sh", "-c", "n=${KRAD_ADE_ENVIRONMENT##*-}; if [ $n = 2 ]; then echo pass; else echo fail; fi > verdict"],
            "prompt": "fix it"
        }}),
        "Variants",
    );
    let waited =
        app.request(json!({"Wait": {"group": "best", "scored": true, "timeout_secs": 60}}));
    assert!(waited["Agents"].is_array(), "{waited}");
    let screen = Screen::open(&app.api_json, 140, 40);
    screen.until_shows("variants best");
    screen.keys(&["P"]);
    let text = screen.until_shows("Best: variant 2");
    assert!(text.contains("test passed"), "{text}");
    assert!(text.contains("test failed(1)"), "{text}");
    assert!(text.contains("Pick variant 2 of best"), "{text}");
    let repo = app.dir.path().join("repo");
    assert!(
        !repo.join("verdict").exists(),
        "the dry run changed nothing"
    );
    screen.keys(&["y"]);
    screen.until_shows("picked variant 2 of best");
    assert_eq!(
        std::fs::read_to_string(repo.join("verdict")).unwrap(),
        "pass\n"
    );
}

/// `P` where no variant passed: the scoreboard and why, nothing picked; `y`
/// shows the dry run of the first ranked instead (picked only on another `y`).
#[test]
fn no_best_variant_shows_the_scores_and_picks_nothing() {
    let config = "[checks]\ntest = \"echo nope; exit 3\"\n";
    let app = app_with_first_commit(&[("README.md", b"hello\n")], Some(config));
    app.answered(
        json!({"RunVariants": {
            "count": 2, "name": "worse", "profile": "exec",
            "command": ["sh", "-c", "echo $KRAD_ADE_ENVIRONMENT > mine.txt"], "prompt": "x"
        }}),
        "Variants",
    );
    let waited =
        app.request(json!({"Wait": {"group": "worse", "scored": true, "timeout_secs": 60}}));
    assert!(waited["Agents"].is_array(), "{waited}");
    let screen = Screen::open(&app.api_json, 140, 40);
    screen.until_shows("variants worse");
    screen.keys(&["P"]);
    let text = screen.until_shows("No pick by rule: no variant passed");
    assert!(text.contains("test failed(3)"), "{text}");
    assert!(text.contains("conflicts #2"), "{text}");
    // Its wrapped lines do not push the keys out of the dialog.
    assert!(text.contains("y yes"), "{text}");
    screen.keys(&["y"]);
    let text = screen.until_shows("of worse: branch krad/worse-");
    assert!(text.contains("mine.txt"), "{text}");
    let repo = app.dir.path().join("repo");
    assert!(!repo.join("mine.txt").exists(), "nothing was picked");
}

/// The screen refits when the terminal changes size, down to very small.
#[test]
fn a_resize_refits_the_screen() {
    let app = App::start();
    spawn_named(&app, "resized", "sleep 600");
    let screen = Screen::open(&app.api_json, 120, 30);
    screen.until("the wide columns", |s| {
        s.contains("ENV/GROUP") && s.contains("resized")
    });
    screen.tmux(&["resize-window", "-t", "tui", "-x", "80", "-y", "24"]);
    let text = screen.until("the 80-column layout", |s| {
        !s.contains("ENV/GROUP") && s.contains("resized") && s.contains("q quit")
    });
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
    screen.tmux(&["resize-window", "-t", "tui", "-x", "30", "-y", "8"]);
    screen.until("the tiny layout", |s| {
        s.lines().count() <= 8 && s.contains("krad")
    });
    screen.tmux(&["resize-window", "-t", "tui", "-x", "120", "-y", "30"]);
    screen.until("the wide columns again", |s| {
        s.contains("ENV/GROUP") && s.contains("resized")
    });
    assert!(!screen.text().contains("ui ended"), "{}", screen.text());
}

/// When the app stops the UI says so; when it is back the UI follows it again.
#[test]
fn the_app_stopping_and_coming_back() {
    let app = App::start();
    spawn_named(&app, "before-stop", "sleep 600");
    let api_json = app.api_json.clone();
    let screen = Screen::open(&api_json, 100, 30);
    screen.until_shows("before-stop");
    let dir = app.stop_keep_dir();
    screen.until_shows("app stopped: reconnecting");
    let app = App::launch(Launch {
        reuse: Some(dir),
        ..Launch::default()
    });
    assert_eq!(app.api_json, api_json);
    spawn_named(&app, "restarted", "sleep 600");
    screen.until("the app's agents again", |s| {
        s.contains("restarted") && !s.contains("reconnecting")
    });
}

/// SIGTERM ends the UI with the terminal given back.
#[test]
fn sigterm_gives_the_terminal_back() {
    let app = App::start();
    spawn_named(&app, "still-here", "sleep 600");
    let screen = home_showing(&app, "still-here");
    assert_eq!(screen.pane("#{alternate_on}"), "1");
    let pid = screen.ui_pid();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(screen.until_ended(), "0");
    screen.assert_given_back();
    assert_eq!(agents(&app).len(), 1);
}

/// A panic of the UI's loop gives the terminal back (raw mode off, the main
/// screen, the cursor shown) before the panic's message is printed; a panic
/// on another of its threads does too, and ends the UI rather than leave it
/// half alive. The panic is the tests' own: a key that panics only when a
/// variable that only tests set names it.
#[test]
fn a_panic_gives_the_terminal_back() {
    for (panic, thread) in [("!", "'main'"), ("thread:!", "'krad-tui-test-panic'")] {
        a_panic_gives_the_terminal_back_on(panic, thread);
    }
}

fn a_panic_gives_the_terminal_back_on(panic: &str, thread: &str) {
    let app = App::start();
    spawn_named(&app, "still-here", "sleep 600");
    let env = [("KRAD_TUI_TEST_PANIC_KEY", panic), ("RUST_BACKTRACE", "0")];
    let screen = Screen::open_with(&app.api_json, 100, 30, &env);
    screen.until_shows("still-here");
    assert_eq!(screen.pane("#{alternate_on}"), "1");
    screen.keys(&["!"]);
    assert_eq!(screen.until_ended(), "101");
    screen.assert_given_back();
    let text = screen.text();
    assert!(
        text.contains("KRAD_TUI_TEST_PANIC_KEY: ! pressed"),
        "{text}"
    );
    assert!(text.contains(&format!("thread {thread}")), "{text}");
    assert_eq!(agents(&app).len(), 1);
}

/// `s` types text into the agent (Enter after it), `--key` sends keys; `r`
/// renames it.
#[test]
fn sending_and_renaming() {
    let app = App::start();
    let id = reader(&app, "listener", "waiting", "heard");
    let screen = home_showing(&app, "listener");
    screen.keys(&["s"]);
    screen.until_shows("Send to terminal");
    screen.type_text("over the bus");
    screen.keys(&["Enter"]);
    screen.until_shows("sent to terminal");
    app.until_screen(id, "heard:over the bus");
    screen.until_shows("heard:over the bus");
    screen.keys(&["r"]);
    screen.until_shows("Rename terminal");
    screen.keys(&["C-u"]);
    screen.type_text("renamed");
    screen.keys(&["Enter"]);
    screen.until("the new name", |s| {
        s.contains("is now renamed") && line_of(s, "renamed").starts_with(char::is_numeric)
    });
    assert_eq!(app.record(id)["name"], "renamed");
}

/// `NO_COLOR` takes the colours away, the preview's included; the text stays.
#[test]
fn no_color_is_honoured() {
    let app = App::start();
    spawn_named(
        &app,
        "painter",
        r"printf '\033[31mred-marker\033[0m\n'; sleep 600",
    );
    let screen = Screen::open_with(&app.api_json, 100, 30, &[("NO_COLOR", "1")]);
    screen.until_shows("red-marker");
    let coloured = screen.colours();
    for text in ["red-marker", "painter", "working"] {
        let line = line_of(&coloured, text);
        assert!(
            !line.contains("38;5;") && !(0..8).any(|n| has_fg(line, n)),
            "{text}: {line:?}"
        );
    }
}

/// The terminal going away (its pane killed: SIGHUP, the tty gone) ends the
/// UI; it does not stay behind.
#[test]
fn a_closed_terminal_ends_the_ui() {
    let app = App::start();
    spawn_named(&app, "left-running", "sleep 600");
    let screen = home_showing(&app, "left-running");
    let pid = screen.ui_pid();
    screen.tmux(&["kill-server"]);
    let until = Instant::now() + stretched(Duration::from_secs(20));
    while Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z"))
    {
        assert!(
            Instant::now() < until,
            "krad tui stayed after its terminal went"
        );
        std::thread::sleep(Duration::from_millis(30));
    }
    assert_eq!(agents(&app).len(), 1);
}

/// `krad` alone off a terminal (a script, a pipe) prints the help and exits
/// 2, as it did before the home screen; `krad tui` there says it needs one.
#[test]
fn without_a_terminal_krad_alone_prints_the_help() {
    let app = App::start();
    let out = crate::support::krad_cmd(&app.api_json, &[], &[]);
    assert_eq!(crate::support::exit_code(&out), 2);
    assert!(
        crate::support::stderr(&out).contains("Usage: krad"),
        "{out:?}"
    );
    let out = crate::support::krad_cmd(&app.api_json, &["tui"], &[]);
    assert_eq!(crate::support::exit_code(&out), 2);
    assert!(
        crate::support::stderr(&out).contains("needs a terminal"),
        "{out:?}"
    );
}

/// Issue 47: CPU, memory and cost are live too. An agent's cost goes up
/// while its state does not (no new rev, only the sampler's `Sampled` line):
/// its cell and the header's total follow without a key pressed.
#[test]
fn a_cost_that_changes_without_a_state_change_is_shown_live() {
    let dir = tempfile::tempdir().unwrap();
    let app = app_with_first_commit(
        &[("README.md", b"hello\n")],
        Some("[prices.test-model]\ninput = 2.0\noutput = 10.0\n"),
    );
    let folder = dir.path().display().to_string();
    let id = app.spawn(json!({"profile": "exec", "name": "spender",
        "command": ["sh", "-c", crate::waits::SPENDER, "sh", folder]}))["terminal"]
        .as_u64()
        .unwrap();
    let before = app.until(id, stretched(Duration::from_secs(30)), |r| {
        r["state"] == "idle" && r["tokens"]["cost_usd"] == 0.002
    });
    let screen = Screen::open(&app.api_json, 120, 30);
    screen.until("the first cost", |s| {
        line_of(s, "spender").contains("0.002")
    });
    std::fs::write(dir.path().join("go"), "").unwrap();
    let text = screen.until("the new cost", |s| line_of(s, "spender").contains("0.006"));
    assert!(line_of(&text, "spender").contains("idle"), "{text}");
    let after = app.record(id);
    assert_eq!(
        after["rev"], before["rev"],
        "no change but the sample: {after}"
    );
}

/// Issue 47: Esc pressed quickly before a key reaches the UI in one read,
/// as the bytes of Alt+key; it is Esc then the key. Leaving the filter and
/// moving down at once, then leaving a form and quitting at once.
#[test]
fn esc_then_a_key_at_once_is_esc_then_the_key() {
    let app = App::start();
    spawn_named(&app, "first", "sleep 600");
    spawn_named(&app, "second", "sleep 600");
    let screen = Screen::open(&app.api_json, 100, 30);
    screen.until("both agents", |s| {
        s.contains("first") && s.contains("second")
    });
    screen.keys(&["/"]);
    screen.type_text("sec");
    screen.until("the filter", |s| !s.contains("first"));
    // Both bytes in one write, as a quick hand (or Alt+j) sends them.
    screen.type_text("\x1bj");
    let text = screen.until("the filter cleared", |s| {
        s.contains("first") && s.contains("second")
    });
    assert!(!text.contains("/sec"), "{text}");
    screen.keys(&["n"]);
    screen.until_shows("profile");
    screen.type_text("\x1bq");
    assert_eq!(screen.until_ended(), "0");
    assert_eq!(screen.pane("#{alternate_on}"), "0");
}

/// Issue 47: over SSH the UI is a terminal program like any other. Through
/// OpenSSH on loopback (`ssh -tt`, the pty sshd gives): the list, attaching
/// to an agent (keys reach it) and detaching, and `q` with the terminal
/// given back.
#[test]
fn over_ssh_the_list_attaching_and_detaching() {
    let sshd = crate::ssh::Sshd::start();
    let app = App::start();
    let id = reader(&app, "reader", "ready", "got");
    let d = sshd.dir.path().display();
    let ui = format!(
        "ssh -tt -F none -p {port} -i '{d}/client_key' -o IdentitiesOnly=yes -o BatchMode=yes \
         -o StrictHostKeyChecking=accept-new -o 'UserKnownHostsFile={d}/known_hosts' 127.0.0.1 \
         \"KRAD_ADE_API_JSON='{api}' exec '{KRAD}' tui\"",
        port = sshd.port,
        api = app.api_json.display(),
    );
    let screen = Screen::open_running(&ui, &app.api_json, 100, 30, &[]);
    let text = screen.until_shows("reader");
    assert!(line_of(&text, "reader").contains("working"), "{text}");
    assert_eq!(screen.pane("#{alternate_on}"), "1");
    attach_and_type_hello(&screen);
    screen.until_shows("detached from terminal 1");
    screen.keys(&["q"]);
    assert_eq!(screen.until_ended(), "0");
    screen.assert_given_back();
    assert_ne!(app.record(id)["state"], "exited");
}

/// `A` lists the apps running on this machine and puts the screen on another
/// repository's: its agents and repository, nothing more of the first (its
/// stream is let go, and its changes do not show), then back.
#[test]
fn a_puts_the_screen_on_another_repository_s_app_and_back() {
    let home = tempfile::tempdir().unwrap();
    let repos: Vec<PathBuf> = ["alpha", "beta"]
        .iter()
        .map(|name| {
            let dir = home.path().join(name);
            std::fs::create_dir_all(&dir).unwrap();
            crate::support::git_repo(&dir)
        })
        .collect();
    let _apps: Vec<Plain> = repos.iter().map(|r| Plain::start(r, home.path())).collect();
    let spawn_in = |repo: &Path, name: &str| {
        let out = krad_in(
            repo,
            home.path(),
            &[
                "spawn",
                "--profile",
                "exec",
                "--name",
                name,
                "--",
                "sleep",
                "600",
            ],
        );
        assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
    };
    let subscribers = |repo: &Path| {
        let out = krad_in(repo, home.path(), &["stats", "--json"]);
        let stats: Value = serde_json::from_slice(&out.stdout).unwrap();
        stats["Stats"]["subscribers"].as_u64().unwrap()
    };
    spawn_in(&repos[0], "alpha-agent");
    spawn_in(&repos[1], "beta-agent");
    let env = crate::support::private_home(home.path());
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let ui = format!("'{KRAD}' --repo '{}' tui", repos[0].display());
    let screen = Screen::open_running(&ui, &home.path().join("no-api.json"), 100, 30, &env);
    screen.until_shows("alpha-agent");
    let header = |s: &str| s.lines().next().unwrap_or("").to_owned();

    screen.keys(&["A"]);
    let listed = screen.until("both apps listed", |s| {
        s.contains("apps on this machine") && s.contains("beta/repo") && s.contains("(this screen)")
    });
    // The picker's line of an app (the header names the repository too).
    let picker_line = |s: &str, name: &str| {
        s.lines()
            .find(|l| l.contains('│') && l.contains(name))
            .unwrap_or("")
            .to_owned()
    };
    assert!(
        picker_line(&listed, "alpha/repo").contains("(this screen)"),
        "{listed}"
    );
    assert!(picker_line(&listed, "beta/repo").contains("▸ "), "{listed}");
    screen.keys(&["Enter"]);
    screen.until("beta's agents and repository", |s| {
        s.contains("beta-agent") && !s.contains("alpha-agent") && header(s).contains("beta/repo")
    });
    wait_until(stretched(Duration::from_secs(10)), || {
        subscribers(&repos[0]) == 0 && subscribers(&repos[1]) == 1
    });
    // What changes in the app left does not show; the new one's does.
    spawn_in(&repos[0], "alpha-later");
    spawn_in(&repos[1], "beta-later");
    let text = screen.until_shows("beta-later");
    assert!(!text.contains("alpha-"), "{text}");

    screen.keys(&["A"]);
    screen.until("the picker on alpha", |s| {
        picker_line(s, "alpha/repo").contains("▸ ")
    });
    screen.keys(&["Enter"]);
    screen.until("alpha's agents again", |s| {
        s.contains("alpha-agent")
            && s.contains("alpha-later")
            && !s.contains("beta-")
            && header(s).contains("alpha/repo")
    });
    assert!(!screen.text().contains("other apps"));
    // An agent asking in beta shows in alpha's header, which says how to get there.
    let asks = format!("'{KRAD}' report asking -m 'may I?'; sleep 600");
    let out = krad_in(
        &repos[1],
        home.path(),
        &["spawn", "--profile", "exec", "--", "sh", "-c", &asks],
    );
    assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
    screen.until("beta's ask in alpha's header", |s| {
        header(s).contains("0 asking · 1 asking in other apps (A)")
    });
    // On beta the ask is the app's own; back on alpha it is counted again.
    screen.keys(&["A"]);
    screen.until("the picker on beta", |s| {
        picker_line(s, "beta/repo").contains("▸ ")
    });
    screen.keys(&["Enter"]);
    let on_beta = screen.until("beta's own ask", |s| {
        header(s).contains("beta/repo") && header(s).contains(" 1 asking ·")
    });
    assert!(!header(&on_beta).contains("other apps"), "{on_beta}");
    screen.keys(&["A"]);
    screen.until("the picker on alpha", |s| {
        picker_line(s, "alpha/repo").contains("▸ ")
    });
    screen.keys(&["Enter"]);
    screen.until("beta's ask in alpha's header again", |s| {
        s.contains("alpha-agent") && header(s).contains("1 asking in other apps (A)")
    });
    screen.keys(&["q"]);
    assert_eq!(screen.until_ended(), "0");
}
