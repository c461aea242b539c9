//! Sections 1, 5 and 8: worktree environments, Changes, Close of an environment,
//! RunVariants and PickVariant, at-most-once request ids, and state that survives
//! a SIGKILL — with the real `git` in temp repositories.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{
    App, Launch, code, each, exit_code, git, listed, named, stderr, stdout, wait_until,
};

fn write(dir: &Path, file: &str, text: &str) {
    let path = dir.join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Writes `file` in the checkout at `dir` and commits it there.
fn commit_file(dir: &Path, file: &str, text: &str, message: &str) {
    write(dir, file, text);
    git(dir, &["add", file]);
    git(dir, &["commit", "-q", "-m", message]);
}

fn repo(app: &App) -> PathBuf {
    app.dir.path().join("repo")
}

/// An app whose repository has a first commit (and an optional config).
fn app_with_commit(config: Option<&str>) -> App {
    crate::support::app_with_first_commit(
        &[
            ("README.md", b"hello\n"),
            ("src/lib.rs", b"fn one() {}\n"),
            ("logo.bin", &[0, 1, 2, 3, 255]),
        ],
        config,
    )
}

fn create(app: &App, name: &str) -> Value {
    app.answered(json!({"CreateWorktree": {"name": name}}), "Environment")
}

#[test]
fn create_worktree_makes_an_environment_on_its_own_branch() {
    let app = app_with_commit(None);
    let env = create(&app, "fix-login");
    assert_eq!(env["name"], "fix-login");
    assert_eq!(env["branch"], "krad/fix-login");
    assert_eq!(env["kind"], "worktree");
    assert_eq!(env["status"], "ready");
    assert_eq!(env["base"], git(&repo(&app), &["rev-parse", "HEAD"]));
    let path = PathBuf::from(env["path"].as_str().unwrap());
    assert!(path.join("README.md").is_file());
    assert_eq!(git(&path, &["branch", "--show-current"]), "krad/fix-login");
    // The worktrees directory stays out of main's `git status`.
    assert_eq!(git(&repo(&app), &["status", "--porcelain"]), "");
    let envs = app.request(json!("Environments"))["Environments"].clone();
    let names = each(&envs, "name");
    assert_eq!(names, ["main", "fix-login"]);
    assert_eq!(envs[0]["kind"], "main");
    assert_eq!(envs[0]["branch"], "main");
}

#[test]
fn create_worktree_failures_are_clear_and_change_nothing() {
    let app = app_with_commit(None);
    create(&app, "taken");
    // Each refusal says what to do next where there is something to do.
    let cases = [
        (
            json!({"name": "taken"}),
            "conflict",
            "environment \"taken\" exists; choose another name, or close it first (`krad close --env taken`)",
        ),
        (
            json!({"name": "main"}),
            "conflict",
            "environment \"main\" is the repository's own checkout; choose another name",
        ),
        (
            json!({"name": "other", "branch": "krad/taken"}),
            "conflict",
            "branch \"krad/taken\" exists; choose another name, or another branch",
        ),
        (
            json!({"name": "other", "base": "no-such-ref"}),
            "not_found",
            "",
        ),
        (json!({"name": "../escape"}), "invalid", ""),
        (json!({"name": "bad", "branch": "a..b"}), "invalid", ""),
        (json!({"name": 7}), "bad_request", ""),
    ];
    for (fields, expected, said) in cases {
        let answer = app.request(json!({"CreateWorktree": fields}));
        assert_eq!(code(&answer), expected, "{fields} → {answer}");
        if !said.is_empty() {
            assert_eq!(answer["Error"]["message"], said, "{fields}");
        }
    }
    assert_eq!(environments(&app).len(), 2);
}

#[test]
fn a_worktree_whose_directory_was_removed_is_said_gone_and_close_forgets_it() {
    let app = app_with_commit(None);
    let path = env_path(&create(&app, "lost"));
    std::fs::remove_dir_all(&path).unwrap();
    let listed = environments(&app);
    assert_eq!(listed[1]["status"], "missing", "{listed:?}");
    for request in [
        json!({"Changes": {"environment": "lost"}}),
        json!({"Spawn": {"environment": "lost", "profile": "exec", "command": ["true"]}}),
        json!({"CreateWorktree": {"name": "from-lost", "base": "lost"}}),
        json!({"UpdateEnvironment": {"environment": "lost"}}),
        json!({"RunVariants": {"count": 1, "base": "lost", "prompt": "x", "profile": "exec", "command": ["true"]}}),
    ] {
        let answer = app.request(request.clone());
        assert_eq!(code(&answer), "conflict", "{request} → {answer}");
        assert_eq!(answer["Error"]["detail"]["environment"], "lost");
        let said = answer["Error"]["message"].as_str().unwrap();
        assert!(
            said.contains("the directory of environment \"lost\" is gone")
                && said.contains("krad close --env lost"),
            "{said}"
        );
    }
    assert_eq!(app.request(json!("List"))["Agents"], json!([]));
    assert_eq!(environments(&app).len(), 2, "nothing made from it");
    // A variant whose directory was removed is refused by a pick, before
    // anything is recorded or run.
    let variants = app.answered(
        json!({"RunVariants": {"count": 1, "name": "v", "prompt": "x", "profile": "exec", "command": ["true"]}}),
        "Variants",
    );
    let terminal = variants["variants"][0]["terminal"].as_u64().unwrap();
    app.until_state(terminal, "exited");
    std::fs::remove_dir_all(env_path(&environments(&app)[2])).unwrap();
    let head = git(&repo(&app), &["rev-parse", "HEAD"]);
    for dry_run in [true, false] {
        let answer =
            app.request(json!({"PickVariant": {"group": "v", "variant": 1, "dry_run": dry_run}}));
        assert_eq!(code(&answer), "conflict", "{answer}");
        assert!(
            answer["Error"]["message"]
                .as_str()
                .unwrap()
                .contains("the directory of environment \"v-1\" is gone"),
            "{answer}"
        );
    }
    assert_eq!(git(&repo(&app), &["rev-parse", "HEAD"]), head);
    assert_eq!(environments(&app).len(), 3, "the variant is still listed");
    // `krad variants ls` does not count its changes as none: `?`, and why.
    let text = app.krad_ok(&["variants", "ls"]);
    assert!(
        text.contains("changes not read (`?`):")
            && text.contains("v-1: the directory of environment \"v-1\" is gone"),
        "{text}"
    );
    let listed: Value = serde_json::from_str(&app.krad_ok(&["variants", "ls", "--json"])).unwrap();
    assert_eq!(listed["Variants"][0]["files"], Value::Null, "{listed}");
    assert!(
        listed["Variants"][0]["error"].as_str().is_some(),
        "{listed}"
    );
    // Nor is it on the group's scoreboard, where it could rank best.
    let board = app.request(json!({"Scores": {"group": "v"}}));
    assert_eq!(board["Scores"]["variants"], json!([]), "{board}");
    // What the message says to do works: the branch is archived, the record gone.
    assert_eq!(
        app.request(json!({"Close": {"environment": "lost"}})),
        json!("Ok")
    );
    assert_eq!(environments(&app).len(), 2);
    assert!(!git(&repo(&app), &["for-each-ref", "refs/krad/archive/lost"]).is_empty());
}

#[test]
fn a_repository_with_no_commit_says_so_where_a_commit_is_needed() {
    let app = App::start();
    let said = |request: Value| {
        let answer = app.request(request);
        assert_eq!(code(&answer), "conflict", "{answer}");
        answer["Error"]["message"].as_str().unwrap().to_owned()
    };
    assert!(said(json!({"CreateWorktree": {"name": "a"}})).contains("no commit yet"));
    assert!(said(json!({"Changes": {"environment": "main"}})).contains("no commit yet"));
    let variants =
        json!({"RunVariants": {"count": 2, "prompt": "x", "profile": "exec", "command": ["true"]}});
    assert!(said(variants).contains("no commit yet"));
    // Conflicts compares nothing, and says why in words, not git's.
    let answer = app.request(json!("Conflicts"));
    let main = environment(&answer["Conflicts"], "main");
    assert_eq!(
        main["error"], "no commit yet: commit something first",
        "{answer}"
    );
    assert_eq!(environments(&app).len(), 1, "only main");
}

#[test]
fn a_worktree_from_an_environment_or_a_ref() {
    let app = app_with_commit(None);
    let first = create(&app, "first");
    let first_path = PathBuf::from(first["path"].as_str().unwrap());
    commit_file(&first_path, "extra.txt", "from first\n", "extra");
    let second = app.request(
        json!({"CreateWorktree": {"name": "second", "base": "first", "branch": "feature/second"}}),
    )["Environment"]
        .clone();
    assert_eq!(second["branch"], "feature/second");
    assert!(
        PathBuf::from(second["path"].as_str().unwrap())
            .join("extra.txt")
            .is_file()
    );
    git(&repo(&app), &["tag", "v1"]);
    let third = app.request(json!({"CreateWorktree": {"name": "third", "base": "v1"}}));
    assert_eq!(
        third["Environment"]["base"],
        git(&repo(&app), &["rev-parse", "v1"])
    );
}

#[test]
fn worktreeinclude_files_are_copied_and_setup_runs_before_agents() {
    let app = app_with_commit(Some(
        "[worktrees]\nsetup = \"echo ran > setup-done.txt; echo setup-output\"\n",
    ));
    write(&repo(&app), ".gitignore", ".env\nsecrets/\n");
    write(&repo(&app), ".worktreeinclude", ".env\nsecrets/\n");
    write(&repo(&app), ".env", "TOKEN=1\n");
    write(&repo(&app), "secrets/key", "k\n");
    git(&repo(&app), &["add", ".gitignore", ".worktreeinclude"]);
    git(&repo(&app), &["commit", "-q", "-m", "ignore"]);
    let env = create(&app, "with-env");
    let path = PathBuf::from(env["path"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(path.join(".env")).unwrap(),
        "TOKEN=1\n"
    );
    assert_eq!(
        std::fs::read_to_string(path.join("secrets/key")).unwrap(),
        "k\n"
    );
    assert!(path.join("setup-done.txt").is_file());
    assert_eq!(env["setup"]["exit_code"], 0);
    assert!(
        env["setup"]["output"]
            .as_str()
            .unwrap()
            .contains("setup-output")
    );
    // An agent spawned there runs in the worktree.
    let id = app.spawn(json!({"profile": "exec", "environment": "with-env", "command": ["sh", "-c", "pwd; sleep 60"]}))
        ["terminal"]
        .as_u64()
        .unwrap();
    app.until_screen(id, path.to_str().unwrap());
    assert_eq!(app.record(id)["environment"], "with-env");
    let envs = app.request(json!("Environments"))["Environments"].clone();
    assert_eq!(envs[1]["terminals"], json!([id]));
}

#[test]
fn a_failed_setup_is_visible_and_keeps_agents_out() {
    let app = app_with_commit(Some("[worktrees]\nsetup = \"echo broken; exit 3\"\n"));
    let env = create(&app, "broken");
    assert_eq!(env["status"], "setup_failed");
    assert_eq!(env["setup"]["exit_code"], 3);
    let answer = app.request(
        json!({"Spawn": {"profile": "exec", "environment": "broken", "command": ["true"]}}),
    );
    assert_eq!(code(&answer), "conflict", "{answer}");
    assert!(
        answer["Error"]["message"]
            .as_str()
            .unwrap()
            .contains("broken")
    );
}

#[test]
fn changes_lists_committed_uncommitted_untracked_binary_and_renamed_files() {
    let app = app_with_commit(None);
    let env = create(&app, "work");
    let path = PathBuf::from(env["path"].as_str().unwrap());
    write(&path, "src/lib.rs", "fn one() {}\nfn two() {}\n");
    git(&path, &["mv", "README.md", "README.txt"]);
    git(&path, &["commit", "-q", "-am", "two"]);
    write(
        &path,
        "src/lib.rs",
        "fn one() {}\nfn two() {}\nfn three() {}\n",
    );
    std::fs::write(path.join("logo.bin"), [9u8, 0, 9, 0]).unwrap();
    write(&path, "notes/new.md", "a\nb\n");
    let status_before = git(&path, &["status", "--porcelain"]);
    let index_before = std::fs::read(git_index(&path)).unwrap();
    let changes =
        app.request(json!({"Changes": {"environment": "work", "patch": true}}))["Changes"].clone();
    assert_eq!(changes["base"], env["base"]);
    assert_eq!(changes["head"], git(&path, &["rev-parse", "HEAD"]));
    let file = |p: &str| {
        changes["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"] == p)
            .cloned()
            .unwrap_or_else(|| panic!("{p} missing: {changes}"))
    };
    assert_eq!(file("src/lib.rs")["status"], "modified");
    assert_eq!(
        (
            file("src/lib.rs")["added"].as_u64(),
            file("src/lib.rs")["removed"].as_u64()
        ),
        (Some(2), Some(0))
    );
    assert_eq!(file("README.txt")["status"], "renamed");
    assert_eq!(file("README.txt")["from"], "README.md");
    assert_eq!(file("logo.bin")["binary"], true);
    assert_eq!(file("notes/new.md")["status"], "added");
    assert_eq!(file("notes/new.md")["added"], 2);
    let patch = changes["patch"].as_str().unwrap();
    assert!(
        patch.contains("+fn three() {}") && patch.contains("rename from README.md"),
        "{patch}"
    );
    assert_eq!(changes["truncated"], false);
    // Computing it changed neither the index nor the files.
    assert_eq!(git(&path, &["status", "--porcelain"]), status_before);
    assert_eq!(std::fs::read(git_index(&path)).unwrap(), index_before);
    assert_eq!(
        code(&app.request(json!({"Changes": {"environment": "nope"}}))),
        "not_found"
    );
    // main: its uncommitted work.
    write(&repo(&app), "README.md", "changed\n");
    let main = app.request(json!({"Changes": {"environment": "main"}}))["Changes"].clone();
    assert_eq!(main["files"][0]["path"], "README.md");
    assert!(main.get("patch").is_none());
}

fn git_index(worktree: &Path) -> PathBuf {
    PathBuf::from(git(
        worktree,
        &["rev-parse", "--path-format=absolute", "--git-path", "index"],
    ))
}

#[test]
fn close_refuses_work_that_exists_nowhere_else_and_archives_with_force() {
    let app = app_with_commit(None);
    let env = create(&app, "risky");
    let path = PathBuf::from(env["path"].as_str().unwrap());
    let agent = app.spawn(json!({"profile": "exec", "environment": "risky", "command": ["sleep", "60"]}))["terminal"]
        .as_u64()
        .unwrap();
    commit_file(&path, "committed.txt", "c\n", "work");
    write(&path, "uncommitted.txt", "u\n");
    let refused = app.request(json!({"Close": {"environment": "risky"}}));
    assert_eq!(code(&refused), "conflict", "{refused}");
    assert_eq!(refused["Error"]["detail"]["commits"], 1);
    let said = refused["Error"]["message"].as_str().unwrap();
    assert!(
        said.contains("(1 uncommitted file, 1 unmerged commit)"),
        "{said}"
    );
    assert!(
        path.join("uncommitted.txt").exists(),
        "nothing may change on a refusal"
    );
    assert_eq!(app.record(agent)["state"], "starting");
    assert_eq!(
        app.request(json!({"Close": {"environment": "risky", "force": true}})),
        json!("Ok")
    );
    assert!(!path.exists());
    assert_eq!(
        code(&app.request(json!({"Check": {"target": agent}}))),
        "not_found"
    );
    assert!(git(&repo(&app), &["branch", "--list", "krad/risky"]).is_empty());
    // Plain git brings everything back, the uncommitted file included.
    let restored = app.dir.path().join("restored");
    git(
        &repo(&app),
        &[
            "worktree",
            "add",
            "-q",
            restored.to_str().unwrap(),
            "refs/krad/archive/risky",
        ],
    );
    assert!(restored.join("committed.txt").is_file() && restored.join("uncommitted.txt").is_file());
}

/// A git killed while it held `packed-refs.lock` (an agent's `git commit` ended
/// by a SIGKILL: a commit takes it to delete `AUTO_MERGE`) leaves it behind. The
/// app's next git command that fails on it removes it — no process holds it —
/// and goes on; a lock a live process holds open stays, and the error names the
/// process.
#[test]
fn a_git_lock_left_by_a_killed_git_is_removed_and_one_in_use_is_named() {
    let app = app_with_commit(None);
    create(&app, "left");
    create(&app, "held");
    let lock = repo(&app).join(".git/packed-refs.lock");
    std::fs::write(&lock, "").unwrap();
    let close = |name: &str| app.request(json!({"Close": {"environment": name, "force": true}}));
    assert_eq!(close("left"), json!("Ok"));
    assert!(!lock.exists(), "the lock left behind is still there");
    let branches = git(&repo(&app), &["branch", "--list", "krad/*"]);
    assert!(!branches.contains("krad/left"), "{branches}");

    // A process with the lock open (its fd 3): the Close fails and says who.
    let mut holder = std::process::Command::new("sh")
        .args(["-c", "exec 3>\"$0\"; exec sleep 60"])
        .arg(&lock)
        .spawn()
        .unwrap();
    wait_until(Duration::from_secs(60), || {
        std::fs::read_link(format!("/proc/{}/fd/3", holder.id())).is_ok_and(|t| t == lock)
    });
    let answer = close("held");
    assert_eq!(code(&answer), "failed", "{answer}");
    let message = answer["Error"]["message"].as_str().unwrap_or_default();
    let named = format!("held by process {} (sleep 60)", holder.id());
    assert!(message.contains(&named), "{answer}");
    assert!(lock.exists());
    holder.kill().unwrap();
    holder.wait().unwrap();
    assert_eq!(close("held"), json!("Ok"));
    assert!(!lock.exists());
}

#[test]
fn a_merged_environment_closes_without_force() {
    let app = app_with_commit(None);
    let env = create(&app, "merged");
    let path = PathBuf::from(env["path"].as_str().unwrap());
    commit_file(&path, "done.txt", "d\n", "done");
    git(&repo(&app), &["merge", "-q", "krad/merged"]);
    assert_eq!(
        app.request(json!({"Close": {"environment": "merged"}})),
        json!("Ok")
    );
    assert!(!git(&repo(&app), &["for-each-ref", "refs/krad/archive/merged"]).is_empty());
}

#[test]
fn work_squash_merged_or_cherry_picked_is_merged_by_content_and_closes_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let repo_dir = crate::support::git_repo(dir.path());
    commit_file(&repo_dir, "README.md", "hello\n", "first");
    let app = App::launch(Launch {
        reuse: Some(dir),
        rust_log: "info",
        ..Launch::default()
    });
    let main = repo(&app);
    // Squash-merged: two commits landed on main as one, by hand.
    let squashed = env_path(&create(&app, "squashed"));
    commit_file(&squashed, "a.txt", "a\n", "a");
    commit_file(&squashed, "b.txt", "b\n", "b");
    git(&main, &["merge", "-q", "--squash", "krad/squashed"]);
    git(&main, &["commit", "-q", "-m", "squashed"]);
    // Cherry-picked: its one commit copied onto main, after main moved on.
    let picked = env_path(&create(&app, "picked"));
    commit_file(&picked, "c.txt", "c\n", "c");
    commit_file(&main, "other.txt", "o\n", "main moves on");
    let tip = git(&picked, &["rev-parse", "HEAD"]);
    git(&main, &["cherry-pick", tip.as_str()]);
    // Genuinely unmerged.
    let open = env_path(&create(&app, "open"));
    commit_file(&open, "d.txt", "d\n", "d");

    for name in ["squashed", "picked"] {
        assert_eq!(
            app.request(json!({"Close": {"environment": name}})),
            json!("Ok"),
            "{name}"
        );
        assert!(
            !git(
                &main,
                &["for-each-ref", &format!("refs/krad/archive/{name}")]
            )
            .is_empty(),
            "{name} is archived all the same"
        );
    }
    assert!(!squashed.exists() && !picked.exists());
    let log = app.log();
    assert!(log.contains("squash-merged"), "{log}");
    assert!(
        log.contains("its commit is in HEAD by patch-id (cherry-picked"),
        "{log}"
    );
    let refused = app.request(json!({"Close": {"environment": "open"}}));
    assert_eq!(code(&refused), "conflict", "{refused}");
    assert_eq!(refused["Error"]["detail"]["commits"], 1);
    assert!(open.join("d.txt").is_file());
    // Squash-merged with a change on top of it in main is still merged.
    let later = env_path(&create(&app, "later"));
    commit_file(&later, "e.txt", "e\n", "e");
    git(&main, &["merge", "-q", "--squash", "krad/later"]);
    git(&main, &["commit", "-q", "-m", "later, squashed"]);
    commit_file(&main, "e.txt", "e, edited\n", "edited");
    assert_eq!(
        app.request(json!({"Close": {"environment": "later"}})),
        json!("Ok")
    );
}

