//! One app per repository, and several repositories at once (issue 46):
//! a second `krad serve` on a served repository — with its own api.json,
//! from a worktree, through a symlink — refuses, naming the first app, and
//! touches nothing; a SIGKILLed app's successor starts at once; three apps
//! in three repositories are each reached from their own folders with no
//! variable set, `krad apps` lists them and forgets a killed one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{
    App, KRAD, exit_code, first_line, git, git_repo, private_home, stderr, stdout, stretched,
    wait_until,
};

/// Every file under `.git/krad/` with its contents and modification time.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, std::time::SystemTime)> {
    crate::support::files_under(dir)
        .into_iter()
        .map(|path| {
            let meta = std::fs::metadata(&path).unwrap();
            let bytes = std::fs::read(&path).unwrap();
            (path, (bytes, meta.modified().unwrap()))
        })
        .collect()
}

/// `krad serve` in `dir` with the HOME of `home_of`, its api.json
/// `api_json` (none: no `KRAD_ADE_API_JSON`, as a user starts it), its
/// output piped.
fn serve_in(dir: &Path, home_of: &Path, api_json: Option<&Path>) -> Command {
    let mut serve = Command::new(KRAD);
    serve
        .arg("serve")
        .current_dir(dir)
        .env("RUST_LOG", "warn")
        .env_remove("KRAD_ADE_API_JSON")
        .env_remove("KRAD_ADE_ENDPOINT")
        .env_remove("KRAD_CONFIG")
        .envs(private_home(home_of))
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    if let Some(api_json) = api_json {
        serve.env("KRAD_ADE_API_JSON", api_json);
    }
    serve
}

