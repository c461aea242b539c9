//! The real agent CLIs (Claude Code, Codex CLI) in krad terminals, against the model
//! double: installs the pinned CLIs once into the target directory, and starts an app
//! whose HOME, config and model API are all the test's own, so that nothing touches
//! the real HOME, the network or a global install.

mod claude;
mod codex;
mod cost;
mod double;
mod sandboxed;
mod scored_lead;
mod screens;
mod smoke;
mod timeline;
mod turns;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub(crate) use double::{ModelDouble, SentUsage, Turn, last_user_text};

use crate::support::{App, Launch, git_repo};

/// A dummy Anthropic key; Claude Code remembers approved keys by their last 20 characters.
pub(crate) const ANTHROPIC_KEY: &str = "sk-ant-double-0123456789abcdefghijklmnopqrstuvwxyz";
/// A dummy key for the Codex provider (`env_key = "DOUBLE_API_KEY"`).
pub(crate) const CODEX_KEY: &str = "sk-double-0123456789abcdefghijklmnopqrstuvwxyz";
/// The model Codex asks for.
pub(crate) const CODEX_MODEL: &str = "gpt-5.1-codex";

/// Generous limits: these run real Node and Rust CLIs on a loaded 2-core CI.
pub(crate) const LONG: Duration = Duration::from_secs(90);

/// How many sends the turn tests make: 20, or `KRAD_REAL_SENDS` (to measure 100).
pub(crate) fn sends() -> usize {
    std::env::var("KRAD_REAL_SENDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(20)
}

/// Installs the pinned CLIs (once per test process, once per target directory
/// across processes) with `scripts/agent-clis.sh`; returns their bin directory.
/// `KRAD_AGENT_CLIS=previous` runs the tests against the previous pins.
pub(crate) fn clis() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("target"));
        let out = Command::new("bash")
            .arg(root.join("scripts/agent-clis.sh"))
            .arg(target.join("agent-clis"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "installing the agent CLIs failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    })
}

/// Which real CLI a test runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cli {
    Claude,
    Codex,
}

