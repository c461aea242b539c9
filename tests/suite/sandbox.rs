//! Issue 39, contained agents (first slice): an agent in a sandbox writes
//! only in its environment, sees a private HOME (no planted secret, no
//! `~/.ssh`), neither api.json nor another terminal's token, and still
//! reaches the bus.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{App, git};

/// A first commit, so that worktrees can be made.
fn committed(app: &App) {
    let repo = app.dir.path().join("repo");
    std::fs::write(repo.join("README.md"), "box\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "first"]);
}

/// What the contained program tries, one marker line each.
const PROBE: &str = "\
echo inside > inside.txt && echo WROTE-INSIDE; \
(echo x > \"$REPO/outside.txt\") 2>/dev/null && echo WROTE-OUTSIDE || echo NO-OUTSIDE; \
(echo x > \"$OTHER/other.txt\") 2>/dev/null && echo WROTE-OTHER || echo NO-OTHER; \
cat \"$SECRET\" 2>/dev/null || echo NO-SECRET; \
ls \"$HOME/.ssh\" >/dev/null 2>&1 && echo SEES-SSH || echo NO-SSH; \
grep -q token \"$API_JSON\" 2>/dev/null && echo READ-API || echo NO-API; \
[ -n \"$(ls -A \"$STATE\" 2>/dev/null)\" ] && echo SEES-STATE || echo NO-STATE; \
cat \"$TOKEN\" 2>/dev/null && echo READ-TOKEN || echo NO-TOKEN; \
echo x > \"/tmp/$PROBE_NAME\" && echo WROTE-TMP; \
krad report idle -m contained; exec sleep 600";

/// Spawns the probe in `environment` (`sandbox` as the request asks) and
/// returns its screen once it reported.
fn probe(app: &App, environment: &str, sandbox: Option<bool>, env: Value) -> String {
    let mut spawn = json!({"profile": "exec", "environment": environment,
        "command": ["sh", "-c", PROBE], "env": env});
    if let Some(sandbox) = sandbox {
        spawn["sandbox"] = json!(sandbox);
    }
    let answer = app.request(json!({ "Spawn": spawn }));
    let id = answer["Agent"]["terminal"]
        .as_u64()
        .unwrap_or_else(|| panic!("{answer}"));
    app.until(id, Duration::from_secs(30), |r| r["message"] == "contained");
    app.until_screen(id, "NO-TOKEN")
}

#[test]
fn a_contained_agent_writes_only_in_its_worktree_and_sees_no_secret() {
    let app = App::start_config("[sandbox]\nprofiles = [\"exec\"]\n");
    committed(&app);
    let home = app.dir.path().join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "PRIVATE KEY").unwrap();
    let secret = home.join("secret.txt");
    std::fs::write(&secret, "TOP SECRET").unwrap();
    let repo = app.dir.path().join("repo");
    let worktree = |name: &str| {
        let created = app.request(json!({"CreateWorktree": {"name": name}}));
        created["Environment"]["path"]
            .as_str()
            .unwrap_or_else(|| panic!("{created}"))
            .to_owned()
    };
    let (mine, other) = (worktree("box"), worktree("next-door"));
    let neighbour = app.spawn_sh("exec sleep 600");
    let probe_name = format!("krad-sandbox-probe-{}", std::process::id());
    let env = json!({
        "REPO": repo.display().to_string(),
        "OTHER": other,
        "SECRET": secret.display().to_string(),
        "API_JSON": app.dir.path().join("run/api.json").display().to_string(),
        "TOKEN": app.token_dir().join(format!("{neighbour}.token")).display().to_string(),
        "PROBE_NAME": probe_name,
        "STATE": repo.join(".git/krad").display().to_string(),
    });
    let screen = probe(&app, "box", None, env);
    for said in [
        "WROTE-INSIDE",
        "NO-OUTSIDE",
        "NO-OTHER",
        "NO-SECRET",
        "NO-SSH",
        "NO-API",
        "NO-STATE",
        "NO-TOKEN",
        "WROTE-TMP",
    ] {
        assert!(screen.contains(said), "no {said} in:\n{screen}");
    }
    assert!(
        !screen.contains("TOP SECRET") && !screen.contains("PRIVATE KEY"),
        "{screen}"
    );
    assert_eq!(
        std::fs::read_to_string(std::path::Path::new(&mine).join("inside.txt")).unwrap(),
        "inside\n"
    );
    assert!(!repo.join("outside.txt").exists());
    assert!(
        !std::env::temp_dir().join(&probe_name).exists(),
        "its /tmp is its own"
    );
}

