//! Section 9, SSH hosts: a real OpenSSH server on 127.0.0.1 with keys of the
//! test's own plays the host. Worktrees and terminals live "on the host" and
//! reach the bus through the reverse forward the app opens.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{App, KRAD, Launch, code, exit_code, git, stderr, stdout};

/// An sshd on 127.0.0.1 with its own host key, and a client key it accepts.
pub(crate) struct Sshd {
    pub(crate) child: Child,
    pub(crate) dir: tempfile::TempDir,
    pub(crate) port: u16,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn keygen(path: &Path) {
    let status = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

impl Sshd {
    pub(crate) fn start() -> Sshd {
        Sshd::start_with("")
    }

    /// An sshd with `extra` lines at the end of its config
    /// (`AllowStreamLocalForwarding no`).
    pub(crate) fn start_with(extra: &str) -> Sshd {
        let _ = std::fs::create_dir_all("/run/sshd");
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        keygen(&d.join("host_key"));
        keygen(&d.join("client_key"));
        std::fs::copy(d.join("client_key.pub"), d.join("authorized_keys")).unwrap();
        let port = free_port();
        let config = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nPidFile {d}/sshd.pid\n\
             AuthorizedKeysFile {d}/authorized_keys\nPubkeyAuthentication yes\nPasswordAuthentication no\n\
             KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nUsePAM no\nStrictModes no\n\
             AllowTcpForwarding yes\nMaxSessions 10\nMaxStartups 50\n\
             SetEnv HOME={d}/home GIT_CONFIG_GLOBAL={d}/gitconfig GIT_CONFIG_NOSYSTEM=1 \
             TMUX_TMPDIR={d}/tmux\n{extra}",
            d = d.display()
        );
        // The "host" logs in with a HOME and git identity of its own, not the
        // account's real ones.
        std::fs::create_dir_all(d.join("home")).unwrap();
        // Its tmux servers in a folder of the host's own, not the user's.
        std::fs::create_dir_all(d.join("tmux")).unwrap();
        std::fs::set_permissions(
            d.join("tmux"),
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .unwrap();
        std::fs::write(
            d.join("gitconfig"),
            "[user]\n\tname = krad host\n\temail = host@krad.invalid\n",
        )
        .unwrap();
        // `MaxSessions 10` is sshd's default: the app must do with it (one
        // session per terminal on a host with tmux would not).
        std::fs::write(d.join("sshd_config"), config).unwrap();
        let child = Command::new("/usr/sbin/sshd")
            .args(["-D", "-e", "-f"])
            .arg(d.join("sshd_config"))
            .stderr(std::fs::File::create(d.join("sshd.log")).unwrap())
            .spawn()
            .unwrap();
        let until = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < until,
                "sshd did not start: {}",
                std::fs::read_to_string(d.join("sshd.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Sshd { child, dir, port }
    }

    /// Kills this sshd and every session it serves, then starts it again on
    /// the same port, with the same keys (a restarted sshd: every link drops).
    /// Stops sshd and every session it serves (the links drop).
    pub(crate) fn stop(&mut self) {
        signal_all(
            &process_tree(self.child.id()),
            nix::sys::signal::Signal::SIGKILL,
        );
        let _ = self.child.wait();
    }

    /// Starts sshd again, on the same port, once [`Sshd::stop`]ped.
    pub(crate) fn start_again(&mut self) {
        let d = self.dir.path();
        self.child = Command::new("/usr/sbin/sshd")
            .args(["-D", "-e", "-f"])
            .arg(d.join("sshd_config"))
            .stderr(std::fs::File::create(d.join("sshd-restarted.log")).unwrap())
            .spawn()
            .unwrap();
        let until = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < until, "sshd did not start again");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The `[hosts.NAME]` table for a host served by this sshd.
    pub(crate) fn host_config(&self, name: &str, root: &Path, port: u16) -> String {
        let d = self.dir.path().display();
        let user = std::env::var("USER")
            .ok()
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| "root".into());
        format!(
            "[hosts.{name}]\nssh = \"{user}@127.0.0.1\"\nroot = \"{root}\"\nkrad = \"{KRAD}\"\n\
             options = [\"-F\", \"none\", \"-p\", \"{port}\", \"-i\", \"{d}/client_key\", \"-o\", \"IdentitiesOnly=yes\", \
             \"-o\", \"StrictHostKeyChecking=accept-new\", \"-o\", \"UserKnownHostsFile={d}/known_hosts\", \"-o\", \"ConnectTimeout=5\"]\n",
            root = root.display()
        )
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        // Its sessions too (a stopped one, say), not only the listener: an
        // orphaned session would keep its app's control master connected.
        signal_all(
            &process_tree(self.child.id()),
            nix::sys::signal::Signal::SIGKILL,
        );
        let _ = self.child.kill();
        let _ = self.child.wait();
        // The "host"'s tmux servers of krad's (their settings are under its
        // HOME) outlive sshd, with their programs: end them.
        let home = self.dir.path().join("home/.krad-ade");
        let out = Command::new("pgrep")
            .args(["-f", "--", &home.display().to_string()])
            .output();
        for pid in out
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse::<i32>().ok())
        {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// An app whose config names host `far` (this sshd), and the host's repository.
fn app_with_host(sshd: &Sshd) -> (App, PathBuf) {
    app_with_host_logged(sshd, "")
}

/// The same, logging at `rust_log` (empty: the suite's default).
pub(crate) fn app_with_host_logged(sshd: &Sshd, rust_log: &str) -> (App, PathBuf) {
    app_with_host_configured(sshd, rust_log, "")
}

/// The same, with `extra` lines in the host's table (`tmux = false`).
pub(crate) fn app_with_host_configured(sshd: &Sshd, rust_log: &str, extra: &str) -> (App, PathBuf) {
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
    let config = sshd.host_config("far", &remote, sshd.port) + extra;
    let app = App::launch(Launch {
        reuse: Some(dir),
        config: Some(&config),
        rust_log,
        ..Launch::default()
    });
    (app, remote)
}

/// `app` started again on its folder once it is gone (stopped or killed),
/// with host `far` (this sshd, its repository in the folder's `host-repo`)
/// and `extra` in its config.
pub(crate) fn again_with_host(mut app: App, sshd: &Sshd, extra: &str) -> App {
    let dir = std::mem::replace(&mut app.dir, tempfile::tempdir().unwrap());
    drop(app);
    let remote = dir.path().join("host-repo");
    let config = sshd.host_config("far", &remote, sshd.port) + extra;
    App::launch(Launch {
        reuse: Some(dir),
        config: Some(&config),
        ..Launch::default()
    })
}

/// Close of a dirty `environment`: refused (`conflict`) without `force`,
/// done with it.
pub(crate) fn close_by_force(app: &App, environment: &str) {
    let refused = app.request(json!({"Close": {"environment": environment}}));
    assert_eq!(code(&refused), "conflict", "{refused}");
    assert_eq!(
        app.request(json!({"Close": {"environment": environment, "force": true}})),
        json!("Ok")
    );
}

/// The file `name` in one of the app's folders on the host (`~/.krad-ade/*/`).
pub(crate) fn host_file(sshd: &Sshd, name: &str) -> PathBuf {
    let base = sshd.dir.path().join("home/.krad-ade");
    std::fs::read_dir(&base)
        .unwrap()
        .flatten()
        .map(|dir| dir.path().join(name))
        .find(|path| path.exists())
        .unwrap_or_else(|| panic!("no {name} under {}", base.display()))
}

fn host_status(app: &App) -> Value {
    app.request(json!("Hosts"))["Hosts"][0].clone()
}

#[test]
fn a_terminal_on_the_host_reports_and_lists_through_the_forward() {
    let sshd = Sshd::start();
    let (app, remote) = app_with_host(&sshd);
    assert_eq!(
        host_status(&app)["state"],
        "stopped",
        "hosts connect on first use"
    );
    let env = app.request(json!({"CreateWorktree": {"name": "far-work", "host": "far"}}));
    let env = &env["Environment"];
    assert_eq!(env["kind"], "ssh", "{env}");
    assert_eq!(env["host"], "far");
    assert!(
        env["path"]
            .as_str()
            .unwrap()
            .starts_with(remote.to_str().unwrap())
    );
    assert!(remote.join(".krad/worktrees/far-work/app.txt").is_file());
    let status = host_status(&app);
    assert_eq!(status["state"], "up");
    let port = status["remote_port"].as_u64().unwrap();
    let id = app.spawn(json!({"profile": "exec", "environment": "far-work", "command": ["sh", "-c",
        "echo \"endpoint=$KRAD_ADE_ENDPOINT\"; krad report working -m remote-work && krad ls && krad report idle -m \"done in $(pwd)\"; sleep 60"]}))
        ["terminal"]
        .as_u64()
        .unwrap();
    let record = app.until(id, Duration::from_secs(30), |r| r["state"] == "idle");
    assert_eq!(record["host"], "far");
    assert_eq!(record["state_source"], "hook");
    assert!(
        record["message"]
            .as_str()
            .unwrap()
            .contains(".krad/worktrees/far-work"),
        "{record}"
    );
    let screen = app.until_screen(id, "endpoint=");
    assert!(
        screen.contains(&format!("endpoint=127.0.0.1:{port}")),
        "{screen}"
    );
    assert!(
        screen.contains("far-work"),
        "krad ls through the forward: {screen}"
    );
    // The token went to a 0600 file on the host, never into a command line
    // (in the app's tmux folder there: the host has tmux).
    assert_eq!(status["tmux"], true, "{status}");
    let token_file = host_file(&sshd, &format!("{id}.token"));
    let token = std::fs::read_to_string(&token_file).unwrap();
    // No process here or on the host (one machine in the test) has it in its
    // command line.
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline);
            assert!(
                !cmdline.contains(&token),
                "{}: {cmdline}",
                entry.path().display()
            );
        }
    }
    let envs = app.request(json!("Environments"))["Environments"].clone();
    assert_eq!(envs[1]["terminals"], json!([id]));
    // Closed, its token file goes from the host too.
    assert!(token_file.is_file(), "{}", token_file.display());
    assert_eq!(app.request(json!({"Close": {"target": id}})), json!("Ok"));
    assert!(!token_file.exists(), "{} is left", token_file.display());
}

#[test]
fn a_remote_worktrees_changes_and_close() {
    let sshd = Sshd::start();
    let (app, remote) = app_with_host(&sshd);
    app.request(json!({"CreateWorktree": {"name": "far-c", "host": "far"}}));
    let path = remote.join(".krad/worktrees/far-c");
    std::fs::write(path.join("app.txt"), "on the host\nchanged\n").unwrap();
    std::fs::write(path.join("new.txt"), "n\n").unwrap();
    let changes =
        app.request(json!({"Changes": {"environment": "far-c", "patch": true}}))["Changes"].clone();
    let files = crate::support::each(&changes["files"], "path");
    assert_eq!(files, ["app.txt", "new.txt"], "{changes}");
    assert!(changes["patch"].as_str().unwrap().contains("+changed"));
    // Code runs there too, through the host's control connection.
    let ran = app.request(json!({"Code": {"environment": "far-c",
        "command": ["sh", "-c", "pwd; cat new.txt; exit 3"]}}));
    let result = &ran["CodeResult"];
    assert_eq!(result["exit_code"], 3, "{ran}");
    assert_eq!(result["stdout"], format!("{}\nn\n", path.display()));
    close_by_force(&app, "far-c");
    assert!(!path.exists());
    assert_eq!(
        git(&remote, &["show", "refs/krad/archive/far-c:new.txt"]),
        "n"
    );
}

#[test]
fn variants_on_the_host_and_picking_one() {
    let sshd = Sshd::start();
    let (app, remote) = app_with_host(&sshd);
    let run = app.request(
        json!({"RunVariants": {"count": 2, "name": "hv", "host": "far", "profile": "exec",
        "command": ["sh", "-c", "echo $KRAD_ADE_ENVIRONMENT > picked.txt"], "prompt": "x"}}),
    );
    assert!(run["Variants"].is_object(), "{run}");
    for v in run["Variants"]["variants"].as_array().unwrap() {
        app.until(
            v["terminal"].as_u64().unwrap(),
            Duration::from_secs(30),
            |r| r["state"] == "exited",
        );
    }
    let picked = app.request(json!({"PickVariant": {"group": "hv", "variant": 2}}));
    assert!(picked["Picked"].is_object(), "{picked}");
    assert_eq!(
        std::fs::read_to_string(remote.join("picked.txt")).unwrap(),
        "hv-2\n"
    );
    assert!(git(&remote, &["for-each-ref", "refs/krad/archive/hv-1"]).contains("hv-1"));
}

#[test]
fn conflicts_and_update_run_git_on_the_host() {
    let sshd = Sshd::start();
    let (app, remote) = app_with_host(&sshd);
    for name in ["far-a", "far-b"] {
        let env = app.request(json!({"CreateWorktree": {"name": name, "host": "far"}}));
        assert!(env["Environment"].is_object(), "{env}");
    }
    let a = remote.join(".krad/worktrees/far-a");
    let b = remote.join(".krad/worktrees/far-b");
    std::fs::write(a.join("app.txt"), "from a\n").unwrap();
    std::fs::write(b.join("app.txt"), "from b\n").unwrap();
    git(&b, &["commit", "-q", "-am", "b's app"]);
    let status_a = git(&a, &["status", "--porcelain"]);
    let answer = app.request(json!("Conflicts"));
    let answer = &answer["Conflicts"];
    // main (this machine) and the host's environments are never paired.
    let pairs = answer["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 1, "{answer}");
    assert_eq!(
        (&pairs[0]["a"], &pairs[0]["b"], &pairs[0]["clean"]),
        (&json!("far-a"), &json!("far-b"), &json!(false))
    );
    assert_eq!(pairs[0]["files"], json!(["app.txt"]));
    let far_a = &answer["environments"][1];
    assert_eq!(far_a["host"], "far", "{answer}");
    assert_eq!(far_a["uncommitted"], true);
    // Its base is the host's repository, not this machine's main.
    assert_eq!(far_a["base"]["environment"], "main");
    assert_eq!(
        far_a["base"]["tip"],
        git(&remote, &["rev-parse", "HEAD"]).as_str()
    );
    assert_eq!(far_a["base"]["clean"], true);
    assert_eq!(git(&a, &["status", "--porcelain"]), status_a);
    // UpdateEnvironment merges the host's main into a host worktree, there.
    std::fs::write(remote.join("new.txt"), "n\n").unwrap();
    git(&remote, &["add", "new.txt"]);
    git(&remote, &["commit", "-q", "-m", "host main moves"]);
    let tip = git(&remote, &["rev-parse", "HEAD"]);
    let before = git(&b, &["rev-parse", "HEAD"]);
    let updated = app.request(json!({"UpdateEnvironment": {"environment": "far-b"}}));
    assert_eq!(updated["Updated"]["base"], tip.as_str(), "{updated}");
    assert_eq!(
        git(&b, &["log", "-1", "--format=%P"]),
        format!("{before} {tip}")
    );
    assert!(b.join("new.txt").is_file());
    // A conflict there changes nothing.
    std::fs::write(remote.join("app.txt"), "from the host's main\n").unwrap();
    git(&remote, &["commit", "-q", "-am", "host main's app"]);
    let head = git(&b, &["rev-parse", "HEAD"]);
    let refused =
        app.request(json!({"UpdateEnvironment": {"environment": "far-b", "how": "rebase"}}));
    assert_eq!(code(&refused), "conflict", "{refused}");
    assert_eq!(refused["Error"]["detail"]["files"], json!(["app.txt"]));
    assert_eq!(git(&b, &["rev-parse", "HEAD"]), head);
    assert_eq!(git(&b, &["status", "--porcelain"]), "");
}

#[test]
fn a_dropped_link_is_reported_and_reopened_on_the_same_port() {
    let sshd = Sshd::start();
    // Without tmux there, a terminal ends with its link (see remote_tmux.rs for with).
    let (app, _remote) = app_with_host_configured(&sshd, "", "tmux = false\n");
    assert_eq!(
        app.request(json!({"CheckHost": {"name": "far"}}))["Hosts"][0]["tmux"],
        false
    );
    app.request(json!({"CreateWorktree": {"name": "far-d", "host": "far"}}));
    let before = host_status(&app);
    let port = before["remote_port"].as_u64().unwrap();
    let victim = app.spawn(json!({"profile": "exec", "environment": "far-d", "command": ["sh", "-c", "krad report working; sleep 600"]}))
        ["terminal"]
        .as_u64()
        .unwrap();
    app.until(victim, Duration::from_secs(30), |r| r["state"] == "working");
    // Kill the control connection.
    let pattern = format!("krad-ssh-.*/{}-far", app.pid);
    let killed = Command::new("pkill")
        .args(["-KILL", "-f", "--", &format!("-M -N -S .*{pattern}")])
        .status()
        .unwrap();
    assert!(killed.success(), "no master ssh matched");
    // The terminal whose link went is reported, not left working.
    let gone = app.until(victim, Duration::from_secs(30), |r| r["state"] == "exited");
    assert!(
        gone["message"].as_str().unwrap_or("").contains("SSH link"),
        "{gone}"
    );
    // The link comes back on the same port, and a new terminal reaches the bus through it.
    let until = Instant::now() + Duration::from_secs(40);
    loop {
        let status = host_status(&app);
        if status["state"] == "up" && status["reconnects"].as_u64().unwrap() >= 1 {
            assert_eq!(status["remote_port"].as_u64().unwrap(), port);
            break;
        }
        assert!(
            Instant::now() < until,
            "the link was not re-opened: {status}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let again = app.spawn(json!({"profile": "exec", "environment": "far-d", "command": ["sh", "-c", "krad report idle -m back; sleep 60"]}))
        ["terminal"]
        .as_u64()
        .unwrap();
    app.until(again, Duration::from_secs(30), |r| r["message"] == "back");
}

#[test]
fn an_unreachable_host_is_unavailable_with_ssh_s_reason() {
    let sshd = Sshd::start();
    let dir = tempfile::tempdir().unwrap();
    crate::support::git_repo(dir.path());
    let closed = free_port();
    let config = sshd.host_config("nowhere", Path::new("/srv/none"), closed);
    let app = App::launch(Launch {
        reuse: Some(dir),
        config: Some(&config),
        ..Launch::default()
    });
    let answer = app.request(json!({"CheckHost": {"name": "nowhere"}}));
    assert_eq!(code(&answer), "unavailable", "{answer}");
    assert_eq!(answer["Error"]["retryable"], true);
    assert!(
        answer["Error"]["message"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("refused"),
        "{answer}"
    );
    let failed = host_status(&app);
    assert_eq!(failed["state"], "failed");
    let answer = app.request(json!({"CreateWorktree": {"name": "x", "host": "nowhere"}}));
    assert_eq!(code(&answer), "unavailable");
    // Tried again and failed again: still `failed`, since the first failure.
    let again = host_status(&app);
    assert_eq!(again["state"], "failed");
    assert_eq!(again["since"], failed["since"], "{again}");
    assert_eq!(
        code(&app.request(json!({"CreateWorktree": {"name": "x", "host": "unknown"}}))),
        "not_found"
    );
    let out = app.krad(&["hosts", "check", "nowhere"]);
    assert_eq!(exit_code(&out), 1);
    assert!(
        stderr(&out).to_lowercase().contains("refused"),
        "{}",
        stderr(&out)
    );
    let out = app.krad(&["hosts"]);
    assert!(
        stdout(&out).contains("nowhere") && stdout(&out).contains("failed"),
        "{}",
        stdout(&out)
    );
    let _ = Stdio::null();
}

#[test]
fn a_killed_app_s_control_master_and_host_token_folder_are_cleaned_by_the_next_app() {
    let sshd = Sshd::start();
    // Without tmux there, the terminal's files are the app's own (remote-<pid>).
    let (mut app, _remote) = app_with_host_configured(&sshd, "", "tmux = false\n");
    app.request(json!({"CreateWorktree": {"name": "far-k", "host": "far"}}));
    let id = app.spawn(json!({"profile": "exec", "environment": "far-k", "command": ["sh", "-c", "krad report idle -m up; sleep 600"]}))
        ["terminal"]
        .as_u64()
        .unwrap();
    app.until(id, Duration::from_secs(30), |r| r["message"] == "up");
    let old = app.pid;
    let master = format!("-M -N -S .*krad-ssh-.*/{old}-far");
    let host_folder = sshd
        .dir
        .path()
        .join("home/.krad-ade")
        .join(format!("remote-{old}"));
    assert!(host_folder.is_dir(), "{}", host_folder.display());
    assert!(
        !app.terminal_token_remote(&sshd.dir.path().join("home"), id)
            .is_empty()
    );
    app.signal(nix::sys::signal::Signal::SIGKILL);
    app.wait_exit(Duration::from_secs(10));
    let alive = |pattern: &str| {
        Command::new("pgrep")
            .args(["-f", "--", pattern])
            .stdout(Stdio::null())
            .status()
            .unwrap()
            .success()
    };
    assert!(
        alive(&master),
        "the dead app's master lives on (what is cleaned)"
    );
    let app = again_with_host(app, &sshd, "");
    // Cleaned while the app started: the old master asked to exit, its socket gone.
    let until = Instant::now() + Duration::from_secs(10);
    while alive(&master) {
        assert!(
            Instant::now() < until,
            "the dead app's ssh master still runs"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let socket = std::env::temp_dir()
        .join(format!("krad-ssh-{}", nix::unistd::geteuid()))
        .join(format!("{old}-far"));
    assert!(!socket.exists(), "{}", socket.display());
    // The host's token folder goes once the new app's link is up.
    assert_eq!(
        app.request(json!({"CheckHost": {"name": "far"}}))["Hosts"][0]["state"],
        "up"
    );
    assert!(!host_folder.exists(), "{}", host_folder.display());
}

/// `pid` and every process below it.
pub(crate) fn process_tree(pid: u32) -> Vec<i32> {
    let mut all = vec![pid as i32];
    let mut i = 0;
    while i < all.len() {
        let out = Command::new("pgrep")
            .args(["-P", &all[i].to_string()])
            .output()
            .unwrap();
        all.extend(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|l| l.trim().parse::<i32>().ok()),
        );
        i += 1;
    }
    all
}

pub(crate) fn signal_all(pids: &[i32], signal: nix::sys::signal::Signal) {
    for pid in pids {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*pid), signal);
    }
}

#[test]
fn a_frozen_host_is_down_within_seconds_and_requests_say_so_at_once() {
    let sshd = Sshd::start();
    let (app, _remote) = app_with_host(&sshd);
    let up = app.request(json!({"CheckHost": {"name": "far"}}));
    assert_eq!(up["Hosts"][0]["state"], "up", "{up}");
    // Freeze the host: sshd and every session it forked stop answering.
    let frozen = process_tree(sshd.child.id());
    signal_all(&frozen, nix::sys::signal::Signal::SIGSTOP);
    let since = Instant::now();
    let down = loop {
        let status = host_status(&app);
        if status["state"] == "down" {
            break status;
        }
        // 1 s keepalives, 3 missed: about 4 s (ssh's defaults before were 15 s and more).
        assert!(
            since.elapsed() < Duration::from_secs(12),
            "still {status} after {:?}",
            since.elapsed()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let error = down["error"].as_str().unwrap_or_default();
    assert!(!error.contains('\r') && !error.contains('\n'), "{down}");
    // A request that needs the host is refused at once, saying why in one line.
    let refused = app.request(json!({"CreateWorktree": {"name": "frozen-x", "host": "far"}}));
    assert_eq!(code(&refused), "unavailable", "{refused}");
    let message = refused["Error"]["message"].as_str().unwrap();
    assert!(message.contains("is down since"), "{message}");
    assert!(
        !message.contains('\r') && !message.contains('\n'),
        "{message}"
    );
    // Thawed, the link comes back by itself.
    signal_all(&frozen, nix::sys::signal::Signal::SIGCONT);
    let until = Instant::now() + Duration::from_secs(60);
    while host_status(&app)["state"] != "up" {
        assert!(Instant::now() < until, "{}", host_status(&app));
        std::thread::sleep(Duration::from_millis(200));
    }
}