/// Variants whose agents each write a different file and commit nothing.
fn run_three(app: &App, name: &str) -> Value {
    let variants = app.answered(json!({"RunVariants": {
        "count": 3, "name": name, "profile": "exec",
        "command": ["sh", "-c", "echo \"variant of $KRAD_ADE_ENVIRONMENT\" > \"result-$KRAD_ADE_ENVIRONMENT.txt\"; echo \"$1\" > task.txt", "sh"],
        "prompt": "fix it"
    }}), "Variants");
    for v in variants["variants"].as_array().unwrap() {
        app.until_state(v["terminal"].as_u64().unwrap(), "exited");
    }
    variants
}

#[test]
fn run_variants_starts_n_agents_from_one_base_and_merge_picks_one() {
    let app = app_with_commit(None);
    let variants = run_three(&app, "login");
    assert_eq!(variants["group"], "login");
    let list = variants["variants"].as_array().unwrap();
    assert_eq!(list.len(), 3);
    let envs = app.request(json!("Environments"))["Environments"].clone();
    let bases: Vec<&Value> = envs.as_array().unwrap()[1..]
        .iter()
        .map(|e| &e["base"])
        .collect();
    assert!(bases.iter().all(|b| *b == bases[0]));
    assert_eq!(envs[2]["group"], "login");
    assert_eq!(envs[2]["variant"], 2);
    let agent = app.record(list[1]["terminal"].as_u64().unwrap());
    assert_eq!(
        (agent["group"].clone(), agent["variant"].clone()),
        (json!("login"), json!(2))
    );
    let picked =
        app.request(json!({"PickVariant": {"group": "login", "variant": 2}}))["Picked"].clone();
    assert_eq!(picked["into"], "main");
    assert_eq!(picked["branch"], "krad/login-2");
    assert_eq!(picked["commit"], git(&repo(&app), &["rev-parse", "HEAD"]));
    assert_eq!(
        std::fs::read_to_string(repo(&app).join("result-login-2.txt")).unwrap(),
        "variant of login-2\n"
    );
    assert_eq!(
        std::fs::read_to_string(repo(&app).join("task.txt")).unwrap(),
        "fix it\n"
    );
    assert!(!repo(&app).join("result-login-1.txt").exists());
    // The others are archived and closed; the picked one stays.
    let names: Vec<String> = app.request(json!("Environments"))["Environments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["main", "login-2"]);
    for loser in ["login-1", "login-3"] {
        let archived = git(
            &repo(&app),
            &[
                "show",
                &format!("refs/krad/archive/{loser}:result-{loser}.txt"),
            ],
        );
        assert_eq!(archived, format!("variant of {loser}"));
    }
    assert_eq!(
        code(&app.request(json!({"PickVariant": {"group": "nope", "variant": 1}}))),
        "not_found"
    );
    assert_eq!(
        code(&app.request(json!({"PickVariant": {"group": "login", "variant": 9}}))),
        "not_found"
    );
}

#[test]
fn run_variants_refuses_bad_fields_and_makes_nothing() {
    let app = app_with_commit(None);
    let base = json!({"count": 2, "profile": "exec", "command": ["true"], "prompt": "x"});
    let with = |key: &str, value: Value| {
        let mut fields = base.clone();
        fields[key] = value;
        fields
    };
    let cases = [
        (with("count", json!(0)), "invalid", "count"),
        (with("count", json!(17)), "invalid", "count"),
        (with("prompt", json!("")), "invalid", "prompt"),
        (with("prompt", json!(" \n\t")), "invalid", "prompt"),
        (with("name", json!("../escape")), "invalid", "name"),
        (with("name", json!("n".repeat(61))), "invalid", "name"),
        (with("command", json!([""])), "invalid", "command"),
        (with("count", json!("two")), "bad_request", "count"),
    ];
    for (fields, expected, field) in cases {
        let answer = app.request(json!({"RunVariants": fields}));
        assert_eq!(code(&answer), expected, "{fields} → {answer}");
        assert_eq!(answer["Error"]["detail"]["field"], field, "{answer}");
    }
    assert_eq!(environments(&app).len(), 1, "only main");
    let listed = app.request(json!("List"));
    assert_eq!(
        listed["Agents"].as_array().map(Vec::len),
        Some(0),
        "{listed}"
    );
}

#[test]
fn squash_lands_one_commit_and_branch_keeps_the_branch_only() {
    let app = app_with_commit(None);
    run_three(&app, "sq");
    let before = git(&repo(&app), &["rev-parse", "HEAD"]);
    let picked = app.request(json!({"PickVariant": {"group": "sq", "variant": 1, "how": "squash", "close_others": false}}))["Picked"].clone();
    assert_eq!(git(&repo(&app), &["rev-parse", "HEAD~1"]), before);
    assert_eq!(
        git(&repo(&app), &["log", "-1", "--format=%P"])
            .split(' ')
            .count(),
        1,
        "a squash has one parent"
    );
    assert!(repo(&app).join("result-sq-1.txt").is_file());
    assert_eq!(picked["commit"], git(&repo(&app), &["rev-parse", "HEAD"]));
    assert_eq!(environments(&app).len(), 4);
    let kept = app.request(json!({"PickVariant": {"group": "sq", "variant": 3, "how": "branch"}}))
        ["Picked"]
        .clone();
    assert_eq!(kept["into"], Value::Null);
    assert_eq!(
        kept["commit"],
        git(&repo(&app), &["rev-parse", "krad/sq-3"])
    );
    assert!(git(&repo(&app), &["show", "krad/sq-3:result-sq-3.txt"]).contains("sq-3"));
    assert_eq!(
        git(&repo(&app), &["rev-parse", "HEAD"]),
        picked["commit"].as_str().unwrap()
    );
}

#[test]
fn a_dirty_target_refuses_the_pick_and_nothing_changes() {
    let app = app_with_commit(None);
    run_three(&app, "dirty");
    write(&repo(&app), "README.md", "local edit\n");
    let head = git(&repo(&app), &["rev-parse", "HEAD"]);
    let answer = app.request(json!({"PickVariant": {"group": "dirty", "variant": 1}}));
    assert_eq!(code(&answer), "conflict", "{answer}");
    assert_eq!(answer["Error"]["detail"]["files"], json!(["README.md"]));
    assert_eq!(git(&repo(&app), &["rev-parse", "HEAD"]), head);
    assert_eq!(
        std::fs::read_to_string(repo(&app).join("README.md")).unwrap(),
        "local edit\n"
    );
    assert_eq!(environments(&app).len(), 4);
}

#[test]
fn a_merge_conflict_is_refused_with_its_files_and_nothing_changes() {
    let app = app_with_commit(None);
    let answer = app.request(json!({"RunVariants": {
        "count": 1, "name": "clash", "profile": "exec",
        "command": ["sh", "-c", "echo 'from the variant' > README.md"], "prompt": "x"
    }}));
    app.until_state(
        answer["Variants"]["variants"][0]["terminal"]
            .as_u64()
            .unwrap(),
        "exited",
    );
    write(&repo(&app), "README.md", "from main\n");
    git(&repo(&app), &["commit", "-q", "-am", "main moves on"]);
    let head = git(&repo(&app), &["rev-parse", "HEAD"]);
    for how in ["merge", "squash"] {
        let answer =
            app.request(json!({"PickVariant": {"group": "clash", "variant": 1, "how": how}}));
        assert_eq!(code(&answer), "conflict", "{how}: {answer}");
        assert_eq!(answer["Error"]["detail"]["files"], json!(["README.md"]));
        assert_eq!(git(&repo(&app), &["rev-parse", "HEAD"]), head);
        assert_eq!(
            git(&repo(&app), &["status", "--porcelain"]),
            "",
            "a half merge was left behind"
        );
        assert!(!repo(&app).join(".git/MERGE_HEAD").exists());
    }
}

#[test]
fn a_retried_request_id_replays_and_a_reused_one_is_refused() {
    let app = app_with_commit(None);
    let mut envelope = app.envelope(json!({"CreateWorktree": {"name": "once"}}));
    envelope["request_id"] = json!("create-once-1");
    let first = app.call(&envelope);
    assert_eq!(first["Environment"]["name"], "once");
    let second = app.call(&envelope);
    assert_eq!(second["Environment"]["replayed"], true, "{second}");
    assert_eq!(second["Environment"]["path"], first["Environment"]["path"]);
    assert_eq!(environments(&app).len(), 2);
    let mut other = app.envelope(json!({"CreateWorktree": {"name": "twice"}}));
    other["request_id"] = json!("create-once-1");
    assert_eq!(code(&app.call(&other)), "request_id_reused");
    // A Spawn with an id runs once; "Ok" answers replay as {"Ok":{"replayed":true}}.
    let mut spawn = app.envelope(json!({"Spawn": {"profile": "exec", "command": ["sleep", "60"]}}));
    spawn["request_id"] = json!("spawn-1");
    let a = app.call(&spawn)["Agent"]["terminal"].clone();
    let b = app.call(&spawn);
    assert_eq!(b["Agent"]["terminal"], a);
    assert_eq!(
        app.request(json!("List"))["Agents"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let mut close = app.envelope(json!({"Close": {"target": a}}));
    close["request_id"] = json!("close-1");
    assert_eq!(app.call(&close), json!("Ok"));
    assert_eq!(app.call(&close), json!({"Ok": {"replayed": true}}));
    // The ids survive a restart.
    let app = app.again(None);
    let mut again = app.envelope(json!({"CreateWorktree": {"name": "once"}}));
    again["request_id"] = json!("create-once-1");
    assert_eq!(app.call(&again)["Environment"]["replayed"], true);
}

#[test]
fn plain_terminals_cannot_make_environments() {
    let app = app_with_commit(None);
    let (id, token) = app.plain_terminal();
    for request in [
        json!({"CreateWorktree": {"name": "x"}}),
        json!({"RunVariants": {"count": 1, "prompt": "x"}}),
        json!({"PickVariant": {"group": "g", "variant": 1}}),
        json!({"Close": {"environment": "x"}}),
    ] {
        assert_eq!(
            code(&app.call_as(id, &token, request.clone())),
            "forbidden",
            "{request}"
        );
    }
    assert!(app.call_as(id, &token, json!("Environments"))["Environments"].is_array());
}

#[test]
fn a_run_variants_killed_midway_is_finished_at_restart_and_its_retry_gets_the_group() {
    let mut app = app_with_commit(Some("[worktrees]\nsetup = \"sleep 0.7\"\n"));
    let endpoint = app.endpoint;
    let mut envelope = app.envelope(json!({"RunVariants": {"count": 4, "name": "crash", "profile": "exec", "command": ["sleep", "60"], "prompt": "x"}}));
    envelope["request_id"] = json!("rv-crash");
    let first = envelope.clone();
    let runner = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(endpoint).unwrap();
        stream.write_all(format!("{first}\n").as_bytes()).unwrap();
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
    });
    // Killed while the first variant's setup runs (0.7 s each): the group is
    // recorded, one worktree made, no agent started.
    let repo_path = repo(&app);
    wait_until(Duration::from_secs(20), || {
        // The app adds it meanwhile: a list may read its files half-written.
        crate::support::git_tried(&repo_path, &["worktree", "list"])
            .is_ok_and(|listed| listed.contains("crash-1"))
    });
    app.child.kill().unwrap();
    app.wait_exit(Duration::from_secs(10));
    runner.join().unwrap();
    let app = app.again(None);
    // Finished at the start: four variants, each set up, each with its agent.
    let envs = app.request(json!("Environments"))["Environments"].clone();
    let envs = envs.as_array().unwrap();
    assert_eq!(envs.len(), 5, "{envs:?}");
    for env in &envs[1..] {
        assert_eq!(env["group"], "crash");
        assert_eq!(env["status"], "ready", "{env}");
    }
    let listed = git(&repo_path, &["worktree", "list", "--porcelain"]);
    assert_eq!(listed.matches("/.krad/worktrees/").count(), 4, "{listed}");
    // The retry with the same id gets the group, replayed, never a conflict.
    envelope["token"] = app.envelope(json!("List"))["token"].clone();
    let again = app.call(&envelope);
    assert_eq!(again["Variants"]["replayed"], true, "{again}");
    let variants = again["Variants"]["variants"].as_array().unwrap().clone();
    assert_eq!(variants.len(), 4, "{again}");
    let agents = app.request(json!("List"))["Agents"].clone();
    for v in &variants {
        let id = v["terminal"].as_u64().unwrap();
        assert!(
            agents
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a["terminal"] == id),
            "variant {v} has its agent: {agents}"
        );
    }
    let id = app.spawn_sh("sleep 60");
    assert!(id > 4, "terminal ids are never reused: {id}");
}

