//! Environments on an SSH host (issue 17): ports handed out from the host's
//! own registry, and the archives Close keeps in the host's repository. A real
//! sshd on 127.0.0.1 plays the host (see [`crate::ssh::Sshd`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::environments::http_answers;
use crate::ssh::Sshd;
use crate::support::{App, code, git, stdout, wait_until};

/// An app whose config names host `far` (this sshd) with `host_extra` added to
/// its `[hosts.far]` table and `extra` after it; and the host's repository.
fn app_with_host(sshd: &Sshd, host_extra: &str, extra: &str) -> (App, PathBuf) {
    crate::ssh::app_with_host_configured(sshd, "", &format!("{host_extra}{extra}"))
}

/// The host's port registry: its HOME (the sshd's `SetEnv`) has no runtime dir.
fn host_registry(sshd: &Sshd) -> PathBuf {
    sshd.dir.path().join("home/.krad-ade/ports")
}

fn environment(app: &App, name: &str) -> Value {
    app.request(json!("Environments"))["Environments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|env| env["name"] == name)
        .cloned()
        .unwrap_or(Value::Null)
}

fn ports(env: &Value) -> Vec<u64> {
    env["ports"]
        .as_array()
        .map(|p| p.iter().map(|p| p.as_u64().unwrap()).collect())
        .unwrap_or_default()
}

fn lock_file(registry: &Path, port: u64) -> PathBuf {
    registry.join(format!("{port}.lock"))
}

#[test]
fn a_host_environment_gets_ports_checked_free_on_the_host_kept_across_a_restart_released_on_close()
{
    let sshd = Sshd::start();
    // Below the ephemeral range, apart from the local ports test's.
    let first_port = 12000 + (std::process::id() % 400) * 20;
    let config = format!(
        "[environments]\nfirst_port = {first_port}\n\
         [worktrees]\nsetup = \"echo $KRAD_PORT $KRAD_PORTS $PORT > setup-port.txt\"\n\
         teardown = \"echo $KRAD_PORT $PORT > ../../teardown-$KRAD_ADE_ENVIRONMENT.txt\"\n"
    );
    let (app, remote) = app_with_host(&sshd, "ports = 2\n", &config);
    let registry = host_registry(&sshd);
    // A program on the host already listens on the first port: it is skipped.
    let busy = std::net::TcpListener::bind(("127.0.0.1", first_port as u16)).ok();
    let created = app.request(json!({"CreateWorktree": {"name": "far-web", "host": "far"}}));
    let block = ports(&created["Environment"]);
    assert_eq!(block.len(), 2, "{created}");
    if busy.is_some() {
        assert!(!block.contains(&u64::from(first_port)), "{block:?}");
    }
    drop(busy);
    // Held in the host's registry by this app's id (not a pid of the host).
    let owner = std::fs::read_to_string(lock_file(&registry, block[0])).unwrap();
    assert!(owner.starts_with("app-"), "{owner:?}");
    assert_eq!(
        std::fs::read_to_string(lock_file(&registry, block[1])).unwrap(),
        owner
    );
    // Another app using the same host never gets the same ports there.
    let (other, _) = app_with_host(&sshd, "ports = 2\n", &config);
    let others = other.request(json!({"CreateWorktree": {"name": "far-other", "host": "far"}}));
    let other_block = ports(&others["Environment"]);
    assert_eq!(other_block.len(), 2, "{others}");
    assert!(
        other_block.iter().all(|p| !block.contains(p)),
        "{block:?} and {other_block:?}"
    );
    let other_owner = std::fs::read_to_string(lock_file(&registry, other_block[0])).unwrap();
    assert!(other_owner.starts_with("app-") && other_owner != owner);
    // Environments on this machine get none: `ports` is the host's alone.
    let here = app.request(json!({"CreateWorktree": {"name": "here"}}));
    assert!(here["Environment"].get("ports").is_none(), "{here}");
    // The setup command on the host saw them.
    let worktree = remote.join(".krad/worktrees/far-web");
    assert_eq!(
        std::fs::read_to_string(worktree.join("setup-port.txt")).unwrap(),
        format!("{} {} {} {}\n", block[0], block[0], block[1], block[0])
    );
    // A terminal on the host serves on $KRAD_PORT.
    let id = app.spawn(json!({"profile": "exec", "environment": "far-web", "command": ["sh", "-c",
        "echo \"ports $KRAD_PORTS port $PORT\"; exec python3 -m http.server --bind 127.0.0.1 \"$KRAD_PORT\""]}))
        ["terminal"]
        .as_u64()
        .unwrap();
    app.until_screen(
        id,
        &format!("ports {} {} port {}", block[0], block[1], block[0]),
    );
    wait_until(Duration::from_secs(30), || http_answers(block[0]));
    // So does Code there.
    let ran = app.request(json!({"Code": {"environment": "far-web",
        "command": ["sh", "-c", "echo $KRAD_PORT $KRAD_PORTS $PORT"]}}));
    assert_eq!(
        ran["CodeResult"]["stdout"],
        format!("{} {} {} {}\n", block[0], block[0], block[1], block[0]),
        "{ran}"
    );
    // A port of the block another program took is seen on the host, with its
    // pid; the environment's own server is not.
    let intruder = std::net::TcpListener::bind(("127.0.0.1", block[1] as u16)).unwrap();
    let expected = json!([{"port": block[1], "pid": std::process::id()}]);
    wait_until(Duration::from_secs(30), || {
        environment(&app, "far-web")["ports_in_use"] == expected
    });
    let listed = stdout(&app.krad(&["envs"]));
    assert!(
        listed.contains(&format!(
            "{} (in use by pid {})",
            block[1],
            std::process::id()
        )),
        "{listed}"
    );
    drop(intruder);
    // The block survives a restart, still held on the host.
    let app = app.again(None);
    assert_eq!(ports(&environment(&app, "far-web")), block);
    assert_eq!(
        std::fs::read_to_string(lock_file(&registry, block[0])).unwrap(),
        owner
    );
    // Closed, its ports go back to the host's registry.
    assert_eq!(
        app.request(json!({"Close": {"environment": "far-web", "force": true}})),
        json!("Ok")
    );
    for port in &block {
        assert!(
            !lock_file(&registry, *port).exists(),
            "port {port} still held"
        );
    }
    // Its teardown on the host saw them.
    assert_eq!(
        std::fs::read_to_string(remote.join(".krad/teardown-far-web.txt")).unwrap(),
        format!("{} {}\n", block[0], block[0])
    );
    let again = app.request(json!({"CreateWorktree": {"name": "far-next", "host": "far"}}));
    assert_eq!(ports(&again["Environment"]).len(), 2, "{again}");
    assert_eq!(
        app.request(json!({"Close": {"environment": "far-next", "force": true}})),
        json!("Ok")
    );
    // Only the other app's ports are left.
    let mut left: Vec<String> = std::fs::read_dir(&registry)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name != "registry.lock")
        .collect();
    left.sort();
    let mut expected: Vec<String> = other_block.iter().map(|p| format!("{p}.lock")).collect();
    expected.sort();
    assert_eq!(left, expected);
}

