//! Crash torture of a repository's discovery and lock files (issue 49, item
//! 2; they are issue 46's: `.git/krad/api.json`, `.git/krad/app.lock`, the
//! entry `<runtime>/krad-ade/apps/<pid>.json`): `krad serve` SIGKILLed at a
//! random moment of its start or of its serving, then the files judged.
//! This file owns that test; the files are the same on both terminal hosts.
//!
//! Violations, by kind:
//!
//! * `stale` — after the kill, `krad api` in the repository does not say at
//!   once (exit 7, within 5 s) that no app serves it, `krad apps` lists the
//!   dead app, or the dead app's entry is left once `krad apps` looked;
//! * `start` — the next `krad serve` does not serve at once (10 s), or its
//!   discovery file does not name it.
//!
//! 20 kills by default (CI); by hand:
//! `KRAD_TORTURE_ROUNDS=200 cargo test -p krad-cli --test suite crash_discovery:: -- --nocapture`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{KRAD, exit_code, git_repo, private_home, stderr, stdout};
use crate::torture::{self, Tally, next_random};

const KINDS: &[&str] = &["stale", "start"];

/// `krad` with `args` in `repo`, as a user runs it there.
fn krad_in(repo: &Path, home: &Path, args: &[&str]) -> (std::process::Output, Duration) {
    let started = Instant::now();
    let out = Command::new(KRAD)
        .args(args)
        .current_dir(repo)
        .env_remove("KRAD_ADE_ENDPOINT")
        .env_remove("KRAD_ADE_API_JSON")
        .env_remove("KRAD_ADE_TOKEN_FILE")
        .env_remove("KRAD_ADE_TERMINAL")
        .envs(private_home(home))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (out, started.elapsed())
}

#[test]
fn discovery_crash_torture() {
    let what = "discovery files";
    let (rounds, seed) = torture::rounds_and_seed(what, 20);
    let mut random = seed;
    let mut tally = Tally::new(what, KINDS);
    let dir = tempfile::tempdir().unwrap();
    let repo = git_repo(dir.path());
    let entries = dir.path().join("runtime/krad-ade/apps");
    for r in 1..=rounds {
        // Killed during its start (0–30 ms) or while it serves (up to 300 ms).
        let delay = if r.is_multiple_of(2) {
            next_random(&mut random) % 31
        } else {
            next_random(&mut random) % 301
        };
        let mut child = serve(&repo, dir.path(), Stdio::null());
        let pid = child.id();
        std::thread::sleep(Duration::from_millis(delay));
        let _ = child.kill();
        let _ = child.wait();
        tally.killed(None);
        let (out, took) = krad_in(&repo, dir.path(), &["api"]);
        let what = format!(
            "krad api: exit {} in {took:?}: {}",
            exit_code(&out),
            stderr(&out)
        );
        tally.expect(
            "stale",
            r,
            exit_code(&out) == 7 && took < Duration::from_secs(5),
            what,
        );
        let (out, _) = krad_in(&repo, dir.path(), &["apps", "--json"]);
        let listed: Value = serde_json::from_str(&stdout(&out)).unwrap_or_default();
        let dead = listed["Apps"]
            .as_array()
            .is_some_and(|apps| apps.iter().any(|a| a["pid"] == pid));
        tally.expect(
            "stale",
            r,
            !dead,
            format!("krad apps lists the dead app: {listed}"),
        );
        let entry = entries.join(format!("{pid}.json"));
        tally.expect(
            "stale",
            r,
            !entry.exists(),
            format!("{} is left", entry.display()),
        );
        // The next app serves at once, and the discovery file names it.
        let (next, took) = {
            let started = Instant::now();
            let mut next = serve(&repo, dir.path(), Stdio::piped());
            let first = crate::support::first_line(&mut next);
            (
                (
                    next,
                    serde_json::from_str::<Value>(&first).unwrap_or_default(),
                ),
                started.elapsed(),
            )
        };
        let (mut next, serving) = next;
        let served = serving["Serving"]["pid"] == next.id();
        let what = format!("the next app printed {serving} in {took:?}");
        tally.expect("start", r, served && took < Duration::from_secs(10), what);
        let discovery = repo.join(".git/krad/api.json");
        let named: Value = std::fs::read(&discovery)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        let what = format!("the discovery file says {named}");
        tally.expect("start", r, named["pid"] == next.id(), what);
        let _ = next.kill();
        let _ = next.wait();
        tally.killed(None);
    }
    tally.finish(seed);
}

/// `krad serve --json` on `repo`, with a HOME of its own under `dir` and
/// none of the caller's app variables; its standard output as `stdout` says.
fn serve(repo: &std::path::Path, dir: &std::path::Path, stdout: Stdio) -> std::process::Child {
    Command::new(KRAD)
        .args(["serve", "--json"])
        .current_dir(repo)
        .env("RUST_LOG", "warn")
        .env_remove("KRAD_ADE_ENDPOINT")
        .env_remove("KRAD_ADE_API_JSON")
        .env_remove("KRAD_CONFIG")
        .envs(private_home(dir))
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}