#[test]
fn a_pick_killed_mid_merge_is_finished_or_undone_and_its_retry_gets_the_pick() {
    let mut app = app_with_commit(None);
    run_three(&app, "mid");
    let repo_path = repo(&app);
    // main moves on, so the pick is a real merge (not a fast-forward).
    write(&repo_path, "other.txt", "o\n");
    git(&repo_path, &["add", "other.txt"]);
    git(&repo_path, &["commit", "-q", "-m", "other"]);
    // git stops inside the merge (its tree merged into the index, MERGE_HEAD
    // written, the commit not made) until the test lets it go on.
    let gate = repo_path.join("gate");
    let hooks = repo_path.join(".git/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    let hook = hooks.join("pre-merge-commit");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\ntouch {0}.inside\nwhile [ -e {0} ]; do sleep 0.02; done\n",
            gate.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(&gate, "").unwrap();
    let before = git(&repo_path, &["rev-parse", "HEAD"]);
    let mut envelope =
        app.envelope(json!({"PickVariant": {"group": "mid", "variant": 2, "how": "merge"}}));
    envelope["request_id"] = json!("pick-mid");
    let first = envelope.clone();
    let endpoint = app.endpoint;
    let runner = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(endpoint).unwrap();
        stream.write_all(format!("{first}\n").as_bytes()).unwrap();
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
    });
    wait_until(Duration::from_secs(20), || {
        repo_path.join("gate.inside").exists()
    });
    // Mid-merge: the variant's work is in main's files, not yet committed.
    assert!(repo_path.join("result-mid-2.txt").exists());
    assert_eq!(git(&repo_path, &["rev-parse", "HEAD"]), before);
    app.child.kill().unwrap();
    app.wait_exit(Duration::from_secs(10));
    runner.join().unwrap();
    // git outlives the app that started it, and finishes once let go.
    std::fs::remove_file(&gate).unwrap();
    let app = app.again(None);
    envelope["token"] = app.envelope(json!("List"))["token"].clone();
    let picked = app.call(&envelope);
    assert_eq!(picked["Picked"]["variant"], 2, "{picked}");
    let head = git(&repo_path, &["rev-parse", "HEAD"]);
    assert_eq!(picked["Picked"]["commit"], head.as_str());
    assert_eq!(git(&repo_path, &["rev-parse", "HEAD^1"]), before);
    assert_eq!(
        git(&repo_path, &["rev-parse", "HEAD^2"]),
        git(&repo_path, &["rev-parse", "krad/mid-2"])
    );
    assert!(!repo_path.join(".git/MERGE_HEAD").exists());
    assert_eq!(
        git(
            &repo_path,
            &["status", "--porcelain", "--untracked-files=no"]
        ),
        ""
    );
    assert!(repo_path.join("result-mid-2.txt").exists());
    let again = app.call(&envelope);
    assert_eq!(again["Picked"]["commit"], head.as_str(), "{again}");
    assert_eq!(again["Picked"]["replayed"], true);
}