/// `git status --porcelain` of a worktree, each line trimmed, sorted.
fn status(dir: &Path) -> Vec<String> {
    let mut lines: Vec<String> = git(dir, &["status", "--porcelain"])
        .lines()
        .map(|line| line.trim().to_owned())
        .collect();
    lines.sort();
    lines
}

#[test]
fn archives_on_a_host_are_listed_and_restored_there_with_their_uncommitted_work() {
    let sshd = Sshd::start();
    let (app, remote) = app_with_host(&sshd, "", "");
    // One closed on the host with uncommitted work, one closed here.
    let far = remote.join(".krad/worktrees/far-a");
    app.request(json!({"CreateWorktree": {"name": "far-a", "host": "far"}}));
    std::fs::write(far.join("app.txt"), "on the host\nchanged\n").unwrap();
    std::fs::write(far.join("new.txt"), "untracked\n").unwrap();
    let dirty = status(&far);
    assert_eq!(dirty, ["?? new.txt", "M app.txt"]);
    crate::ssh::close_by_force(&app, "far-a");
    assert!(!far.exists());
    let here = app.request(json!({"CreateWorktree": {"name": "here-a"}}))["Environment"]["path"]
        .as_str()
        .unwrap()
        .to_owned();
    std::fs::write(Path::new(&here).join("here.txt"), "here\n").unwrap();
    assert_eq!(
        app.request(json!({"Close": {"environment": "here-a", "force": true}})),
        json!("Ok")
    );
    // Listed: all (this machine's, then the host's), or the host's alone.
    let all = app.request(json!("Archives"))["Archives"].clone();
    let names: Vec<(&str, Option<&str>)> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["name"].as_str().unwrap(), a["host"].as_str()))
        .collect();
    assert_eq!(names, [("here-a", None), ("far-a", Some("far"))], "{all}");
    let on_host = app.request(json!({"Archives": {"host": "far"}}))["Archives"].clone();
    assert_eq!(on_host.as_array().unwrap().len(), 1, "{on_host}");
    assert_eq!(on_host[0]["uncommitted"], true, "{on_host}");
    assert_eq!(
        on_host[0]["commit"].as_str().unwrap(),
        git(&remote, &["rev-parse", "refs/krad/archive/far-a"])
    );
    let listed = stdout(&app.krad(&["archive", "ls", "--host", "far"]));
    assert!(
        listed.contains("far-a") && listed.contains("host far"),
        "{listed}"
    );
    // Restored on the host, at most once: its work uncommitted again.
    let mut restore = app.envelope(json!({"RestoreArchive": {"name": "far-a", "host": "far"}}));
    restore["request_id"] = json!("restore-far-a-1");
    let restored = app.call(&restore);
    let env = &restored["Environment"];
    assert_eq!(env["kind"], "ssh", "{restored}");
    assert_eq!(env["host"], "far");
    assert_eq!(env["path"], far.display().to_string());
    assert_eq!(status(&far), dirty);
    assert_eq!(
        std::fs::read_to_string(far.join("new.txt")).unwrap(),
        "untracked\n"
    );
    assert_eq!(
        git(&far, &["rev-parse", "HEAD"]),
        git(&remote, &["rev-parse", "main"])
    );
    let again = app.call(&restore);
    assert_eq!(again["Environment"]["replayed"], true, "{again}");
    assert_eq!(again["Environment"]["name"], "far-a");
    // Changes sees the restored work as its own.
    let changes = app.request(json!({"Changes": {"environment": "far-a"}}))["Changes"].clone();
    let files = crate::support::each(&changes["files"], "path");
    assert_eq!(files, ["app.txt", "new.txt"], "{changes}");
    // Taken names, unknown archives; the CLI.
    assert_eq!(
        code(&app.request(json!({"RestoreArchive": {"name": "far-a", "host": "far"}}))),
        "conflict"
    );
    assert_eq!(
        code(&app.request(json!({"RestoreArchive": {"name": "here-a", "host": "far"}}))),
        "not_found"
    );
    let out = app.krad(&[
        "archive", "restore", "far-a", "--as", "far-b", "--host", "far",
    ]);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout(&out).contains("on host far"), "{out:?}");
    assert_eq!(status(&remote.join(".krad/worktrees/far-b")), dirty);
}

#[test]
fn archives_of_a_host_that_cannot_be_reached_are_unavailable_in_one_line() {
    let sshd = Sshd::start();
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let remote = dir.path().join("nowhere");
    let (app, _) = app_with_host(&sshd, "", &sshd.host_config("gone", &remote, closed));
    for request in [
        json!({"Archives": {"host": "gone"}}),
        json!("Archives"),
        json!({"RestoreArchive": {"name": "x", "host": "gone"}}),
    ] {
        let answer = app.request(request.clone());
        assert_eq!(code(&answer), "unavailable", "{request}: {answer}");
        let message = answer["Error"]["message"].as_str().unwrap();
        assert!(!message.contains('\n'), "{message:?}");
        assert!(message.contains("gone"), "{message:?}");
    }
    assert_eq!(
        code(&app.request(json!({"Archives": {"host": "nosuch"}}))),
        "not_found"
    );
    let out = app.krad(&["archive", "ls", "--host", "gone"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
}
