//! Environments on an SSH host (issue 17): ports handed out from the host's
//! own registry, and the archives Close keeps in the host's repository. A real
//! sshd on 127.0.0.1 plays the host (see [`crate::ssh::Sshd`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::environments::http_answers;
use crate::ssh::Sshd;
use crate::support::{App, Launch, git, stdout, wait_until};

/// An app whose config names host `far` (this sshd) with `host_extra` added to
/// its `[hosts.far]` table and `extra` after it; and the host's repository.
fn app_with_host(sshd: &Sshd, host_extra: &str, extra: &str) -> (App, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let local = crate::support::git_repo(dir.path());
    std::fs::write(local.join("README.md"), "local\n").unwrap();
    git(&local, &["add", "."]);
    git(&local, &["commit", "-q", "-m", "local"]);
    let remote = dir.path().join("host-repo");
    std::fs::create_dir_all(&remote).unwrap();
    git(&remote, &["init", "-q", "-b", "main"]);
    std::fs::write(remote.join("app.txt"), "on the host\n").unwrap();
    git(&remote, &["add", "."]);
    git(&remote, &["commit", "-q", "-m", "remote"]);
    let config = format!(
        "{}{host_extra}{extra}",
        sshd.host_config("far", &remote, sshd.port)
    );
    let app = App::launch(Launch {
        reuse: Some(dir),
        config: Some(&config),
        ..Launch::default()
    });
    (app, remote)
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
    let first_port = 30000 + (std::process::id() % 200) * 20;
    let (app, remote) = app_with_host(
        &sshd,
        "ports = 2\n",
        &format!(
            "[environments]\nfirst_port = {first_port}\n\
             [worktrees]\nsetup = \"echo $KRAD_PORT $KRAD_PORTS $PORT > setup-port.txt\"\n"
        ),
    );
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
    let dir = app.stop_keep_dir();
    let app = App::launch(Launch {
        reuse: Some(dir),
        ..Launch::default()
    });
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
    let again = app.request(json!({"CreateWorktree": {"name": "far-next", "host": "far"}}));
    assert_eq!(ports(&again["Environment"]).len(), 2, "{again}");
    assert_eq!(
        app.request(json!({"Close": {"environment": "far-next", "force": true}})),
        json!("Ok")
    );
    let left: Vec<String> = std::fs::read_dir(&registry)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name != "registry.lock")
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