#[test]
fn the_cli_for_environments_exits_8_on_conflict() {
    let app = app_with_commit(None);
    let out = app.krad(&["worktree", "create", "cli-env"]);
    assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("krad/cli-env"));
    let out = app.krad(&["worktree", "create", "cli-env"]);
    assert_eq!(exit_code(&out), 8);
    let out = app.krad(&["envs"]);
    assert!(stdout(&out).contains("cli-env") && stdout(&out).contains("worktree"));
    let path = app.request(json!("Environments"))["Environments"][1]["path"]
        .as_str()
        .unwrap()
        .to_owned();
    write(Path::new(&path), "new.txt", "one\ntwo\n");
    let out = app.krad(&["changes", "cli-env"]);
    assert!(
        stdout(&out).contains("new.txt") && stdout(&out).contains("+2 -0"),
        "{}",
        stdout(&out)
    );
    let out = app.krad(&["changes", "cli-env", "--patch"]);
    assert!(
        stdout(&out).contains("+one") && !stdout(&out).contains("\x1b["),
        "no colour off a terminal"
    );
    assert_eq!(exit_code(&app.krad(&["close", "--env", "cli-env"])), 8);
    assert_eq!(
        exit_code(&app.krad(&["close", "--env", "cli-env", "--force"])),
        0
    );
    let out = app.krad(&[
        "variants",
        "run",
        "2",
        "--json",
        "--name",
        "cv",
        "--profile",
        "exec",
        "--prompt",
        "p",
        "--",
        "sh",
        "-c",
        "echo $KRAD_ADE_ENVIRONMENT > who.txt",
    ]);
    assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(run["Variants"]["variants"][1]["environment"], "cv-2");
    let v: Value = serde_json::from_slice(&app.krad(&["envs", "--json"]).stdout).unwrap();
    assert_eq!(v["Environments"].as_array().unwrap().len(), 3);
    for variant in run["Variants"]["variants"].as_array().unwrap() {
        let id = variant["terminal"].as_u64().unwrap();
        app.until(id, Duration::from_secs(20), |r| r["state"] == "exited");
    }
    let out = app.krad(&["variants", "pick", "cv", "2", "--how", "squash"]);
    assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(repo(&app).join("who.txt")).unwrap(),
        "cv-2\n"
    );
}

/// What a worktree looks like to git: its HEAD, `git status`, its index file's
/// bytes and every ref — equal before and after anything that must change nothing.
fn untouched(path: &Path) -> (String, String, Vec<u8>, String) {
    (
        git(path, &["rev-parse", "HEAD"]),
        git(path, &["status", "--porcelain", "--untracked-files=all"]),
        std::fs::read(git_index(path)).unwrap(),
        git(path, &["for-each-ref"]),
    )
}

/// The environments the app lists.
fn environments(app: &App) -> Vec<Value> {
    listed(app, "Environments")
}

fn env_path(env: &Value) -> PathBuf {
    PathBuf::from(env["path"].as_str().unwrap())
}

/// An app on a repository with a commit, and worktrees of it named `names`:
/// their paths.
fn app_with_worktrees<const N: usize>(names: [&str; N]) -> (App, [PathBuf; N]) {
    let app = app_with_commit(None);
    let paths = names.map(|name| env_path(&create(&app, name)));
    (app, paths)
}

