//! `krad doctor`: nothing wrong exits 0; a host whose link failed is a
//! problem with what to do (exit 1, in text and JSON); no app exits 7. (An
//! agent whose hooks did not run: tests/suite/real/codex.rs, with the real
//! Codex CLI.)

use serde_json::Value;

use crate::support::{App, exit_code, stdout};

// The machine's checks (issue 46): below.

#[test]
fn a_healthy_app_has_no_problem_and_a_failed_host_is_one() {
    let closed = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let app = App::start_config(&format!(
        "[hosts.gone]\nssh = \"nobody@127.0.0.1\"\nroot = \"/nowhere\"\n\
         options = [\"-p\", \"{port}\", \"-o\", \"BatchMode=yes\"]\n"
    ));
    app.spawn_sh("sleep 60");

    let healthy = app.krad(&["doctor"]);
    assert_eq!(exit_code(&healthy), 0, "{healthy:?}");
    let text = stdout(&healthy);
    assert!(text.contains("1 agent, 1 host"), "{text}");
    assert!(!text.contains("PROBLEM"), "{text}");

    // The host is tried, and fails: refused at once.
    let check = app.krad(&["hosts", "check", "gone"]);
    assert_ne!(exit_code(&check), 0, "{check:?}");
    let sick = app.krad(&["doctor"]);
    assert_eq!(exit_code(&sick), 1, "{sick:?}");
    let text = stdout(&sick);
    assert!(
        text.contains("PROBLEM host gone (nobody@127.0.0.1) could not be reached")
            && text.contains("krad hosts check gone"),
        "{text}"
    );
    let json: Value = serde_json::from_str(&stdout(&app.krad(&["doctor", "--json"]))).unwrap();
    assert_eq!(json["ok"], false, "{json}");
    assert_eq!(json["problems"][0]["about"], "host", "{json}");
    assert_eq!(json["problems"][0]["which"], "gone", "{json}");
    assert_eq!(json["agents"], 1);
}

#[test]
fn without_an_app_doctor_exits_7() {
    let mut app = App::start();
    app.krad_ok(&["stop"]);
    app.wait_exit(std::time::Duration::from_secs(20));
    let out = app.krad(&["doctor"]);
    assert_eq!(exit_code(&out), 7, "{out:?}");
}

/// A folder holding `krad doctor`'s PATH: git, and fake agent CLIs that print
/// the versions given (nothing else: no tmux, no bwrap, no ssh).
fn bin_with(claude: &str, codex: &str) -> tempfile::TempDir {
    let bin = tempfile::tempdir().unwrap();
    let git = ["/usr/local/bin/git", "/usr/bin/git"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .unwrap();
    std::os::unix::fs::symlink(git, bin.path().join("git")).unwrap();
    for (name, says) in [("claude", claude), ("codex", codex)] {
        let path = bin.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\necho '{says}'\n")).unwrap();
        let mut perms = std::fs::metadata(&path).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&path, perms).unwrap();
    }
    bin
}

/// The pinned version of an agent CLI, as scripts/agent-clis.sh says.
fn pinned(name: &str) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/agent-clis.sh");
    let out = std::process::Command::new(script)
        .arg("--versions")
        .output()
        .unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")).map(str::to_owned))
        .unwrap()
}

fn line_about<'a>(text: &'a str, about: &str) -> &'a str {
    text.lines()
        .find(|l| {
            l.split_once(' ')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with(&format!("{about}:")))
        })
        .unwrap_or_else(|| panic!("no {about} line in:\n{text}"))
}

#[test]
fn the_machine_is_checked_a_line_each_with_the_fix() {
    let mut app = App::start();
    let repo = app.dir.path().join("repo");
    let repo_arg = repo.to_str().unwrap();
    let bin = bin_with(
        "1.0.0 (Claude Code)",
        &format!("codex-cli {}", pinned("codex")),
    );
    let path = bin.path().to_str().unwrap().to_owned();
    let doctor = |app: &App| app.krad_env(&["doctor", "--repo", repo_arg], &[("PATH", &path)]);

    let out = doctor(&app);
    // Warnings do not fail it.
    assert_eq!(exit_code(&out), 0, "{out:?}");
    let text = stdout(&out);
    let claude = line_about(&text, "claude");
    assert!(
        claude.starts_with("warn")
            && claude.contains("1.0.0")
            && claude.contains("not a tested version")
            && claude.contains(&format!(
                "fix: npm install -g @anthropic-ai/claude-code@{}",
                pinned("claude-code")
            )),
        "{claude}"
    );
    let codex = line_about(&text, "codex");
    assert!(
        codex.starts_with("ok") && codex.contains("(tested)"),
        "{codex}"
    );
    let tmux = line_about(&text, "tmux");
    assert!(
        tmux.contains("not installed") && tmux.contains("fix: apt-get install tmux"),
        "{tmux}"
    );
    let bwrap = line_about(&text, "bubblewrap");
    assert!(bwrap.contains("fix: apt-get install bubblewrap"), "{bwrap}");
    assert!(line_about(&text, "ssh").contains("fix: apt-get install openssh-client"));
    assert!(line_about(&text, "cgroup").contains("cgroup"));
    assert!(line_about(&text, "page").starts_with("ok"), "{text}");
    assert!(
        line_about(&text, "git identity").starts_with("ok"),
        "{text}"
    );
    let lock = line_about(&text, "lock");
    assert!(
        lock.starts_with("ok") && lock.contains(&format!("pid {}", app.pid)),
        "{lock}"
    );
    let discovery = line_about(&text, "discovery");
    assert!(
        discovery.starts_with("ok") && discovery.contains("(0600)"),
        "{discovery}"
    );

    let json: Value = serde_json::from_str(&stdout(&app.krad_env(
        &["doctor", "--json", "--repo", repo_arg],
        &[("PATH", &path)],
    )))
    .unwrap();
    let checks = json["checks"].as_array().unwrap();
    let claude = checks.iter().find(|c| c["about"] == "claude").unwrap();
    assert_eq!(claude["level"], "warn", "{claude}");
    assert!(
        claude["fix"]
            .as_str()
            .unwrap()
            .starts_with("npm install -g")
    );

    // A SIGKILLed app: the checks still run, the dead app's discovery file is
    // cleaned and said so, and the app's part exits 7.
    app.signal(nix::sys::signal::Signal::SIGKILL);
    app.wait_exit(std::time::Duration::from_secs(10));
    assert!(repo.join(".git/krad/api.json").exists());
    let out = doctor(&app);
    assert_eq!(exit_code(&out), 7, "{out:?}");
    let lock = line_about(&stdout(&out), "lock").to_owned();
    assert!(
        lock.starts_with("info")
            && lock.contains("no app serves")
            && lock.contains("removed the discovery file"),
        "{lock}"
    );
    assert!(!repo.join(".git/krad/api.json").exists());
}