/// The environment every real CLI gets: a HOME and XDG dirs of the test's own, the
/// real CLIs first on PATH (before the suite's fakes), no telemetry or updates.
fn base_env(home: &Path) -> Vec<(String, String)> {
    let sub = |name: &str| {
        let dir = home.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        dir.display().to_string()
    };
    std::fs::write(
        home.join(".gitconfig"),
        "[user]\n\tname = krad test\n\temail = test@krad.invalid\n",
    )
    .unwrap();
    let path = format!(
        "{}:{}",
        clis().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    vec![
        ("HOME".into(), home.display().to_string()),
        ("XDG_CONFIG_HOME".into(), sub(".config")),
        ("XDG_CACHE_HOME".into(), sub(".cache")),
        ("XDG_DATA_HOME".into(), sub(".local/share")),
        ("XDG_STATE_HOME".into(), sub(".local/state")),
        ("npm_config_cache".into(), sub(".npm")),
        ("PATH".into(), path),
        // git inside the terminals must not read the real global config.
        (
            "GIT_CONFIG_GLOBAL".into(),
            home.join(".gitconfig").display().to_string(),
        ),
        ("GIT_CONFIG_NOSYSTEM".into(), "1".into()),
        ("NO_UPDATE_NOTIFIER".into(), "1".into()),
    ]
}

/// Claude Code's environment and config in `home`: onboarding done, the dummy key
/// approved, `repo` trusted, the model API at the double.
pub(crate) fn claude_env(home: &Path, repo: &Path, double: &ModelDouble) -> Vec<(String, String)> {
    let mut env = base_env(home);
    let key_tail = &ANTHROPIC_KEY[ANTHROPIC_KEY.len() - 20..];
    let config = json!({
        "hasCompletedOnboarding": true,
        "lastOnboardingVersion": "2.1.197",
        "numStartups": 1,
        "autoUpdates": false,
        "customApiKeyResponses": {"approved": [key_tail], "rejected": []},
        "projects": {repo.display().to_string(): {
            "hasTrustDialogAccepted": true,
            "hasCompletedProjectOnboarding": true,
            "allowedTools": [],
        }},
    });
    std::fs::write(home.join(".claude.json"), config.to_string()).unwrap();
    std::fs::create_dir_all(home.join(".claude")).unwrap();
    env.extend(
        [
            ("ANTHROPIC_BASE_URL", double.base_url()),
            ("ANTHROPIC_API_KEY", ANTHROPIC_KEY.into()),
            ("DISABLE_AUTOUPDATER", "1".into()),
            ("DISABLE_TELEMETRY", "1".into()),
            ("DISABLE_ERROR_REPORTING", "1".into()),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
        ]
        .map(|(k, v)| (k.to_owned(), v)),
    );
    env
}

/// Codex CLI's environment and `$CODEX_HOME/config.toml`: the double as its model
/// provider, `repo` trusted.
pub(crate) fn codex_env(home: &Path, repo: &Path, double: &ModelDouble) -> Vec<(String, String)> {
    let mut env = base_env(home);
    let codex_home = home.join(".codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    let config = format!(
        r#"model = "{CODEX_MODEL}"
model_provider = "double"
check_for_update_on_startup = false

[model_providers.double]
name = "Model double"
base_url = "{}/v1"
wire_api = "responses"
env_key = "DOUBLE_API_KEY"
requires_openai_auth = false
request_max_retries = 0
stream_max_retries = 0

[projects."{}"]
trust_level = "trusted"
"#,
        double.base_url(),
        repo.display()
    );
    std::fs::write(codex_home.join("config.toml"), config).unwrap();
    env.extend(
        [
            ("CODEX_HOME", codex_home.display().to_string()),
            ("DOUBLE_API_KEY", CODEX_KEY.into()),
        ]
        .map(|(k, v)| (k.to_owned(), v)),
    );
    env
}

/// An app whose terminals run a real CLI against its own model double.
pub(crate) struct RealApp {
    pub app: App,
    pub double: ModelDouble,
    /// The HOME of the app and its terminals.
    pub home: PathBuf,
    pub repo: PathBuf,
    /// Held while the test runs: no machine-loading test runs beside it.
    _bound: std::sync::RwLockReadGuard<'static, ()>,
}

impl RealApp {
    /// Starts a double and an app set up for `cli`.
    pub(crate) fn start(cli: Cli) -> RealApp {
        Self::start_configured(cli, |_| None)
    }

    /// The same, with the durable facet on a socket of its own, as a phone
    /// reaches it: the app and that socket's path.
    pub(crate) fn start_with_phone(cli: Cli) -> (RealApp, PathBuf) {
        let mut socket = PathBuf::new();
        let bed = Self::start_configured(cli, |dir| {
            socket = dir.join("collie").join("durable.sock");
            Some(format!(
                "[durable]\nname = \"test box\"\nsocket = \"{}\"\n",
                socket.display()
            ))
        });
        (bed, socket)
    }

    /// Starts a double and an app set up for `cli`, with this config.
    pub(crate) fn start_with_config(cli: Cli, config: &str) -> RealApp {
        Self::start_configured(cli, |_| Some(config.to_owned()))
    }

    /// Starts a double and an app set up for `cli`, with the config `config`
    /// gives for the app's folder.
    fn start_configured(cli: Cli, config: impl FnOnce(&Path) -> Option<String>) -> RealApp {
        let bound = crate::support::latency_bound();
        clis();
        let double = ModelDouble::start();
        let dir = tempfile::tempdir().unwrap();
        let repo = git_repo(dir.path());
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let env = match cli {
            Cli::Claude => claude_env(&home, &repo, &double),
            Cli::Codex => codex_env(&home, &repo, &double),
        };
        let config = config(dir.path());
        let app = App::launch(Launch {
            reuse: Some(dir),
            env,
            config: config.as_deref(),
            ..Launch::default()
        });
        RealApp {
            app,
            double,
            home,
            repo,
            _bound: bound,
        }
    }

    /// Spawns a terminal with these Spawn fields; returns its id.
    pub(crate) fn spawn(&self, fields: Value) -> u64 {
        self.app.spawn(fields)["terminal"].as_u64().unwrap()
    }

    /// The terminal's screen now.
    pub(crate) fn screen(&self, id: u64) -> String {
        let answer = self.app.request(json!({"Output": {"target": id}}));
        answer["Output"]["screen"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Waits until the model answered its `n`th main request (from 1); on a
    /// timeout, fails with what the terminal shows and what the model got.
    pub(crate) fn answered(&self, id: u64, n: usize) -> (Instant, Instant) {
        let until = Instant::now() + LONG;
        loop {
            if let Some((start, Some(end))) = self.double.times(n) {
                return (start, end);
            }
            assert!(
                Instant::now() < until,
                "main request {n} never answered; terminal {id} shows:\n{}\nrecord: {}\nthe model got: {:#?}",
                self.screen(id),
                self.app.record(id),
                self.double
                    .requests()
                    .iter()
                    .map(last_user_text)
                    .collect::<Vec<_>>()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Polls (at most [`LONG`]) until the terminal's screen contains `text`.
    pub(crate) fn until_screen(&self, id: u64, text: &str) -> String {
        let until = Instant::now() + LONG;
        loop {
            let answer = self.app.request(json!({"Output": {"target": id}}));
            let screen = answer["Output"]["screen"].as_str().unwrap_or_default();
            if screen.contains(text) {
                return screen.to_owned();
            }
            assert!(
                Instant::now() < until,
                "{text:?} never showed on terminal {id}: {answer}\nmodel requests: {:#?}",
                self.double
                    .all_requests()
                    .iter()
                    .map(|(r, _)| r)
                    .collect::<Vec<_>>()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// By hand: `KRAD_DOUBLE_LOG=/tmp/dbl KRAD_DOUBLE_SECS=600 cargo test -p krad-cli --test
/// suite real::double_by_hand -- --ignored` serves a double for that long, writes its
/// base URL to `$KRAD_DOUBLE_LOG/url` and every request body there; turns come from
/// `KRAD_DOUBLE_SCRIPT`, a JSON array of `{"reply": …}`, `{"tool": NAME, "input": …}`,
/// `{"error": STATUS, "message": …}`, `{"slow": TEXT, "secs": N}` or `"hang"`.
#[test]
#[ignore = "a tool for exploring the real CLIs by hand"]
fn double_by_hand() {
    let double = ModelDouble::start();
    let log = PathBuf::from(std::env::var("KRAD_DOUBLE_LOG").unwrap());
    std::fs::create_dir_all(&log).unwrap();
    std::fs::write(log.join("url"), double.base_url()).unwrap();
    let turns = |script: &str| -> Vec<Turn> {
        let script: Vec<Value> = serde_json::from_str(script).unwrap();
        script
            .iter()
            .map(|t| match t {
                Value::String(s) if s == "hang" => Turn::Hang,
                t if t["tool"].is_string() => {
                    Turn::tool(t["tool"].as_str().unwrap(), t["input"].clone())
                }
                t if t["error"].is_u64() => Turn::error(
                    t["error"].as_u64().unwrap() as u16,
                    t["message"].as_str().unwrap_or("error from the double"),
                ),
                t if t["slow"].is_string() => Turn::Slow {
                    text: t["slow"].as_str().unwrap().into(),
                    secs: t["secs"].as_u64().unwrap_or(5),
                },
                t => Turn::reply(t["reply"].as_str().unwrap_or("ok")),
            })
            .collect()
    };
    if let Ok(script) = std::env::var("KRAD_DOUBLE_SCRIPT") {
        double.script(turns(&script));
    }
    // More turns: write them to `$KRAD_DOUBLE_LOG/push.json` at any time.
    let secs = std::env::var("KRAD_DOUBLE_SECS").map_or(600, |s| s.parse().unwrap());
    let until = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < until {
        if let Ok(script) = std::fs::read_to_string(log.join("push.json")) {
            std::fs::remove_file(log.join("push.json")).unwrap();
            double.script(turns(&script));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