/// The pair of `a` and `b` in a Conflicts answer.
fn pair<'a>(answer: &'a Value, a: &str, b: &str) -> &'a Value {
    answer["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| (p["a"] == a && p["b"] == b) || (p["a"] == b && p["b"] == a))
        .unwrap_or_else(|| panic!("no pair {a} {b}: {answer}"))
}

fn environment<'a>(answer: &'a Value, name: &str) -> &'a Value {
    named(&answer["environments"], name)
}

#[test]
fn conflicts_foresees_every_pair_and_each_base_from_committed_and_uncommitted_work() {
    let (app, [a, b, c]) = app_with_worktrees(["a", "b", "c"]);
    // a commits README.md; b changes it without committing: they conflict.
    commit_file(&a, "README.md", "from a\n", "a's readme");
    write(&b, "README.md", "from b\n");
    // c only adds an untracked file: clean with everyone.
    write(&c, "c.txt", "c\n");
    // main moves on in src/lib.rs, which a changes too (uncommitted).
    commit_file(
        &repo(&app),
        "src/lib.rs",
        "fn main_one() {}\n",
        "main moves",
    );
    write(&a, "src/lib.rs", "fn a_one() {}\n");
    let before: Vec<_> = [&a, &b, &c, &repo(&app)]
        .iter()
        .map(|p| untouched(p))
        .collect();
    let answer = app.request(json!("Conflicts"));
    let answer = &answer["Conflicts"];
    let names = each(&answer["environments"], "name");
    assert_eq!(names, ["main", "a", "b", "c"], "{answer}");
    assert_eq!(answer["pairs"].as_array().unwrap().len(), 6, "{answer}");
    assert_eq!(pair(answer, "a", "b")["clean"], false);
    assert_eq!(pair(answer, "a", "b")["files"], json!(["README.md"]));
    assert_eq!(pair(answer, "main", "a")["files"], json!(["src/lib.rs"]));
    for (x, y) in [("a", "c"), ("b", "c"), ("main", "b"), ("main", "c")] {
        assert_eq!(pair(answer, x, y)["clean"], true, "{x} {y}: {answer}");
        assert_eq!(pair(answer, x, y)["files"], json!([]));
    }
    let main_tip = git(&repo(&app), &["rev-parse", "HEAD"]);
    let base = &environment(answer, "a")["base"];
    assert_eq!(base["environment"], "main");
    assert_eq!(base["tip"], main_tip.as_str());
    assert_eq!(base["clean"], false);
    assert_eq!(base["files"], json!(["src/lib.rs"]));
    assert_eq!(environment(answer, "b")["base"]["clean"], true);
    assert!(environment(answer, "main").get("base").is_none());
    for (name, uncommitted) in [("main", false), ("a", true), ("b", true), ("c", true)] {
        assert_eq!(
            environment(answer, name)["uncommitted"],
            uncommitted,
            "{name}"
        );
    }
    assert_eq!(
        environment(answer, "a")["head"],
        git(&a, &["rev-parse", "HEAD"]).as_str()
    );
    // The snapshot is the working tree, uncommitted work included.
    let tree = environment(answer, "b")["tree"].as_str().unwrap();
    assert_eq!(git(&b, &["show", &format!("{tree}:README.md")]), "from b");
    // A change of the same size, in the same second as the last snapshot, is
    // seen (the index krad keeps between snapshots is never trusted blindly).
    write(&b, "README.md", "from B\n");
    let again = app.request(json!({"Conflicts": {"environments": ["b"]}}));
    let tree = again["Conflicts"]["environments"][0]["tree"]
        .as_str()
        .unwrap();
    assert_eq!(git(&b, &["show", &format!("{tree}:README.md")]), "from B");
    write(&b, "README.md", "from b\n");
    // Nothing was touched: HEADs, files, indexes, refs.
    let after: Vec<_> = [&a, &b, &c, &repo(&app)]
        .iter()
        .map(|p| untouched(p))
        .collect();
    assert!(before == after, "Conflicts changed a worktree");
    // Named environments: only those, in the usual order.
    let some = app.request(json!({"Conflicts": {"environments": ["b", "a"]}}));
    let names = each(&some["Conflicts"]["environments"], "name");
    assert_eq!(names, ["a", "b"]);
    assert_eq!(some["Conflicts"]["pairs"].as_array().unwrap().len(), 1);
    // Every error path.
    let nope = app.request(json!({"Conflicts": {"environments": ["a", "nope"]}}));
    assert_eq!(code(&nope), "not_found", "{nope}");
    assert_eq!(nope["Error"]["detail"]["environment"], "nope");
    assert_eq!(
        code(&app.request(json!({"Conflicts": {"environments": []}}))),
        "invalid"
    );
    assert_eq!(
        code(&app.request(json!({"Conflicts": {"environments": ["../x"]}}))),
        "invalid"
    );
    assert_eq!(
        code(&app.request(json!({"Conflicts": {"environments": "a"}}))),
        "bad_request"
    );
    // A worktree whose directory is gone is listed, with why, and not paired.
    std::fs::remove_dir_all(&c).unwrap();
    let gone = app.request(json!("Conflicts"));
    let gone = &gone["Conflicts"];
    assert!(
        environment(gone, "c")["error"]
            .as_str()
            .unwrap()
            .contains("gone"),
        "{gone}"
    );
    assert_eq!(gone["pairs"].as_array().unwrap().len(), 3, "{gone}");
    // Any terminal may ask (reading, like Environments).
    let (id, token) = app.plain_terminal();
    assert!(app.call_as(id, &token, json!("Conflicts"))["Conflicts"].is_object());
    // The CLI: a matrix, the conflicting files, and the raw answer with --json.
    let text = app.krad_ok(&["conflicts"]);
    assert!(
        text.contains("ENVIRONMENT") && text.contains("a and b: README.md"),
        "{text}"
    );
    assert!(text.contains("a against main"), "{text}");
    let out = app.krad(&["conflicts", "a", "b", "--json"]);
    let raw: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(raw["Conflicts"]["pairs"][0]["files"], json!(["README.md"]));
    assert_eq!(exit_code(&app.krad(&["conflicts", "nope"])), 3);
}

#[test]
fn conflicts_of_16_environments_well_within_5_seconds_and_watch_sees_a_change() {
    let _bound = crate::support::latency_bound();
    let app = app_with_commit(None);
    let mut paths = Vec::new();
    for n in 1..=16 {
        let path = env_path(&create(&app, &format!("e{n:02}")));
        // Every environment has work: odd ones commit, even ones leave it
        // uncommitted; every fourth touches README.md, so they conflict.
        let file = if n % 4 == 0 {
            "README.md".to_owned()
        } else {
            format!("f{n}.txt")
        };
        if n % 2 == 1 {
            commit_file(&path, &file, &format!("{n}\n"), "work");
        } else {
            write(&path, &file, &format!("{n}\n"));
        }
        paths.push(path);
    }
    commit_file(&repo(&app), "README.md", "main\n", "main moves");
    let mut times = Vec::new();
    let mut answer = Value::Null;
    for _ in 0..3 {
        let started = std::time::Instant::now();
        answer = app.request(json!("Conflicts"));
        times.push(started.elapsed());
    }
    let answer = &answer["Conflicts"];
    assert_eq!(
        answer["pairs"].as_array().unwrap().len(),
        17 * 16 / 2,
        "{answer}"
    );
    // e04, e08, e12, e16 and main all change README.md differently.
    let conflicting = answer["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["clean"] == false)
        .count();
    assert_eq!(conflicting, 10, "{answer}");
    assert_eq!(environment(answer, "e04")["base"]["clean"], false);
    assert_eq!(environment(answer, "e03")["base"]["clean"], true);
    eprintln!("Conflicts on 16 environments and main (136 pairs): {times:?}");
    let slowest = times.iter().max().unwrap();
    assert!(
        *slowest < Duration::from_secs(5),
        "Conflicts took {slowest:?} for 16 environments"
    );
    // --watch prints again when a worktree's files change (polling every 2 s).
    let mut watch = std::process::Command::new(crate::support::KRAD)
        .args(["conflicts", "--watch", "e01", "e03"])
        .env("KRAD_ADE_API_JSON", &app.api_json)
        .env_remove("KRAD_ADE_ENDPOINT")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (lines, seen) = std::sync::mpsc::channel();
    let stdout = watch.stdout.take().unwrap();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout).lines() {
            if lines.send(line.unwrap_or_default()).is_err() {
                break;
            }
        }
    });
    let until = |text: &str| {
        let limit = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let left = limit.saturating_duration_since(std::time::Instant::now());
            match seen.recv_timeout(left) {
                Ok(line) if line.contains(text) => return std::time::Instant::now(),
                Ok(_) => {}
                Err(e) => panic!("--watch never printed {text:?}: {e}"),
            }
        }
    };
    until("no conflicts");
    let changed = std::time::Instant::now();
    write(&paths[2], "f1.txt", "not what e01 says\n");
    let printed = until("e01 and e03: f1.txt");
    let _ = watch.kill();
    let _ = watch.wait();
    eprintln!(
        "krad conflicts --watch showed a new conflict {:?} after the change",
        printed - changed
    );
    assert!(printed - changed < Duration::from_secs(5));
}