#[test]
fn a_spawn_can_ask_for_a_sandbox_and_cannot_leave_the_config_s() {
    let app = App::start();
    committed(&app);
    let repo = app.dir.path().join("repo");
    let env = |name: &str| {
        json!({"REPO": repo.join(name).parent().unwrap().display().to_string(),
            "OTHER": "/nonexistent", "SECRET": "/nonexistent", "API_JSON": "/nonexistent",
            "TOKEN": "/nonexistent", "PROBE_NAME": format!("krad-probe-{name}-{}", std::process::id())})
    };
    // Without one, the repository is writable (what the sandbox takes away).
    let free = probe(&app, "main", None, env("free"));
    assert!(free.contains("WROTE-OUTSIDE"), "{free}");
    std::fs::remove_file(repo.join("outside.txt")).unwrap();
    app.request(json!({"CreateWorktree": {"name": "asked"}}));
    let asked = probe(&app, "asked", Some(true), env("asked"));
    assert!(asked.contains("NO-OUTSIDE"), "{asked}");
    // `false` does not loosen the config's.
    let contained = App::start_config("[sandbox]\nprofiles = [\"exec\"]\n");
    committed(&contained);
    contained.request(json!({"CreateWorktree": {"name": "kept"}}));
    let repo = contained.dir.path().join("repo");
    let kept = probe(
        &contained,
        "kept",
        Some(false),
        json!({"REPO": repo.display().to_string(), "OTHER": "/nonexistent",
            "SECRET": "/nonexistent", "API_JSON": "/nonexistent", "TOKEN": "/nonexistent",
            "PROBE_NAME": format!("krad-probe-kept-{}", std::process::id())}),
    );
    assert!(kept.contains("NO-OUTSIDE"), "{kept}");
}

/// `network = "none"`: the sandbox has a network of its own with nothing in
/// it but the bus (relayed to the app's socket): a server on the machine's
/// 127.0.0.1 is refused at once, `krad report` goes through, and Ctrl-C
/// reaches the program without taking the bus away from it.
#[test]
fn without_a_network_a_contained_agent_reaches_the_bus_and_nothing_else() {
    let outside = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = outside.local_addr().unwrap().port();
    // The probe itself works here: outside a sandbox, nc reaches the server.
    let reached = std::process::Command::new("nc")
        .args(["-z", "-w", "2", "127.0.0.1", &port.to_string()])
        .status()
        .unwrap();
    assert!(
        reached.success(),
        "nc cannot reach 127.0.0.1:{port} even here"
    );
    drop(outside.accept().unwrap());
    outside.set_nonblocking(true).unwrap();
    let app = App::start_config("[sandbox]\nprofiles = [\"exec\"]\nnetwork = \"none\"\n");
    committed(&app);
    app.request(json!({"CreateWorktree": {"name": "offline"}}));
    let script = format!(
        "nc -z -w 2 127.0.0.1 {port} && echo REACHED || echo REFUSED; \
         trap 'krad report idle -m after-interrupt' INT; \
         krad report idle -m offline; while :; do sleep 0.1; done"
    );
    let answer = app.request(
        json!({"Spawn": {"profile": "exec", "environment": "offline",
        "command": ["sh", "-c", script]}}),
    );
    let id = answer["Agent"]["terminal"]
        .as_u64()
        .unwrap_or_else(|| panic!("{answer}"));
    app.until(id, Duration::from_secs(30), |r| r["message"] == "offline");
    let screen = app.until_screen(id, "REFUSED");
    assert!(!screen.contains("REACHED"), "{screen}");
    assert!(
        outside.accept().is_err(),
        "a connection reached the machine's 127.0.0.1"
    );
    let sent = app.request(json!({"Send": {"target": id, "keys": ["C-c"]}}));
    assert!(sent["Sent"].is_object(), "{sent}");
    app.until(id, Duration::from_secs(30), |r| {
        r["message"] == "after-interrupt"
    });
}

/// The command lines of the processes that name `text`.
fn processes_naming(text: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(text))
        .collect()
}