/// `krad serve --json` in `dir` with its own api.json and the HOME of
/// `home_of`, which must refuse: its output once it exits. One that serves
/// instead is killed, and the test fails.
fn serve_refused(dir: &Path, home_of: &Path, api_json: &Path) -> Output {
    let mut child = serve_in(dir, home_of, Some(api_json))
        .arg("--json")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + stretched(Duration::from_secs(10));
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > until {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("a second app serves the repository: {}", stdout(&out));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn a_second_app_on_a_served_repository_refuses_naming_the_first_and_touches_nothing() {
    let first = App::start();
    let repo = first.dir.path().join("repo");
    git(&repo, &["commit", "-q", "--allow-empty", "-m", "first"]);
    let worktree = first.dir.path().join("side");
    let side = worktree.to_str().unwrap();
    git(&repo, &["worktree", "add", "-q", "-b", "side", side]);
    std::fs::create_dir_all(repo.join("src")).unwrap();
    let link = first.dir.path().join("link");
    std::os::unix::fs::symlink(&repo, &link).unwrap();
    let state = repo.join(".git").join("krad");
    let before = snapshot(&state);
    assert!(before.keys().any(|p| p.ends_with("state.db")), "{before:?}");

    let elsewhere = tempfile::tempdir().unwrap();
    for (how, dir) in [
        ("the same folder", repo.clone()),
        ("a worktree", worktree.clone()),
        ("a symlink", link.join("src")),
    ] {
        // A private folder of its own: it would write api.json there.
        let own_api_json = elsewhere
            .path()
            .join(format!("run-{}", how.len()))
            .join("api.json");
        let out = serve_refused(&dir, elsewhere.path(), &own_api_json);
        let text = stderr(&out);
        assert_eq!(exit_code(&out), 1, "{how}: {text}");
        assert!(
            text.contains("already serves")
                && text.contains(&format!("pid {}", first.pid))
                && text.contains(&first.endpoint.to_string()),
            "{how}: {text}"
        );
        assert!(stdout(&out).is_empty(), "{how}: {}", stdout(&out));
        assert!(!own_api_json.exists(), "{how}: it wrote its api.json");
        assert_eq!(snapshot(&state), before, "{how}: .git/krad was touched");
    }
    // The first app is whole.
    assert_eq!(exit_code(&first.krad(&["api"])), 0);
}

#[test]
fn after_a_sigkill_the_next_app_starts_at_once_and_the_leftovers_are_not_believed() {
    let mut first = App::start();
    let repo = first.dir.path().join("repo");
    let discovery = repo.join(".git/krad/api.json");
    assert!(discovery.exists());
    let entry = first
        .dir
        .path()
        .join(format!("runtime/krad-ade/apps/{}.json", first.pid));
    assert!(entry.exists(), "{} is not there", entry.display());
    first.signal(nix::sys::signal::Signal::SIGKILL);
    first.wait_exit(Duration::from_secs(10));
    // The dead app's discovery file is there, but not believed.
    assert!(discovery.exists());
    let out = Command::new(KRAD)
        .args(["--repo", repo.to_str().unwrap(), "api"])
        .env_remove("KRAD_ADE_ENDPOINT")
        .output()
        .unwrap();
    assert_eq!(exit_code(&out), 7, "{}", stderr(&out));
    assert!(stderr(&out).contains("no app serves"), "{}", stderr(&out));
    assert!(
        !discovery.exists(),
        "the dead app's discovery file is cleaned"
    );

    let started = Instant::now();
    let mut second = serve_in(&repo, first.dir.path(), Some(&first.api_json))
        .arg("--json")
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let serving: Value = serde_json::from_str(&first_line(&mut second)).unwrap();
    let took = started.elapsed();
    // The next app removed the dead one's entry: no `krad apps` looked.
    let entry_left = entry.exists();
    let _ = second.kill();
    let _ = second.wait();
    assert!(!entry_left, "{} is left by the next app", entry.display());
    assert_eq!(serving["Serving"]["first_run"], false, "{serving}");
    assert!(
        took < stretched(Duration::from_secs(1)),
        "the next app took {took:?} to serve"
    );
}

/// An app started with only a HOME and a runtime folder (shared by the test's
/// apps), as a user starts it: no KRAD_ADE_* variable.
pub(crate) struct Plain {
    child: Child,
    pub(crate) pid: u32,
}

impl Plain {
    pub(crate) fn start(repo: &Path, home_of: &Path) -> Plain {
        let mut child = serve_in(repo, home_of, None)
            .arg("--json")
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let serving: Value = serde_json::from_str(&first_line(&mut child)).unwrap();
        let pid = serving["Serving"]["pid"].as_u64().unwrap() as u32;
        Plain { child, pid }
    }
}

impl Drop for Plain {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The CLI run in `dir` as a user runs it: the shared HOME, no variable.
pub(crate) fn krad_in(dir: &Path, home_of: &Path, args: &[&str]) -> Output {
    Command::new(KRAD)
        .args(args)
        .current_dir(dir)
        .env_remove("KRAD_ADE_API_JSON")
        .env_remove("KRAD_ADE_ENDPOINT")
        .env_remove("KRAD_ADE_TOKEN_FILE")
        .env_remove("KRAD_ADE_TERMINAL")
        .envs(private_home(home_of))
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn json_of(out: &Output) -> Value {
    assert_eq!(exit_code(out), 0, "{}", stderr(out));
    serde_json::from_str(&stdout(out)).unwrap()
}

/// In a repository with no app and no other app running, `krad` says that
/// no app serves this repository and how to start one, not only that
/// api.json is missing.
#[test]
fn in_a_repository_no_app_serves_krad_says_so_and_how_to_start_one() {
    let home = tempfile::tempdir().unwrap();
    let repo = git_repo(home.path());
    let out = krad_in(&repo, home.path(), &["ls"]);
    assert_eq!(exit_code(&out), 7, "{}", stderr(&out));
    let said = stderr(&out);
    let expected = format!("no app serves the repository of {}", repo.display());
    assert!(said.contains(&expected), "{said}");
    assert!(said.contains("is not running"), "{said}");
    assert!(said.contains("`krad serve`"), "{said}");
    // Outside any repository: the plain "not running".
    let out = krad_in(home.path(), home.path(), &["ls"]);
    assert_eq!(exit_code(&out), 7, "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("krad: the app is not running"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn three_apps_in_three_repositories_are_each_found_from_their_own_folders() {
    let home = tempfile::tempdir().unwrap();
    let repos: Vec<PathBuf> = (1..=3)
        .map(|n| {
            let dir = home.path().join(format!("r{n}"));
            std::fs::create_dir_all(&dir).unwrap();
            let repo = git_repo(&dir);
            std::fs::create_dir_all(repo.join("deep/er")).unwrap();
            repo
        })
        .collect();
    let mut apps: Vec<Option<Plain>> = repos
        .iter()
        .map(|repo| Some(Plain::start(repo, home.path())))
        .collect();
    let pids: Vec<u32> = apps.iter().map(|a| a.as_ref().unwrap().pid).collect();
    let pid = |n: usize| pids[n];

    for (n, repo) in repos.iter().enumerate() {
        for dir in [repo.clone(), repo.join("deep/er")] {
            let hello = json_of(&krad_in(&dir, home.path(), &["api", "--json"]));
            assert_eq!(hello["Hello"]["pid"], pid(n), "from {}", dir.display());
        }
        // Each app has as many terminals as its number: `krad ls` tells them apart.
        for _ in 0..=n {
            let out = krad_in(
                repo,
                home.path(),
                &["spawn", "--profile", "exec", "--", "sleep", "60"],
            );
            assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
        }
    }
    for (n, repo) in repos.iter().enumerate() {
        let listed = json_of(&krad_in(&repo.join("deep"), home.path(), &["ls", "--json"]));
        assert_eq!(
            listed["Agents"].as_array().unwrap().len(),
            n + 1,
            "{listed}"
        );
    }
    // From outside any repository: --repo, or api.json's app (the first).
    let outside = home.path();
    let third = json_of(&krad_in(
        outside,
        home.path(),
        &["--repo", repos[2].to_str().unwrap(), "api", "--json"],
    ));
    assert_eq!(third["Hello"]["pid"], pid(2));
    let plain = json_of(&krad_in(outside, home.path(), &["api", "--json"]));
    assert_eq!(
        plain["Hello"]["pid"],
        pid(0),
        "api.json stays the first app's"
    );

    let listed = json_of(&krad_in(outside, home.path(), &["apps", "--json"]));
    let apps_listed = listed["Apps"].as_array().unwrap();
    assert_eq!(apps_listed.len(), 3, "{listed}");
    for (n, repo) in repos.iter().enumerate() {
        let app = apps_listed
            .iter()
            .find(|a| a["pid"] == pid(n))
            .unwrap_or_else(|| panic!("app {n} is not listed: {listed}"));
        assert_eq!(app["root"], repo.to_str().unwrap(), "{app}");
        assert_eq!(app["agents"], n + 1, "{app}");
        assert_eq!(app["asking"], 0, "{app}");
        assert_eq!(app["default"], n == 0, "{app}");
        assert!(
            app["ui"]
                .as_str()
                .is_some_and(|u| u.starts_with("http://127.0.0.1:"))
        );
    }
    let text = stdout(&krad_in(outside, home.path(), &["apps"]));
    assert!(text.starts_with("REPOSITORY"), "{text}");

    // Two apps that do not answer (stopped, their sockets still accepting)
    // are `?`, asked at once and for two seconds each: not for List's whole
    // deadline (10 s) one after the other.
    let signal = |sig: &str, pid: u32| {
        let status = Command::new("kill")
            .args([sig, &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill {sig} {pid}");
    };
    signal("-STOP", pid(1));
    signal("-STOP", pid(2));
    let asked = Instant::now();
    let out = krad_in(outside, home.path(), &["apps", "--json"]);
    let took = asked.elapsed();
    signal("-CONT", pid(1));
    signal("-CONT", pid(2));
    let listed = json_of(&out);
    let counts: Vec<(&Value, &Value)> = listed["Apps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (&a["agents"], &a["asking"]))
        .collect();
    let one = Value::from(1);
    let zero = Value::from(0);
    assert_eq!(
        counts,
        [
            (&one, &zero),
            (&Value::Null, &Value::Null),
            (&Value::Null, &Value::Null)
        ],
        "{listed}"
    );
    assert!(
        took < Duration::from_secs(10),
        "two silent apps held `krad apps` for {took:?}"
    );

    // The second app dies: gone from `krad apps`, and its entry removed.
    let killed = apps[1].take().unwrap();
    let killed_pid = killed.pid;
    drop(killed);
    let listed = json_of(&krad_in(outside, home.path(), &["apps", "--json"]));
    let pids: Vec<&Value> = listed["Apps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| &a["pid"])
        .collect();
    assert_eq!(
        pids,
        [&Value::from(pid(0)), &Value::from(pid(2))],
        "{listed}"
    );
    let entries = home.path().join("runtime/krad-ade/apps");
    assert!(!entries.join(format!("{killed_pid}.json")).exists());
    // In its repository, `krad` says no app serves it before reaching api.json's.
    let out = krad_in(&repos[1], home.path(), &["api", "--json"]);
    assert!(stderr(&out).contains("no app serves"), "{}", stderr(&out));

    // A clean stop (found from its folder) removes its discovery file and entry.
    let out = krad_in(&repos[2], home.path(), &["stop"]);
    assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
    let mut third = apps[2].take().unwrap();
    let until = Instant::now() + Duration::from_secs(20);
    while third.child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < until, "the third app did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!repos[2].join(".git/krad/api.json").exists());
    assert!(!entries.join(format!("{}.json", third.pid)).exists());
    wait_until(Duration::from_secs(5), || {
        json_of(&krad_in(outside, home.path(), &["apps", "--json"]))["Apps"]
            .as_array()
            .is_some_and(|a| a.len() == 1)
    });
}

#[test]
fn the_discovery_file_and_the_entry_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let app = App::start();
    let krad_dir = app.dir.path().join("repo/.git/krad");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&krad_dir), 0o700);
    assert_eq!(mode(&krad_dir.join("api.json")), 0o600);
    let entries = app.dir.path().join("runtime/krad-ade/apps");
    assert_eq!(mode(&entries), 0o700);
    let entry = entries.join(format!("{}.json", app.pid));
    assert_eq!(mode(&entry), 0o600);
    let text = std::fs::read_to_string(&entry).unwrap();
    assert!(!text.contains(app.token()), "no token in the list of apps");
}

/// What `krad serve` (text, not JSON) printed in `repo` before it was stopped.
fn serve_says(repo: &Path, home_of: &Path) -> String {
    use std::io::{BufRead, BufReader, Read};
    let mut child = serve_in(repo, home_of, Some(&home_of.join("run/api.json")))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut said = String::new();
    while !said.contains("stop it with") {
        assert_ne!(out.read_line(&mut said).unwrap(), 0, "{said}");
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    out.read_to_string(&mut said).unwrap();
    child.wait().unwrap();
    said
}

#[test]
fn the_first_serve_in_a_repository_says_what_to_do_next() {
    let dir = tempfile::tempdir().unwrap();
    let repo = git_repo(dir.path());
    let first = serve_says(&repo, dir.path());
    for next in [
        "krad spawn",
        "krad ls",
        "krad ui",
        "krad apps",
        "krad doctor",
    ] {
        assert!(first.contains(next), "{next} in:\n{first}");
    }
    assert!(first.contains("found by"), "{first}");
    let second = serve_says(&repo, dir.path());
    assert!(second.contains("krad: serving"), "{second}");
    assert!(!second.contains("First time here"), "{second}");
}

#[test]
fn repo_names_a_repository_or_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = krad_in(
        dir.path(),
        dir.path(),
        &["--repo", dir.path().to_str().unwrap(), "ls"],
    );
    assert_eq!(exit_code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not in a git repository"),
        "{}",
        stderr(&out)
    );
    let missing = dir.path().join("no-such-folder");
    let out = krad_in(
        dir.path(),
        dir.path(),
        &["--repo", missing.to_str().unwrap(), "ls"],
    );
    assert_eq!(exit_code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no-such-folder: no such directory"),
        "{}",
        stderr(&out)
    );
    let repo = git_repo(dir.path());
    let out = krad_in(
        dir.path(),
        dir.path(),
        &["--repo", repo.to_str().unwrap(), "ls"],
    );
    assert_eq!(exit_code(&out), 7, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("krad serve --root"),
        "{}",
        stderr(&out)
    );
}