#[test]
fn a_dry_run_pick_says_what_would_land_and_changes_nothing() {
    let app = app_with_commit(None);
    run_three(&app, "dry");
    // main moves on, so a merge is a real merge commit.
    commit_file(&repo(&app), "other.txt", "o\n", "other");
    let envs = app.request(json!("Environments"))["Environments"].clone();
    let variant = |n: usize| env_path(&envs[n]);
    let before: Vec<_> = [variant(1), variant(2), variant(3), repo(&app)]
        .iter()
        .map(|p| untouched(p))
        .collect();
    let main_head = git(&repo(&app), &["rev-parse", "HEAD"]);
    let ask = |how: &str, n: u32| {
        let answer = app.request(
            json!({"PickVariant": {"group": "dry", "variant": n, "how": how, "dry_run": true}}),
        );
        assert!(answer["Picked"]["dry_run"].is_object(), "{answer}");
        answer["Picked"].clone()
    };
    let merge = ask("merge", 2);
    let would = &merge["dry_run"];
    assert_eq!(merge["commit"], main_head.as_str(), "the target as it is");
    assert_eq!(merge["into"], "main");
    assert_eq!(
        would["message"],
        "krad: merge variant 2 of dry (krad/dry-2)"
    );
    assert_eq!(would["files"], json!(["result-dry-2.txt", "task.txt"]));
    assert_eq!(
        would["uncommitted"],
        json!(["result-dry-2.txt", "task.txt"])
    );
    assert_eq!(would["conflicts"], json!([]));
    assert!(would.get("fast_forward").is_none());
    let squash = ask("squash", 1);
    assert_eq!(
        squash["dry_run"]["message"],
        "krad: variant 1 of dry (squashed from krad/dry-1)"
    );
    let branch = ask("branch", 3);
    assert_eq!(branch["into"], Value::Null);
    assert_eq!(
        branch["commit"],
        git(&variant(3), &["rev-parse", "HEAD"]).as_str()
    );
    assert_eq!(
        branch["dry_run"]["message"],
        "krad: the work of variant 3 of dry"
    );
    assert_eq!(
        branch["dry_run"]["files"],
        json!(["result-dry-3.txt", "task.txt"])
    );
    // Nothing changed: no commit in the variants or main, no variant closed.
    let after: Vec<_> = [variant(1), variant(2), variant(3), repo(&app)]
        .iter()
        .map(|p| untouched(p))
        .collect();
    assert!(before == after, "a dry run changed something");
    assert_eq!(environments(&app).len(), 4);
    // A dirty target is refused as the pick would refuse it.
    write(&repo(&app), "other.txt", "dirty\n");
    let dirty =
        app.request(json!({"PickVariant": {"group": "dry", "variant": 2, "dry_run": true}}));
    assert_eq!(code(&dirty), "conflict", "{dirty}");
    assert_eq!(dirty["Error"]["detail"]["files"], json!(["other.txt"]));
    git(&repo(&app), &["checkout", "-q", "other.txt"]);
    assert_eq!(
        code(&app.request(json!({"PickVariant": {"group": "dry", "variant": 9, "dry_run": true}}))),
        "not_found"
    );
    // The CLI says what would land, and that nothing changed.
    let out = app.krad(&["variants", "pick", "dry", "2", "--dry-run"]);
    assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("would commit on main")
            && stdout(&out).contains("nothing was changed"),
        "{}",
        stdout(&out)
    );
    // The real pick lands exactly the tree the dry run foresaw.
    let picked = app.request(json!({"PickVariant": {"group": "dry", "variant": 2}}));
    assert!(picked["Picked"].is_object(), "{picked}");
    assert_eq!(
        git(&repo(&app), &["rev-parse", "HEAD^{tree}"]),
        would["tree"].as_str().unwrap()
    );
    assert_eq!(
        git(&repo(&app), &["log", "-1", "--format=%s"]),
        would["message"].as_str().unwrap()
    );
}

#[test]
fn a_dry_run_lists_the_conflicts_and_a_fast_forward() {
    let app = app_with_commit(None);
    let answer = app.request(json!({"RunVariants": {
        "count": 2, "name": "clash", "profile": "exec",
        "command": ["sh", "-c", "echo \"from $KRAD_ADE_ENVIRONMENT\" > README.md"], "prompt": "x"
    }}));
    for v in answer["Variants"]["variants"].as_array().unwrap() {
        app.until_state(v["terminal"].as_u64().unwrap(), "exited");
    }
    // main has not moved: variant 1 would fast-forward it.
    let ff = app.request(json!({"PickVariant": {"group": "clash", "variant": 1, "dry_run": true}}));
    let would = &ff["Picked"]["dry_run"];
    assert_eq!(would["fast_forward"], true, "{ff}");
    assert_eq!(would["message"], Value::Null);
    assert_eq!(would["files"], json!(["README.md"]));
    commit_file(&repo(&app), "README.md", "from main\n", "main moves on");
    let head = untouched(&repo(&app));
    let dry = app.request(
        json!({"PickVariant": {"group": "clash", "variant": 2, "how": "squash", "dry_run": true}}),
    );
    assert_eq!(
        dry["Picked"]["dry_run"]["conflicts"],
        json!(["README.md"]),
        "{dry}"
    );
    assert_eq!(untouched(&repo(&app)), head);
    // The CLI exits 8, as the pick would.
    let out = app.krad(&["variants", "pick", "clash", "2", "--dry-run"]);
    assert_eq!(exit_code(&out), 8, "{}", stdout(&out));
    assert!(stdout(&out).contains("README.md"), "{}", stdout(&out));
    assert_eq!(untouched(&repo(&app)), head);
}

#[test]
fn update_brings_an_environment_up_to_its_base_by_merge_or_rebase() {
    let (app, [up, ff, rb]) = app_with_worktrees(["up", "ff", "rb"]);
    commit_file(&up, "up.txt", "u\n", "up's work");
    commit_file(&rb, "rb1.txt", "1\n", "rb one");
    git(&rb, &["commit", "-q", "--allow-empty", "-m", "empty"]);
    write(&rb, "rb2.txt", "2\n");
    git(&rb, &["add", "rb2.txt"]);
    git(
        &rb,
        &[
            "-c",
            "user.name=Ada",
            "-c",
            "user.email=ada@x",
            "commit",
            "-q",
            "-m",
            "rb two",
        ],
    );
    commit_file(&repo(&app), "main.txt", "m\n", "main moves on");
    let tip = git(&repo(&app), &["rev-parse", "HEAD"]);
    // Merge (the default).
    let up_before = git(&up, &["rev-parse", "HEAD"]);
    let updated = app.request(json!({"UpdateEnvironment": {"environment": "up"}}));
    let updated = &updated["Updated"];
    assert_eq!(updated["base_environment"], "main", "{updated}");
    assert_eq!(updated["base"], tip.as_str());
    assert_eq!(updated["before"], up_before.as_str());
    assert_eq!(updated["head"], git(&up, &["rev-parse", "HEAD"]).as_str());
    assert_eq!(
        git(&up, &["log", "-1", "--format=%P"]),
        format!("{up_before} {tip}")
    );
    assert!(up.join("main.txt").is_file() && up.join("up.txt").is_file());
    assert_eq!(git(&up, &["status", "--porcelain"]), "");
    // Its base is now that tip: Changes shows its own work only.
    let changes = app.request(json!({"Changes": {"environment": "up"}}))["Changes"].clone();
    assert_eq!(changes["base"], tip.as_str());
    assert_eq!(changes["files"].as_array().unwrap().len(), 1, "{changes}");
    // Up to date: nothing moves.
    let again = app.request(json!({"UpdateEnvironment": {"environment": "up"}}))["Updated"].clone();
    assert_eq!(again["before"], again["head"]);
    // No commits of its own: a fast-forward.
    let forwarded =
        app.request(json!({"UpdateEnvironment": {"environment": "ff", "how": "rebase"}}));
    assert_eq!(forwarded["Updated"]["fast_forward"], true, "{forwarded}");
    assert_eq!(git(&ff, &["rev-parse", "HEAD"]), tip);
    // Rebase: its commits replayed on the tip, authors and messages kept,
    // the commit that became empty dropped.
    let rebased = app.request(json!({"UpdateEnvironment": {"environment": "rb", "how": "rebase"}}));
    assert!(rebased["Updated"].is_object(), "{rebased}");
    assert_eq!(git(&rb, &["rev-parse", "HEAD~2"]), tip);
    assert_eq!(
        git(&rb, &["log", "--format=%s|%an", &format!("{tip}..HEAD")]),
        "rb two|Ada\nrb one|t"
    );
    assert!(rb.join("main.txt").is_file() && rb.join("rb2.txt").is_file());
    assert_eq!(git(&rb, &["status", "--porcelain"]), "");
    // The CLI.
    commit_file(&repo(&app), "later.txt", "l\n", "later");
    let out = app.krad(&["env", "update", "up", "--rebase"]);
    assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("updated up to main"),
        "{}",
        stdout(&out)
    );
    assert!(up.join("later.txt").is_file());
    assert_eq!(
        exit_code(&app.krad(&["env", "update", "up", "--rebase", "--merge"])),
        2
    );
}

/// An update cut by a crash after its git moved the worktree, before the
/// environment's base was recorded, is finished by the next app (its intent is
/// run again): the base is the tip it was brought up to, without a retry.
#[test]
fn an_update_cut_by_a_crash_is_finished_by_the_next_app() {
    let (app, [cut]) = app_with_worktrees(["cut"]);
    commit_file(&repo(&app), "main.txt", "m\n", "main moves on");
    let tip = git(&repo(&app), &["rev-parse", "HEAD"]);
    let dir = app.stop_keep_dir();
    // What the dead app had done: its git fast-forwarded the worktree...
    git(&cut, &["merge", "-q", "--ff-only", &tip]);
    // ...under the intent it recorded first.
    let intent = json!({
        "once": null,
        "plan": {"kind": "update_environment", "name": "cut", "how": "merge"},
        "since": "2026-12-02T00:00:00.000Z",
    });
    let db = rusqlite::Connection::open(dir.path().join("repo/.git/krad/state.db")).unwrap();
    db.execute(
        "INSERT INTO records (kind, key, value) VALUES ('intent', 'local:cut', ?1)",
        [intent.to_string()],
    )
    .unwrap();
    drop(db);
    let app = App::launch(Launch {
        reuse: Some(dir),
        ..Launch::default()
    });
    let environments = app.request(json!("Environments"))["Environments"].clone();
    let record = environments
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "cut")
        .unwrap_or_else(|| panic!("{environments}"))
        .clone();
    assert_eq!(record["base"], tip.as_str(), "{record}");
    let changes = app.request(json!({"Changes": {"environment": "cut"}}))["Changes"].clone();
    assert_eq!(
        changes["files"],
        json!([]),
        "main's commit is not its work: {changes}"
    );
}

