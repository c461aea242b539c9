//! Issue 17, nothing piling up: each environment's disk use (measured in the
//! background) and age in Environments and `krad envs`, and CollectEnvironments
//! (`krad gc`) — merged and old worktrees archived and removed, never one with
//! a live terminal or another program working in it — with the real `git`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{App, Launch, code, exit_code, git, named, stderr, stdout, wait_until};

/// Measured again every second, so a test sees a change soon.
const FAST_DISK: &str = "[environments]\ndisk_refresh_secs = 1\n";

const LIMIT: Duration = Duration::from_secs(30);

/// An app whose repository has a first commit.
fn app(config: Option<&str>) -> App {
    crate::support::app_with_first_commit(&[("README.md", b"hello\n")], config)
}

fn repo(app: &App) -> PathBuf {
    app.dir.path().join("repo")
}

fn create(app: &App, name: &str) -> PathBuf {
    let environment = app.answered(json!({"CreateWorktree": {"name": name}}), "Environment");
    PathBuf::from(environment["path"].as_str().unwrap())
}

fn commit_file(dir: &Path, file: &str, text: &str, message: &str) {
    std::fs::write(dir.join(file), text).unwrap();
    git(dir, &["add", "."]);
    git(dir, &["commit", "-q", "-m", message]);
}

fn environment(app: &App, name: &str) -> Option<Value> {
    let answer = app.request(json!("Environments"));
    answer["Environments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .cloned()
}

fn collect(app: &App, fields: Value) -> Value {
    app.answered(json!({ "CollectEnvironments": fields }), "Collected")
}

fn entry<'a>(collected: &'a Value, name: &str) -> &'a Value {
    named(&collected["environments"], name)
}