/// A sandbox's private home (with the CLI's credentials copied in) goes with
/// its terminal: at Close, and after a crash once the next app finds the
/// terminal gone.
#[test]
fn a_sandbox_s_private_home_goes_with_its_terminal() {
    let mut app = App::start_config("[sandbox]\nprofiles = [\"exec\"]\n");
    let homes = app.dir.path().join("repo/.git/krad/sandbox");
    let closed = app.spawn_sh("exec sleep 600");
    assert!(homes.join(closed.to_string()).is_dir());
    assert_eq!(
        app.request(json!({"Close": {"target": closed}})),
        json!("Ok")
    );
    assert!(!homes.join(closed.to_string()).exists());
    let left = app.spawn_sh("exec sleep 600");
    assert!(homes.join(left.to_string()).is_dir());
    app.signal(nix::sys::signal::Signal::SIGKILL);
    app.wait_exit(Duration::from_secs(10));
    let dir = std::mem::replace(&mut app.dir, tempfile::tempdir().unwrap());
    drop(app);
    let folder = dir.path().to_string_lossy().into_owned();
    let _again = App::launch(crate::support::Launch {
        reuse: Some(dir),
        config: Some("[sandbox]\nprofiles = [\"exec\"]\n"),
        ..crate::support::Launch::default()
    });
    // Nothing of the killed app's sandboxes is left running: the agent ends
    // with its terminal's hangup, as outside a sandbox, and a bubblewrap
    // killed as it set up (it leaves its child waiting) is ended by the next
    // app; each names the app's folder. Nor of the closed one's.
    let gone = std::time::Instant::now() + Duration::from_secs(20);
    while !processes_naming(&folder).is_empty() {
        assert!(
            std::time::Instant::now() < gone,
            "left running: {:#?}",
            processes_naming(&folder)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !homes.join(left.to_string()).exists(),
        "{}",
        homes.display()
    );
}

/// On an SSH host with bubblewrap (the loopback sshd: this machine), the
/// launcher builds the same sandbox there: the worktree writable, the host's
/// repository not, the host's HOME private (no planted secret, no token
/// folders), the bus through the link. (Sandboxes with a network of their
/// own on a host: `sandbox_net::on_an_ssh_host_*`.)
#[test]
fn on_an_ssh_host_the_sandbox_is_built_there() {
    let sshd = crate::ssh::Sshd::start();
    let (app, remote) =
        crate::ssh::app_with_host_configured(&sshd, "", "\n[sandbox]\nprofiles = [\"exec\"]\n");
    let created = app.request(json!({"CreateWorktree": {"name": "far-box", "host": "far"}}));
    let worktree = created["Environment"]["path"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_owned();
    let host_home = sshd.dir.path().join("home");
    std::fs::write(host_home.join("secret.txt"), "HOST SECRET").unwrap();
    let script = "echo inside > inside.txt && echo WROTE-INSIDE; \
        (echo x > \"$REPO/outside.txt\") 2>/dev/null && echo WROTE-OUTSIDE || echo NO-OUTSIDE; \
        cat \"$HOME/secret.txt\" 2>/dev/null || echo NO-SECRET; \
        cat \"$NEIGHBOUR\" 2>/dev/null && echo READ-TOKEN || echo NO-TOKENS; \
        krad report idle -m contained-far; exec sleep 600";
    let neighbour = app.request(
        json!({"Spawn": {"profile": "exec", "environment": "far-box",
        "command": ["sh", "-c", "krad report idle -m next-door; exec sleep 600"]}}),
    );
    let neighbour = neighbour["Agent"]["terminal"].as_u64().unwrap();
    app.until(neighbour, Duration::from_secs(30), |r| {
        r["message"] == "next-door"
    });
    let neighbour_token = crate::ssh::host_file(&sshd, &format!("{neighbour}.token"));
    let answer = app.request(
        json!({"Spawn": {"profile": "exec", "environment": "far-box",
        "command": ["sh", "-c", script], "env": {"REPO": remote.display().to_string(),
        "NEIGHBOUR": neighbour_token.display().to_string()}}}),
    );
    let id = answer["Agent"]["terminal"]
        .as_u64()
        .unwrap_or_else(|| panic!("{answer}"));
    app.until(id, Duration::from_secs(30), |r| {
        r["message"] == "contained-far"
    });
    let screen = app.until_screen(id, "NO-TOKENS");
    for said in ["WROTE-INSIDE", "NO-OUTSIDE", "NO-SECRET"] {
        assert!(screen.contains(said), "no {said} in:\n{screen}");
    }
    assert!(
        !screen.contains("HOST SECRET") && !screen.contains("READ-TOKEN"),
        "{screen}"
    );
    assert!(std::path::Path::new(&worktree).join("inside.txt").is_file());
    assert!(!remote.join("outside.txt").exists());
    let private_home = crate::ssh::host_file(&sshd, &format!("{id}-home"));
    assert!(private_home.is_dir());
    assert_eq!(app.request(json!({"Close": {"target": id}})), json!("Ok"));
    assert!(
        !private_home.exists(),
        "its private home on the host goes with it"
    );
}

/// A server on `$KRAD_PORT` in a sandbox: one connection at a time, each
/// answered `HELLO-FROM-INSIDE` and then closed (`-N`).
const SERVER: &str = "while :; do echo HELLO-FROM-INSIDE | nc -N -l 127.0.0.1 \"$KRAD_PORT\"; done & \
                      krad report idle -m serving; wait";

/// The same server, and then the script goes on.
const SERVER_IN_BACKGROUND: &str = "while :; do echo HELLO-FROM-INSIDE | nc -N -l 127.0.0.1 \"$KRAD_PORT\"; done & \
     krad report idle -m serving;";

/// The config of a sandbox with `network` and 2 ports per environment.
fn ports_config(network: &str) -> String {
    let first_port = 30000 + (std::process::id() % 100) * 20;
    format!(
        "[sandbox]\nprofiles = [\"exec\"]\nnetwork = \"{network}\"\n\
         [environments]\nports = 2\nfirst_port = {first_port}\n"
    )
}

/// Makes a worktree; answers its ports.
fn worktree_with_ports(app: &App, name: &str) -> Vec<u16> {
    let created = app.request(json!({"CreateWorktree": {"name": name}}));
    let ports: Vec<u16> = created["Environment"]["ports"]
        .as_array()
        .unwrap_or_else(|| panic!("{created}"))
        .iter()
        .map(|p| p.as_u64().unwrap() as u16)
        .collect();
    assert_eq!(ports.len(), 2, "{created}");
    ports
}

/// Spawns `script` in `environment`; answers the terminal once it reported
/// `message`.
fn spawn_reporting(app: &App, environment: &str, script: &str, message: &str) -> u64 {
    let answer = app.request(
        json!({"Spawn": {"profile": "exec", "environment": environment,
        "command": ["sh", "-c", script]}}),
    );
    let id = answer["Agent"]["terminal"]
        .as_u64()
        .unwrap_or_else(|| panic!("{answer}"));
    app.until(id, Duration::from_secs(30), |r| r["message"] == message);
    id
}

/// What a client on the machine reads from 127.0.0.1:`port` after sending
/// `line`: None when the connection closed with nothing. A read that does
/// not end (a hang) fails the test.
fn exchange(port: u16, line: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port))
        .unwrap_or_else(|e| panic!("nothing listens on {port}: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let _ = stream.write_all(line.as_bytes());
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let mut reply = Vec::new();
    match stream.read_to_end(&mut reply) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("port {port}: {e} (a hang?)"),
    }
    (!reply.is_empty()).then(|| String::from_utf8_lossy(&reply).into_owned())
}

/// The reply of 127.0.0.1:`port`, asked until there is one (the server
/// inside listens again between connections).
fn reply_of(port: u16, line: &str) -> String {
    let until = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(reply) = exchange(port, line) {
            return reply;
        }
        assert!(
            std::time::Instant::now() < until,
            "nothing answered on {port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Issue 39's ports: with a network of its own (`none`, `allow`) a server a
/// contained agent starts on `$KRAD_PORT` listens on the sandbox's own
/// loopback; the app relays the environment's ports in from the machine's
/// 127.0.0.1. A port with nothing inside is closed at once (never a hang);
/// the environment's terminals are tried newest first; the app stops
/// listening with the last of them.
fn the_environment_s_ports_are_relayed_in(network: &str) {
    let app = App::start_config(&ports_config(network));
    committed(&app);
    let ports = worktree_with_ports(&app, "served");
    let (served, idle) = (ports[0], ports[1]);
    let server = spawn_reporting(&app, "served", SERVER, "serving");
    assert_eq!(
        reply_of(served, "ping-from-the-machine\n"),
        "HELLO-FROM-INSIDE\n"
    );
    app.until_screen(server, "ping-from-the-machine");
    // Nothing listens on the other port inside: closed at once.
    assert_eq!(exchange(idle, "anyone?\n"), None);
    // The app's own listeners are not "in use" by another program.
    let envs = app.request(json!("Environments"));
    let env = crate::support::named(&envs["Environments"], "served");
    assert!(
        env["ports_in_use"]
            .as_array()
            .is_none_or(|in_use| in_use.is_empty()),
        "{env}"
    );
    // A newer terminal of the environment has nothing there: the older one
    // answers.
    let second = spawn_reporting(
        &app,
        "served",
        "krad report idle -m second; exec sleep 600",
        "second",
    );
    assert_eq!(reply_of(served, "again\n"), "HELLO-FROM-INSIDE\n");
    app.until_screen(server, "again");
    assert_eq!(
        app.request(json!({"Close": {"target": second}})),
        json!("Ok")
    );
    assert_eq!(reply_of(served, "still\n"), "HELLO-FROM-INSIDE\n");
    // The last one gone, the ports are not listened on any more, and its
    // inbound socket's folder is gone with it.
    let folder = app
        .dir
        .path()
        .join(format!("repo/.git/krad/sandbox/{server}.in"));
    assert!(folder.join("in.sock").exists(), "{}", folder.display());
    assert_eq!(
        app.request(json!({"Close": {"target": server}})),
        json!("Ok")
    );
    assert!(!folder.exists());
    crate::support::wait_until(Duration::from_secs(20), || {
        ports
            .iter()
            .all(|p| std::net::TcpStream::connect(("127.0.0.1", *p)).is_err())
    });
}

#[test]
fn without_a_network_the_environment_s_ports_are_relayed_in_from_the_machine() {
    the_environment_s_ports_are_relayed_in("none");
}

#[test]
fn with_an_allowlist_the_environment_s_ports_are_relayed_in_from_the_machine() {
    the_environment_s_ports_are_relayed_in("allow");
}

/// A contained terminal kept in tmux outlives a killed app: the next app
/// takes it back and relays the environment's ports to it again.
#[test]
fn a_kept_contained_terminal_s_ports_are_relayed_again_after_a_restart() {
    let config = format!("{}{}", ports_config("allow"), crate::tmux::TMUX);
    let app = App::start_config(&config);
    committed(&app);
    let ports = worktree_with_ports(&app, "kept-served");
    let script = format!(
        "{SERVER_IN_BACKGROUND} while read line; do krad report idle -m \"heard $line\"; done"
    );
    let server = spawn_reporting(&app, "kept-served", &script, "serving");
    let _tmux = crate::tmux::TmuxServer::of(&app, server);
    assert_eq!(reply_of(ports[0], "before\n"), "HELLO-FROM-INSIDE\n");
    let app = app.killed_then_again(Some(&config));
    assert_ne!(app.record(server)["state"], "exited");
    assert_eq!(reply_of(ports[0], "after\n"), "HELLO-FROM-INSIDE\n");
    app.until_screen(server, "after");
    assert_eq!(exchange(ports[1], "anyone?\n"), None);
    // Its bus and its network came back with it: a report from inside
    // reaches the new app, and its allowlist is served again.
    let sent = app.request(json!({"Send": {"target": server, "text": "again", "enter": true}}));
    assert!(sent["Sent"].is_object(), "{sent}");
    // (Its token file is written again in place: the sandbox binds that file.)
    app.until(server, Duration::from_secs(30), |r| {
        r["message"] == "heard again"
    });
    let connections = app.request(json!({"Connections": {"target": server}}));
    assert_eq!(
        connections["Connections"]["network"], "allow",
        "{connections}"
    );
    assert_eq!(
        app.request(json!({"Close": {"target": server}})),
        json!("Ok")
    );
}

/// A write outside its environment fails at once for the agent, with the
/// system's plain error, and the app's log tells the user which.
#[test]
fn a_refused_write_is_a_plain_error_for_the_agent_and_in_the_app_s_log() {
    let app = App::launch(crate::support::Launch {
        config: Some("[sandbox]\nprofiles = [\"exec\"]\n"),
        rust_log: "info",
        ..crate::support::Launch::default()
    });
    let outside = format!("/usr/krad-refused-{}", app.pid);
    let script = "echo x > \"$OUTSIDE\" || echo WRITE-FAILED; \
                  krad report idle -m tried; exec sleep 600";
    let answer = app.request(json!({"Spawn": {"profile": "exec",
        "command": ["sh", "-c", script], "env": {"OUTSIDE": outside}}}));
    let id = answer["Agent"]["terminal"]
        .as_u64()
        .unwrap_or_else(|| panic!("{answer}"));
    app.until(id, Duration::from_secs(30), |r| r["message"] == "tried");
    let screen = app.until_screen(id, "WRITE-FAILED");
    assert!(screen.contains("Read-only file system"), "{screen}");
    assert!(!std::path::Path::new(&outside).exists());
    crate::support::wait_until(Duration::from_secs(20), || {
        app.log()
            .lines()
            .any(|l| l.contains("the sandbox refused a write") && l.contains(&outside))
    });
}