#[test]
fn update_refuses_conflicts_and_uncommitted_work_and_changes_nothing() {
    let (app, [cf]) = app_with_worktrees(["cf"]);
    commit_file(&cf, "README.md", "from cf\n", "cf's readme");
    commit_file(&cf, "cf.txt", "c\n", "cf more");
    commit_file(&repo(&app), "README.md", "from main\n", "main's readme");
    let before = untouched(&cf);
    // Its record, less the disk measurement (refreshed in the background).
    let record_of = |app: &App| {
        let mut record = app.request(json!("Environments"))["Environments"][1].clone();
        let fields = record.as_object_mut().unwrap();
        fields.remove("disk_bytes");
        fields.remove("disk_measured_at");
        record
    };
    let record = record_of(&app);
    for how in ["merge", "rebase"] {
        let answer = app.request(json!({"UpdateEnvironment": {"environment": "cf", "how": how}}));
        assert_eq!(code(&answer), "conflict", "{how}: {answer}");
        assert_eq!(
            answer["Error"]["detail"]["files"],
            json!(["README.md"]),
            "{how}"
        );
        assert_eq!(answer["Error"]["detail"]["environment"], "cf");
        // Exactly as before: HEAD, status, index, refs; no merge or rebase left.
        assert!(untouched(&cf) == before, "{how} changed the worktree");
        for leftover in ["MERGE_HEAD", "rebase-merge", "rebase-apply"] {
            let path = git(&cf, &["rev-parse", "--git-path", leftover]);
            assert!(!cf.join(path).exists(), "{how} left {leftover}");
        }
    }
    assert_eq!(record_of(&app), record, "its record (base) unchanged");
    let out = app.krad(&["env", "update", "cf"]);
    assert_eq!(exit_code(&out), 8);
    assert!(stderr(&out).contains("README.md"), "{}", stderr(&out));
    // Uncommitted work (an untracked file too) is refused, naming the files.
    write(&cf, "cf.txt", "changed\n");
    write(&cf, "new.txt", "n\n");
    let before = untouched(&cf);
    let dirty = app.request(json!({"UpdateEnvironment": {"environment": "cf"}}));
    assert_eq!(code(&dirty), "conflict", "{dirty}");
    assert_eq!(
        dirty["Error"]["detail"]["files"],
        json!(["cf.txt", "new.txt"])
    );
    assert!(untouched(&cf) == before);
    let out = app.krad(&["env", "update", "cf", "--rebase"]);
    assert_eq!(exit_code(&out), 8);
    assert!(stderr(&out).contains("cf.txt, new.txt"), "{}", stderr(&out));
    assert!(untouched(&cf) == before);
    // The other error paths.
    assert_eq!(
        code(&app.request(json!({"UpdateEnvironment": {"environment": "main"}}))),
        "invalid"
    );
    assert_eq!(
        code(&app.request(json!({"UpdateEnvironment": {"environment": "nope"}}))),
        "not_found"
    );
    assert_eq!(
        code(&app.request(json!({"UpdateEnvironment": {"environment": "cf", "how": "squash"}}))),
        "bad_request"
    );
    assert_eq!(
        code(&app.request(json!({"UpdateEnvironment": {"environment": "../cf"}}))),
        "invalid"
    );
    create(&app, "parent");
    let child = app.request(json!({"CreateWorktree": {"name": "child", "base": "parent"}}));
    assert_eq!(child["Environment"]["name"], "child", "{child}");
    assert_eq!(
        app.request(json!({"Close": {"environment": "parent"}})),
        json!("Ok")
    );
    let orphan = app.request(json!({"UpdateEnvironment": {"environment": "child"}}));
    assert_eq!(code(&orphan), "not_found", "{orphan}");
    assert_eq!(orphan["Error"]["detail"]["environment"], "parent");
    // A plain terminal may update only its own environment.
    let (id, token) = app.plain_terminal();
    assert_eq!(
        code(&app.call_as(
            id,
            &token,
            json!({"UpdateEnvironment": {"environment": "child"}})
        )),
        "forbidden"
    );
}

#[test]
fn update_with_a_request_id_runs_once() {
    let (app, [path]) = app_with_worktrees(["once"]);
    commit_file(&path, "mine.txt", "m\n", "mine");
    commit_file(&repo(&app), "main.txt", "m\n", "main");
    let mut envelope = app.envelope(json!({"UpdateEnvironment": {"environment": "once"}}));
    envelope["request_id"] = json!("update-once-1");
    let first = app.call(&envelope);
    assert!(first["Updated"].is_object(), "{first}");
    let head = git(&path, &["rev-parse", "HEAD"]);
    // main moves again: a replay answers the first update and runs nothing.
    commit_file(&repo(&app), "main2.txt", "m\n", "main again");
    let second = app.call(&envelope);
    assert_eq!(second["Updated"]["replayed"], true, "{second}");
    assert_eq!(second["Updated"]["head"], first["Updated"]["head"]);
    assert_eq!(git(&path, &["rev-parse", "HEAD"]), head);
    let mut other =
        app.envelope(json!({"UpdateEnvironment": {"environment": "once", "how": "rebase"}}));
    other["request_id"] = json!("update-once-1");
    assert_eq!(code(&app.call(&other)), "request_id_reused");
}

/// The ports of each named environment, from Environments.
fn ports_of(app: &App) -> std::collections::BTreeMap<String, Vec<u64>> {
    app.request(json!("Environments"))["Environments"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|env| env["name"] != "main")
        .map(|env| {
            let ports = env["ports"]
                .as_array()
                .map(|p| p.iter().map(|p| p.as_u64().unwrap()).collect())
                .unwrap_or_default();
            (env["name"].as_str().unwrap().to_owned(), ports)
        })
        .collect()
}

/// An HTTP GET on 127.0.0.1:`port` answers.
pub(crate) fn http_answers(port: u64) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port as u16)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    if stream
        .write_all(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200")
}