fn names(collected: &Value) -> Vec<String> {
    collected["environments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .collect()
}

/// What git knows of the repository: its worktrees and every ref.
fn git_state(repo: &Path) -> (String, String) {
    (
        git(repo, &["worktree", "list", "--porcelain"]),
        git(repo, &["for-each-ref", "--format=%(refname) %(objectname)"]),
    )
}

/// A program that sits in `dir`, as a user's shell or editor would.
struct Sitter(Child);

impl Sitter {
    fn in_dir(dir: &Path) -> Sitter {
        Sitter(
            Command::new("sleep")
                .arg("300")
                .current_dir(dir)
                .spawn()
                .unwrap(),
        )
    }
}

impl Drop for Sitter {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn disk_use_and_age_are_listed_and_the_disk_use_grows_after_a_file_is_written() {
    let app = app(Some(FAST_DISK));
    let path = create(&app, "growing");
    let mut first = 0;
    wait_until(LIMIT, || match environment(&app, "growing") {
        Some(env) => match env["disk_bytes"].as_u64() {
            Some(bytes) => {
                first = bytes;
                true
            }
            None => false,
        },
        None => false,
    });
    let env = environment(&app, "growing").unwrap();
    assert!(env["disk_measured_at"].is_string(), "{env}");
    let created = env["created_at"].as_str().unwrap();
    let created = humantime::parse_rfc3339_weak(created).unwrap();
    let age = std::time::SystemTime::now()
        .duration_since(created)
        .unwrap_or_default();
    assert!(age < Duration::from_secs(600), "{env}");
    assert!(environment(&app, "main").unwrap()["disk_bytes"].is_u64());

    std::fs::write(path.join("big.bin"), vec![7u8; 2 * 1024 * 1024]).unwrap();
    wait_until(LIMIT, || {
        environment(&app, "growing").unwrap()["disk_bytes"]
            .as_u64()
            .is_some_and(|now| now >= first + 2 * 1024 * 1024)
    });

    let text = app.krad_ok(&["envs"]);
    assert!(text.contains("DISK") && text.contains("AGE"), "{text}");
    assert!(text.contains("MiB"), "{text}");
}

#[test]
fn gc_merged_removes_a_squash_merged_worktree_keeps_an_unmerged_one_and_a_dry_run_changes_nothing()
{
    let app = app(None);
    let main = repo(&app);
    let squashed = create(&app, "squashed");
    commit_file(&squashed, "a.txt", "a\n", "a");
    commit_file(&squashed, "b.txt", "b\n", "b");
    git(&main, &["merge", "-q", "--squash", "krad/squashed"]);
    git(&main, &["commit", "-q", "-m", "squashed"]);
    let open = create(&app, "open");
    commit_file(&open, "d.txt", "d\n", "d");
    let dirty = create(&app, "dirty");
    std::fs::write(dirty.join("wip.txt"), "wip\n").unwrap();

    let before = git_state(&main);
    let dry = collect(&app, json!({"merged": true, "dry_run": true}));
    assert_eq!(git_state(&main), before, "a dry run changes nothing");
    assert!(squashed.is_dir());
    assert_eq!(dry["dry_run"], true);
    assert_eq!(names(&dry), ["squashed"], "{dry}");
    let would = entry(&dry, "squashed");
    assert_eq!(would["action"], "would_remove");
    assert!(
        would["reason"].as_str().unwrap().contains("squash-merged"),
        "{would}"
    );
    assert!(would["bytes"].as_u64().unwrap() > 0, "{would}");
    assert_eq!(dry["freed_bytes"], would["bytes"]);

    let text = app.krad_ok(&["gc", "--merged", "--dry-run"]);
    assert!(
        text.contains("would remove") && text.contains("squashed"),
        "{text}"
    );
    assert!(text.contains("dry run: nothing changed"), "{text}");
    assert_eq!(git_state(&main), before);

    let run = app.krad(&["gc", "--merged", "--json"]);
    assert_eq!(exit_code(&run), 0, "{}", stderr(&run));
    let answer: Value = serde_json::from_str(&stdout(&run)).unwrap();
    let done = entry(&answer["Collected"], "squashed");
    assert_eq!(done["action"], "removed", "{answer}");
    assert_eq!(done["archive"], "refs/krad/archive/squashed");
    assert!(!squashed.exists());
    assert!(environment(&app, "squashed").is_none());
    assert!(open.join("d.txt").is_file() && dirty.join("wip.txt").is_file());
    assert!(environment(&app, "open").is_some() && environment(&app, "dirty").is_some());

    // Nothing lost: the archive comes back as an environment.
    let restored = app.krad(&["archive", "restore", "squashed", "--as", "back"]);
    assert_eq!(exit_code(&restored), 0, "{}", stderr(&restored));
    let back = PathBuf::from(environment(&app, "back").unwrap()["path"].as_str().unwrap());
    assert_eq!(std::fs::read_to_string(back.join("b.txt")).unwrap(), "b\n");

    let again = app.krad(&["gc", "--merged", "--dry-run"]);
    assert!(
        stdout(&again).contains("back"),
        "restored at main's content, it is merged: {}",
        stdout(&again)
    );
}

#[test]
fn gc_older_than_selects_by_age() {
    let app = app(None);
    let path = create(&app, "aging");
    let young = collect(&app, json!({"older_than_secs": 3600}));
    assert!(names(&young).is_empty(), "{young}");
    let text = stdout(&app.krad(&["gc", "--older-than", "1h"]));
    assert!(text.contains("no environment matches"), "{text}");

    wait_until(LIMIT, || {
        let dry = stdout(&app.krad(&["gc", "--older-than", "1s", "--dry-run", "--json"]));
        dry.contains("\"aging\"")
    });
    assert!(path.is_dir());
    let text = app.krad_ok(&["gc", "--older-than", "1s", "--request-id", "gc-1"]);
    assert!(text.contains("removed") && text.contains("aging"), "{text}");
    assert!(text.contains("refs/krad/archive/aging"), "{text}");
    assert!(text.contains("freed"), "{text}");
    assert!(!path.exists());

    // At most once: the same id again gets the first answer, replayed.
    let mut envelope = app.envelope(json!({"CollectEnvironments": {"older_than_secs": 1}}));
    envelope["request_id"] = json!("gc-1");
    let replayed = app.call(&envelope);
    assert_eq!(replayed["Collected"]["replayed"], true, "{replayed}");
    assert_eq!(
        entry(&replayed["Collected"], "aging")["action"],
        "removed",
        "{replayed}"
    );
    envelope["request"] = json!({"CollectEnvironments": {"merged": true}});
    assert_eq!(code(&app.call(&envelope)), "request_id_reused");
}

#[test]
fn gc_keeps_a_worktree_with_a_live_terminal_or_a_process_inside_and_says_which() {
    let app = app(None);
    let busy = create(&app, "busy");
    let sat = create(&app, "sat");
    let free = create(&app, "free");
    let terminal = app.spawn(json!({
        "environment": "busy", "profile": "exec", "name": "worker",
        "command": ["sh", "-c", "sleep 300"],
    }))["terminal"]
        .as_u64()
        .unwrap();
    let sitter = Sitter::in_dir(&sat);
    let pid = sitter.0.id();

    let before = git_state(&repo(&app));
    let dry = collect(&app, json!({"older_than_secs": 0, "dry_run": true}));
    assert_eq!(git_state(&repo(&app)), before);
    assert_eq!(entry(&dry, "free")["action"], "would_remove", "{dry}");

    let done = collect(&app, json!({"older_than_secs": 0, "merged": false}));
    let kept = entry(&done, "busy");
    assert_eq!(kept["action"], "kept", "{done}");
    assert_eq!(kept["kept"], "live_terminals");
    assert_eq!(kept["terminals"][0]["terminal"], terminal);
    assert_eq!(kept["terminals"][0]["name"], "worker");
    assert_eq!(kept["terminals"][0]["profile"], "exec");
    assert!(
        kept["reason"]
            .as_str()
            .unwrap()
            .contains(&terminal.to_string()),
        "{kept}"
    );
    let inside = entry(&done, "sat");
    assert_eq!(inside["action"], "kept", "{done}");
    assert_eq!(inside["kept"], "process_inside");
    assert_eq!(inside["processes"][0]["pid"], pid);
    assert!(
        inside["processes"][0]["command"]
            .as_str()
            .unwrap()
            .contains("sleep 300"),
        "{inside}"
    );
    assert_eq!(entry(&done, "free")["action"], "removed");
    assert!(busy.is_dir() && sat.is_dir() && !free.exists());
    assert_ne!(app.record(terminal)["state"], "exited");

    let human = app.krad(&["gc", "--older-than", "0s"]);
    let text = stdout(&human);
    assert!(text.contains(&format!("pid {pid}")), "{text}");
    assert!(text.contains("it has 1 live terminal: "), "{text}");

    // Once nothing uses them, they go.
    drop(sitter);
    assert_eq!(
        app.request(json!({"Close": {"target": terminal}})),
        json!("Ok")
    );
    let done = collect(&app, json!({"older_than_secs": 0}));
    assert_eq!(entry(&done, "busy")["action"], "removed", "{done}");
    assert_eq!(entry(&done, "sat")["action"], "removed", "{done}");
    assert!(!busy.exists() && !sat.exists());
}

#[test]
fn gc_without_a_selector_or_with_a_bad_age_is_invalid_and_plain_terminals_may_not() {
    let app = app(None);
    let none = app.request(json!({"CollectEnvironments": {"dry_run": true}}));
    assert_eq!(code(&none), "invalid", "{none}");
    assert!(
        none["Error"]["message"]
            .as_str()
            .unwrap()
            .contains("--older-than"),
        "{none}"
    );
    let cli = app.krad(&["gc"]);
    assert_eq!(exit_code(&cli), 2);
    assert!(stderr(&cli).contains("--merged"), "{}", stderr(&cli));
    let bad = app.krad(&["gc", "--older-than", "7days"]);
    assert_eq!(exit_code(&bad), 2);
    assert!(stderr(&bad).contains("like 90s, 30m"), "{}", stderr(&bad));
    let negative = app.request(json!({"CollectEnvironments": {"older_than_secs": -1}}));
    assert_eq!(code(&negative), "bad_request", "{negative}");

    let terminal = app.spawn_sh("sleep 300");
    let token = app.terminal_token(terminal);
    let denied = app.call_as(
        terminal,
        &token,
        json!({"CollectEnvironments": {"merged": true}}),
    );
    assert_eq!(code(&denied), "forbidden", "{denied}");
}

#[test]
fn an_ssh_host_environment_is_measured_there_and_kept_while_its_terminal_lives() {
    let sshd = crate::ssh::Sshd::start();
    let dir = tempfile::tempdir().unwrap();
    let local = crate::support::git_repo(dir.path());
    commit_file(&local, "README.md", "local\n", "local");
    let remote = dir.path().join("host-repo");
    std::fs::create_dir_all(&remote).unwrap();
    git(&remote, &["init", "-q", "-b", "main"]);
    commit_file(&remote, "app.txt", "on the host\n", "remote");
    let config = format!("{FAST_DISK}{}", sshd.host_config("far", &remote, sshd.port));
    let app = App::launch(Launch {
        reuse: Some(dir),
        config: Some(&config),
        ..Launch::default()
    });
    let env = app.request(json!({"CreateWorktree": {"name": "far-gc", "host": "far"}}));
    assert_eq!(env["Environment"]["kind"], "ssh", "{env}");
    assert!(env["Environment"]["created_at"].is_string(), "{env}");
    let path = remote.join(".krad/worktrees/far-gc");
    let mut first = 0;
    wait_until(
        LIMIT,
        || match environment(&app, "far-gc").unwrap()["disk_bytes"].as_u64() {
            Some(bytes) => {
                first = bytes;
                true
            }
            None => false,
        },
    );
    std::fs::write(path.join("big.bin"), vec![7u8; 2 * 1024 * 1024]).unwrap();
    wait_until(LIMIT, || {
        environment(&app, "far-gc").unwrap()["disk_bytes"]
            .as_u64()
            .is_some_and(|now| now >= first + 2 * 1024 * 1024)
    });

    let terminal = app.spawn(json!({"profile": "exec", "environment": "far-gc",
        "command": ["sh", "-c", "sleep 300"]}))["terminal"]
        .as_u64()
        .unwrap();
    let kept = collect(&app, json!({"older_than_secs": 0}));
    let far = entry(&kept, "far-gc");
    assert_eq!(far["action"], "kept", "{kept}");
    assert_eq!(far["host"], "far");
    assert_eq!(far["terminals"][0]["terminal"], terminal);
    assert!(path.is_dir());

    assert_eq!(
        app.request(json!({"Close": {"target": terminal}})),
        json!("Ok")
    );
    let done = collect(&app, json!({"older_than_secs": 0}));
    let far = entry(&done, "far-gc");
    assert_eq!(far["action"], "removed", "{done}");
    assert!(far["bytes"].as_u64().unwrap() >= 2 * 1024 * 1024, "{far}");
    assert!(!path.exists());
    assert_eq!(
        git(&remote, &["show", "refs/krad/archive/far-gc:big.bin"]).len(),
        2 * 1024 * 1024,
        "its uncommitted work is archived on the host"
    );
}

#[test]
fn a_failed_teardown_keeps_the_worktree_with_its_output() {
    let app = app(Some(
        "[worktrees]\nteardown = \"echo cannot stop the database; exit 3\"\n",
    ));
    let path = create(&app, "stubborn");
    let done = collect(&app, json!({"older_than_secs": 0}));
    let kept = entry(&done, "stubborn");
    assert_eq!(kept["action"], "kept", "{done}");
    assert_eq!(kept["kept"], "teardown_failed");
    assert!(
        kept["reason"]
            .as_str()
            .unwrap()
            .contains("cannot stop the database"),
        "{kept}"
    );
    assert!(kept.get("archive").is_none(), "{kept}");
    assert_eq!(done["freed_bytes"], 0);
    assert!(path.is_dir() && environment(&app, "stubborn").is_some());
    assert!(git(&repo(&app), &["for-each-ref", "refs/krad/archive/"]).is_empty());
}