#[test]
fn ten_environments_serve_on_their_own_ports_which_survive_a_restart_and_are_reused_after_release()
{
    let first_port = 21000 + (std::process::id() % 400) * 20;
    let config = format!(
        "[environments]\nports = 2\nfirst_port = {first_port}\n[worktrees]\nsetup = \"echo $KRAD_PORT $KRAD_PORTS $PORT > setup-port.txt\"\n"
    );
    let registry = tempfile::tempdir().unwrap();
    let registry_env = vec![(
        "KRAD_ADE_PORTS_DIR".to_owned(),
        registry.path().display().to_string(),
    )];
    let app = app_with_commit(Some(&config));
    let app = {
        let dir = app.stop_keep_dir();
        App::launch(Launch {
            reuse: Some(dir),
            env: registry_env.clone(),
            ..Launch::default()
        })
    };
    let names: Vec<String> = (0..10).map(|i| format!("web-{i}")).collect();
    // Ten at once.
    std::thread::scope(|s| {
        for name in &names {
            let app = &app;
            s.spawn(move || create(app, name));
        }
    });
    let ports = ports_of(&app);
    let mut all: Vec<u64> = ports.values().flatten().copied().collect();
    assert_eq!(all.len(), 20, "{ports:?}");
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 20, "every port handed out once: {ports:?}");
    // The setup command saw them.
    let envs = app.request(json!("Environments"))["Environments"].clone();
    for env in envs.as_array().unwrap().iter().skip(1) {
        let block = &ports[env["name"].as_str().unwrap()];
        assert_eq!(
            std::fs::read_to_string(env_path(env).join("setup-port.txt")).unwrap(),
            format!("{} {} {} {}\n", block[0], block[0], block[1], block[0])
        );
    }
    // Each starts a real HTTP server on $KRAD_PORT, all at once.
    let terminals: Vec<u64> = std::thread::scope(|s| {
        let handles: Vec<_> = names
            .iter()
            .map(|name| {
                let app = &app;
                s.spawn(move || {
                    app.spawn(json!({"profile": "exec", "environment": name, "command": ["sh", "-c",
                        "echo \"ports $KRAD_PORTS port $PORT\"; exec python3 -m http.server --bind 127.0.0.1 \"$KRAD_PORT\""]}))
                        ["terminal"].as_u64().unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (name, id) in names.iter().zip(&terminals) {
        let block = &ports[name];
        let port = block[0];
        wait_until(Duration::from_secs(30), || http_answers(port));
        let screen = app.until_screen(
            *id,
            &format!("ports {} {} port {}", block[0], block[1], block[0]),
        );
        assert!(!screen.contains("Address already in use"), "{screen}");
    }
    // Code runs see them too.
    let code_answer = app.request(
        json!({"Code": {"environment": "web-3", "command": ["sh", "-c", "echo $KRAD_PORT $PORT"]}}),
    );
    let block = &ports["web-3"];
    assert_eq!(
        code_answer["CodeResult"]["stdout"],
        format!("{} {}\n", block[0], block[0])
    );
    // A port taken by another program is reported by `krad envs`; the
    // environment's own server is not.
    let intruder = std::net::TcpListener::bind(("127.0.0.1", ports["web-0"][1] as u16)).unwrap();
    let envs = app.krad(&["envs"]);
    let listed = stdout(&envs);
    assert!(
        listed.contains(&format!(
            "{} (in use by pid {})",
            ports["web-0"][1],
            std::process::id()
        )),
        "krad envs exited {:?}, printed {listed:?} and on stderr {:?}; the app's log:\n{}",
        envs.status.code(),
        stderr(&envs),
        app.log()
    );
    assert!(
        !listed.contains(&format!("{} (in use", ports["web-1"][0])),
        "{listed}"
    );
    drop(intruder);
    // The blocks survive a restart.
    let dir = app.stop_keep_dir();
    let app = App::launch(Launch {
        reuse: Some(dir),
        env: registry_env.clone(),
        ..Launch::default()
    });
    assert_eq!(ports_of(&app), ports);
    let lock = registry.path().join(format!("{}.lock", ports["web-5"][0]));
    assert_eq!(std::fs::read_to_string(&lock).unwrap(), app.pid.to_string());
    // A new environment gets new ports; a closed one's come back only once
    // it is closed.
    let lowest = ports.iter().min_by_key(|(_, p)| p[0]).unwrap();
    let extra = create(&app, "extra");
    let extra_ports: Vec<u64> = serde_json::from_value(extra["ports"].clone()).unwrap();
    assert_eq!(extra_ports.len(), 2);
    assert!(
        extra_ports.iter().all(|p| !all.contains(p)),
        "{extra_ports:?}"
    );
    assert_eq!(
        app.request(json!({"Close": {"environment": lowest.0, "force": true}})),
        json!("Ok")
    );
    assert!(
        !registry
            .path()
            .join(format!("{}.lock", lowest.1[0]))
            .exists()
    );
    let reused = create(&app, "reused");
    let reused_ports: Vec<u64> = serde_json::from_value(reused["ports"].clone()).unwrap();
    assert_eq!(&reused_ports, lowest.1);
}

#[test]
fn archives_are_listed_and_restored_as_environments_with_their_uncommitted_work() {
    let app = app_with_commit(None);
    let main = repo(&app);
    // One closed with uncommitted work (a change, a deletion, a new file).
    let dirty = env_path(&create(&app, "dirty"));
    commit_file(&dirty, "kept.txt", "committed\n", "committed work");
    write(&dirty, "README.md", "changed\n");
    std::fs::remove_file(dirty.join("src/lib.rs")).unwrap();
    write(&dirty, "new.txt", "untracked\n");
    assert_eq!(
        app.request(json!({"Close": {"environment": "dirty", "force": true}})),
        json!("Ok")
    );
    // One closed clean, with a commit only.
    let clean = env_path(&create(&app, "clean"));
    commit_file(&clean, "c.txt", "c\n", "clean work");
    assert_eq!(
        app.request(json!({"Close": {"environment": "clean", "force": true}})),
        json!("Ok")
    );

    let archives = app.request(json!("Archives"))["Archives"].clone();
    let names = each(&archives, "name");
    assert!(
        names.contains(&"dirty") && names.contains(&"clean"),
        "{archives}"
    );
    let of = |name: &str| {
        archives
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(of("dirty")["uncommitted"], true);
    assert_eq!(of("clean")["uncommitted"], false);
    assert_eq!(of("clean")["subject"], "clean work");
    assert_eq!(
        of("clean")["commit"],
        git(&main, &["rev-parse", "refs/krad/archive/clean"])
    );
    assert!(!of("clean")["date"].as_str().unwrap().is_empty());

    // Restored: its uncommitted work is uncommitted again, on a new branch.
    let env = app.request(json!({"RestoreArchive": {"name": "dirty"}}));
    let env = &env["Environment"];
    assert_eq!(env["name"], "dirty", "{env}");
    assert_eq!(env["branch"], "krad/dirty");
    let path = env_path(env);
    assert_eq!(git(&path, &["log", "-1", "--format=%s"]), "committed work");
    assert_eq!(
        std::fs::read_to_string(path.join("README.md")).unwrap(),
        "changed\n"
    );
    assert_eq!(
        git(&path, &["status", "--porcelain"]),
        "M README.md\n D src/lib.rs\n?? new.txt",
        "(git() trims the first space)"
    );
    assert!(path.join("kept.txt").is_file());
    // The archive ref stays.
    assert!(!git(&main, &["for-each-ref", "refs/krad/archive/dirty"]).is_empty());

    // --as, through the CLI, with a request id: at most once.
    let out = app.krad(&[
        "archive",
        "restore",
        "clean",
        "--as",
        "clean-again",
        "--request-id",
        "restore-1",
    ]);
    assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("restored environment clean-again"),
        "{}",
        stdout(&out)
    );
    let again = app.dir.path().join("repo/.krad/worktrees/clean-again");
    assert_eq!(git(&again, &["log", "-1", "--format=%s"]), "clean work");
    assert_eq!(git(&again, &["status", "--porcelain"]), "");
    let out = app.krad(&[
        "archive",
        "restore",
        "clean",
        "--as",
        "clean-again",
        "--request-id",
        "restore-1",
    ]);
    assert_eq!(exit_code(&out), 0, "a retry replays: {}", stderr(&out));
    // A name taken → conflict (exit 8); no such archive → not_found (exit 4).
    assert_eq!(
        exit_code(&app.krad(&["archive", "restore", "clean", "--as", "clean-again"])),
        8
    );
    let missing = app.request(json!({"RestoreArchive": {"name": "nothing", "as": "x"}}));
    assert_eq!(code(&missing), "not_found", "{missing}");
    assert_eq!(exit_code(&app.krad(&["archive", "restore", "nothing"])), 3);

    // ls, human and --json.
    let text = app.krad_ok(&["archive", "ls"]);
    assert!(
        text.contains("dirty") && text.contains("[uncommitted]") && text.contains("clean work"),
        "{text}"
    );
    let v: Value = serde_json::from_slice(&app.krad(&["archive", "ls", "--json"]).stdout).unwrap();
    assert_eq!(v["Archives"].as_array().unwrap().len(), 2);
}

#[test]
fn teardown_runs_before_a_worktree_goes_and_a_failed_one_keeps_it_unless_forced() {
    let app = app_with_commit(Some(
        "[worktrees]\nteardown = \"case $KRAD_ADE_ENVIRONMENT in stuck) echo cannot stop; exit 3;; esac; echo down $KRAD_ADE_ENVIRONMENT >> $HOME/teardown.log\"\n",
    ));
    create(&app, "svc");
    create(&app, "stuck");
    assert_eq!(
        app.request(json!({"Close": {"environment": "svc"}})),
        json!("Ok")
    );
    let log = std::fs::read_to_string(app.dir.path().join("home/teardown.log")).unwrap();
    assert_eq!(log, "down svc\n");
    let refused = app.request(json!({"Close": {"environment": "stuck"}}));
    assert_eq!(code(&refused), "conflict", "{refused}");
    assert_eq!(refused["Error"]["detail"]["exit_code"], 3);
    assert!(
        refused["Error"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot stop"),
        "{refused}"
    );
    let path = env_path(&app.request(json!("Environments"))["Environments"][1]);
    assert!(path.is_dir(), "a failed teardown keeps the worktree");
    assert_eq!(
        app.request(json!({"Close": {"environment": "stuck", "force": true}})),
        json!("Ok")
    );
    assert!(!path.exists());
}

/// Issue 48: `krad worktree create`, `krad envs` and `krad close --env` were
/// three nouns for one thing. `krad env create|ls|close|update` is the one;
/// the old spellings still work.
#[test]
fn krad_env_creates_lists_and_closes_and_the_old_spellings_still_work() {
    let app = crate::support::app_with_first_commit(&[("README", b"hi\n")], None);
    let created = app.krad(&["env", "create", "one-noun"]);
    assert_eq!(exit_code(&created), 0, "{}", stderr(&created));
    let listed = app.krad_ok(&["env", "ls"]);
    assert!(listed.contains("one-noun"), "{listed}");
    assert_eq!(app.krad_ok(&["env", "list"]), listed);
    assert_eq!(app.krad_ok(&["envs"]), listed);
    let old = app.krad(&["worktree", "create", "old-noun"]);
    assert_eq!(exit_code(&old), 0, "{}", stderr(&old));
    // The agents a close ends are named.
    let agent = app.spawn(json!({"profile": "exec", "environment": "one-noun", "name": "inside", "command": ["sleep", "60"]}))["terminal"]
        .as_u64()
        .unwrap();
    let closed = app.krad(&["env", "close", "one-noun"]);
    assert_eq!(exit_code(&closed), 0, "{}", stderr(&closed));
    assert_eq!(
        stdout(&closed).trim(),
        format!("closed environment one-noun and its terminal {agent} (inside)")
    );
    let closed = app.krad(&["close", "--env", "old-noun"]);
    assert_eq!(exit_code(&closed), 0, "{}", stderr(&closed));
    assert_eq!(stdout(&closed).trim(), "closed environment old-noun");
    let listed = app.krad_ok(&["env", "ls"]);
    assert!(
        !listed.contains("one-noun") && !listed.contains("old-noun"),
        "{listed}"
    );
    // One noun in the command list.
    let help = app.krad_ok(&["--help"]);
    assert!(!help.contains("\n  envs "), "{help}");
    assert!(!help.contains("\n  worktree "), "{help}");
    assert!(help.contains("\n  env "), "{help}");
}

/// Issue 48: there was no `krad variants ls`. It shows each group's
/// variants: environment, agent state, diff size and cost.
#[test]
fn krad_variants_ls_shows_each_variant_s_state_and_diff() {
    let app = app_with_commit(None);
    run_three(&app, "vls");
    let out = app.krad_ok(&["variants", "ls"]);
    let rows: Vec<&str> = out.lines().filter(|l| l.starts_with("vls ")).collect();
    assert_eq!(rows.len(), 3, "{out}");
    for (n, row) in rows.iter().enumerate() {
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[1], (n + 1).to_string(), "{out}");
        assert_eq!(cells[2], format!("vls-{}", n + 1), "{out}");
        assert_eq!(cells[3], "exited", "{out}");
        // result-vls-N.txt and task.txt, one line each.
        assert_eq!((cells[4], cells[5], cells[6]), ("2", "+2", "-0"), "{out}");
    }
    // With a group: its scoreboard (tests/suite/scored.rs has the checks).
    let json: Value =
        serde_json::from_str(&app.krad_ok(&["variants", "ls", "vls", "--json"])).unwrap();
    assert_eq!(
        json["Scores"]["variants"].as_array().map(Vec::len),
        Some(3),
        "{json}"
    );
    assert_eq!(json["Scores"]["variants"][0]["environment"], "vls-1");
    let missing = app.krad(&["variants", "ls", "nope"]);
    assert_eq!(exit_code(&missing), 3, "{missing:?}");
    assert!(stderr(&missing).contains("no variant group"), "{missing:?}");
}
