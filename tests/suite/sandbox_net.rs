//! Issue 39, contained agents (the network): a sandbox with an allowlist
//! reaches the hosts on it — through the app's proxy (plain HTTP and
//! CONNECT) and through a relayed loopback address — and nothing else: a
//! server off the list (standing in for the internet) gets no connection,
//! the agent is told at once (a 403 that says why, a refused connection),
//! and every attempt shows in Connections and `krad net`.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{exit_code, stdout};

/// A small HTTP server on 127.0.0.1 answering `body` to every request; its
/// port and how many connections it took.
pub(crate) fn http_server(body: &'static str) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let taken = Arc::new(AtomicUsize::new(0));
    let count = taken.clone();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            count.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                    head.push(byte[0]);
                }
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes());
            });
        }
    });
    (port, taken)
}

fn attempts(app: &crate::support::App, id: u64) -> Vec<Value> {
    let answer = app.request(json!({"Connections": {"target": id}}));
    answer["Connections"]["attempts"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"))
        .clone()
}

#[test]
fn an_allowlisted_sandbox_reaches_the_list_only_and_logs_every_attempt() {
    let (allowed, allowed_taken) = http_server("FROM-ALLOWED");
    let (internet, internet_taken) = http_server("FROM-THE-INTERNET");
    let app = crate::support::App::start_config(&format!(
        "[sandbox]\nprofiles = [\"exec\"]\nnetwork = \"allow\"\n\
         allow = [\"127.0.0.1:{allowed}\"]\n"
    ));
    let extra = "[ -n \"$P\" ] && [ \"$HTTP_PROXY\" = \"$P\" ] && echo PROXY-SET; \
                 curl -s --max-time 20 -p --noproxy '' -x \"$P\" \"$B\" || echo TUNNEL-REFUSED; \
                 curl -s --max-time 20 https://example.invalid/ || echo NAME-REFUSED;";
    let spawn =
        json!({"profile": "exec", "command": ["sh", "-c", probes(allowed, internet, extra)]});
    let (id, screen) = run_probes(&app, spawn, "NAME-REFUSED");
    for said in ["PROXY-SET", "TUNNEL-REFUSED", "DIRECT-REFUSED"] {
        assert!(screen.contains(said), "no {said:?} in:\n{screen}");
    }
    assert!(
        screen.contains("allowlist; add it to [sandbox] allow"),
        "{screen}"
    );
    only_the_list_was_reached(&screen, &allowed_taken, &internet_taken);

    let log = attempts(&app, id);
    let seen = |host: &str, port: u16, via: &str, allowed: bool| {
        log.iter().any(|a| {
            a["host"] == host && a["port"] == port && a["via"] == via && a["allowed"] == allowed
        })
    };
    for via in ["proxy", "tunnel", "relay"] {
        assert!(seen("127.0.0.1", allowed, via, true), "{via}: {log:#?}");
    }
    for via in ["proxy", "tunnel"] {
        assert!(seen("127.0.0.1", internet, via, false), "{via}: {log:#?}");
    }
    assert!(seen("example.invalid", 443, "tunnel", false), "{log:#?}");
    let relayed = log.iter().find(|a| a["via"] == "relay").unwrap();
    assert!(relayed["received"].as_u64().unwrap() > 0, "{relayed}");
    // Only the attempts after one, to follow the log.
    let first = log[0]["seq"].as_u64().unwrap();
    let later = app.request(json!({"Connections": {"target": id, "since": first}}));
    assert_eq!(
        later["Connections"]["attempts"].as_array().unwrap().len(),
        log.len() - 1
    );

    let out = app.krad(&["net", &id.to_string()]);
    assert_eq!(exit_code(&out), 0);
    let text = stdout(&out);
    assert!(
        text.contains(&format!("allowed: 127.0.0.1:{allowed}")),
        "{text}"
    );
    assert!(
        text.contains(&format!("REFUSED  127.0.0.1:{internet}  tunnel")),
        "{text}"
    );
    let json_out = app.krad(&["--json", "net", &id.to_string()]);
    let parsed: Value = serde_json::from_str(stdout(&json_out).trim()).unwrap();
    assert_eq!(parsed["Connections"]["network"], "allow");
}

#[test]
fn a_terminal_without_an_allowlist_says_its_connections_are_not_logged() {
    let app = crate::support::App::start();
    let id = app.spawn_sh("exec sleep 600");
    let answer = app.request(json!({"Connections": {"target": id}}));
    assert_eq!(answer["Connections"]["network"], Value::Null, "{answer}");
    let out = app.krad(&["net", &id.to_string()]);
    assert!(stdout(&out).contains("no allowlist"), "{}", stdout(&out));
    let missing = app.krad(&["net", "999"]);
    assert_eq!(exit_code(&missing), 3);
}

/// `krad net ID --follow` prints each new attempt once, as it happens: the
/// agent makes one connection when the test says so, then another.
#[test]
fn krad_net_follow_prints_new_attempts_as_they_happen() {
    let (allowed, _) = http_server("FROM-ALLOWED");
    let (internet, internet_taken) = http_server("FROM-THE-INTERNET");
    let app = crate::support::App::start_config(&format!(
        "[sandbox]\nprofiles = [\"exec\"]\nnetwork = \"allow\"\n\
         allow = [\"127.0.0.1:{allowed}\"]\n"
    ));
    // /tmp is the sandbox's own: the signals go through the repository.
    let repo = app.dir.path().join("repo");
    let script = format!(
        "until [ -e go1 ]; do sleep 0.05; done; \
         curl -s --max-time 20 --noproxy '' -x \"$HTTPS_PROXY\" http://127.0.0.1:{internet}/; \
         echo FIRST-DONE; until [ -e go2 ]; do sleep 0.05; done; \
         curl -s --max-time 20 http://127.0.0.1:{allowed}/; echo; \
         krad report idle -m followed; exec sleep 600"
    );
    let answer = app.request(json!({"Spawn": {"profile": "exec",
        "command": ["sh", "-c", script]}}));
    let id = answer["Agent"]["terminal"]
        .as_u64()
        .unwrap_or_else(|| panic!("{answer}"));
    let mut follower = app.krad_child(&["net", &id.to_string(), "--follow"]);
    let (lines, seen) = std::sync::mpsc::channel::<String>();
    let out = follower.stdout.take().unwrap();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let mut printed: Vec<String> = Vec::new();
    let until_line = |what: &str, printed: &mut Vec<String>| {
        let until = std::time::Instant::now() + Duration::from_secs(60);
        while !printed.iter().any(|l| l.contains(what)) {
            let left = until.saturating_duration_since(std::time::Instant::now());
            match seen.recv_timeout(left) {
                Ok(line) => printed.push(line),
                Err(e) => panic!("no {what:?} from krad net --follow ({e}): {printed:#?}"),
            }
        }
    };
    until_line(&format!("allowed: 127.0.0.1:{allowed}"), &mut printed);
    assert!(
        !printed.iter().any(|l| l.contains("REFUSED")),
        "{printed:#?}"
    );
    std::fs::write(repo.join("go1"), "").unwrap();
    until_line(
        &format!("REFUSED  127.0.0.1:{internet}  proxy"),
        &mut printed,
    );
    app.until_screen(id, "FIRST-DONE");
    std::fs::write(repo.join("go2"), "").unwrap();
    until_line(
        &format!("allowed  127.0.0.1:{allowed}  relay"),
        &mut printed,
    );
    app.until(id, Duration::from_secs(30), |r| r["message"] == "followed");
    follower.kill().unwrap();
    follower.wait().unwrap();
    let refused = printed.iter().filter(|l| l.contains("REFUSED")).count();
    assert_eq!(refused, 1, "each attempt once: {printed:#?}");
    assert_eq!(internet_taken.load(Ordering::SeqCst), 0);
}

/// The curl probes of a contained agent on a host, each printing its marker.
fn probes(allowed: u16, internet: u16, extra: &str) -> String {
    format!(
        "A=http://127.0.0.1:{allowed}/; B=http://127.0.0.1:{internet}/; P=\"$HTTPS_PROXY\"; \
         echo \"proxy:$(curl -s --max-time 20 --noproxy '' -x \"$P\" \"$A\")\"; \
         echo \"tunnel:$(curl -s --max-time 20 -p --noproxy '' -x \"$P\" \"$A\")\"; \
         echo \"relay:$(curl -s --max-time 20 \"$A\")\"; \
         echo \"refused:$(curl -s --max-time 20 --noproxy '' -x \"$P\" -w ' %{{http_code}}' \"$B\")\"; \
         curl -s --max-time 20 \"$B\" || echo DIRECT-REFUSED; {extra} \
         krad report idle -m netdone; exec sleep 600"
    )
}

/// Spawns the probes (`spawn`: the Spawn's fields); the terminal and its
/// screen once they reported and printed `last`.
fn run_probes(app: &crate::support::App, spawn: Value, last: &str) -> (u64, String) {
    let answer = app.request(json!({ "Spawn": spawn }));
    let id = answer["Agent"]["terminal"]
        .as_u64()
        .unwrap_or_else(|| panic!("{answer}"));
    app.until(id, Duration::from_secs(60), |r| r["message"] == "netdone");
    (id, app.until_screen(id, last))
}

/// What every allowlist test sees: the server on the list reached three ways
/// (proxy, tunnel, relay), the one off it refused (a 403 saying so) and
/// never connected to.
fn only_the_list_was_reached(screen: &str, allowed: &AtomicUsize, internet: &AtomicUsize) {
    for said in [
        "proxy:FROM-ALLOWED",
        "tunnel:FROM-ALLOWED",
        "relay:FROM-ALLOWED",
        "not on this sandbox's allowlist",
        "403",
    ] {
        assert!(screen.contains(said), "no {said:?} in:\n{screen}");
    }
    assert!(!screen.contains("FROM-THE-INTERNET"), "{screen}");
    assert_eq!(
        internet.load(Ordering::SeqCst),
        0,
        "the server off the list was reached"
    );
    assert_eq!(allowed.load(Ordering::SeqCst), 3);
}

/// On an SSH host (the loopback sshd), `network = "allow"` is enforced by
/// this machine's app through the terminal's socket carried over the link:
/// the agent there reaches the server on the list (proxy, tunnel, relay),
/// not the one off it (which gets no connection), `krad report` goes
/// through, and every attempt is in Connections and `krad net`. At Close,
/// the forward and the socket folder on the host go.
#[test]
fn on_an_ssh_host_an_allowlist_is_enforced_over_the_link() {
    let (allowed, allowed_taken) = http_server("FROM-ALLOWED");
    let (internet, internet_taken) = http_server("FROM-THE-INTERNET");
    let sshd = crate::ssh::Sshd::start();
    let (app, _) = crate::ssh::app_with_host_configured(
        &sshd,
        "",
        &format!(
            "\n[sandbox]\nprofiles = [\"exec\"]\nnetwork = \"allow\"\n\
             allow = [\"127.0.0.1:{allowed}\"]\n"
        ),
    );
    let created = app.request(json!({"CreateWorktree": {"name": "far-net", "host": "far"}}));
    assert!(created["Environment"].is_object(), "{created}");
    let spawn = json!({"profile": "exec", "environment": "far-net",
        "command": ["sh", "-c", probes(allowed, internet, "")]});
    let (id, screen) = run_probes(&app, spawn, "DIRECT-REFUSED");
    only_the_list_was_reached(&screen, &allowed_taken, &internet_taken);
    let log = attempts(&app, id);
    let seen = |port: u16, via: &str, allowed: bool| {
        log.iter()
            .any(|a| a["port"] == port && a["via"] == via && a["allowed"] == allowed)
    };
    for via in ["proxy", "tunnel", "relay"] {
        assert!(seen(allowed, via, true), "{via}: {log:#?}");
    }
    assert!(seen(internet, "proxy", false), "{log:#?}");
    let text = stdout(&app.krad(&["net", &id.to_string()]));
    assert!(
        text.contains(&format!("REFUSED  127.0.0.1:{internet}  proxy")),
        "{text}"
    );
    assert!(
        text.contains(&format!("allowed  127.0.0.1:{allowed}  relay")),
        "{text}"
    );

    let folder = crate::ssh::host_file(&sshd, &format!("{id}-net"));
    assert!(folder.join("net.sock").exists() && folder.join("bus.sock").exists());
    // Here, the terminal's network folder: its socket and its allowlist.
    let local = app
        .dir
        .path()
        .join(format!("repo/.git/krad/sandbox/{id}.net"));
    assert!(local.join("net.sock").exists() && local.join("allow").exists());
    assert_eq!(app.request(json!({"Close": {"target": id}})), json!("Ok"));
    assert!(!folder.exists(), "its sockets on the host go with it");
    assert!(!local.exists(), "{}", local.display());
}

/// On an SSH host, `network = "none"`: a server on the host's 127.0.0.1 is
/// refused at once, while the bus works inside — a report, and an ask that
/// waits for its answer from here.
#[test]
fn on_an_ssh_host_without_a_network_only_the_bus_goes_through() {
    let outside = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = outside.local_addr().unwrap().port();
    outside.set_nonblocking(true).unwrap();
    let sshd = crate::ssh::Sshd::start();
    let (app, _) = crate::ssh::app_with_host_configured(
        &sshd,
        "",
        "\n[sandbox]\nprofiles = [\"exec\"]\nnetwork = \"none\"\n",
    );
    let created = app.request(json!({"CreateWorktree": {"name": "far-off", "host": "far"}}));
    let worktree = std::path::PathBuf::from(
        created["Environment"]["path"]
            .as_str()
            .unwrap_or_else(|| panic!("{created}")),
    );
    let ask = r#"{"Ask":{"kind":"permission","tool":{"name":"Bash","input":{"command":"make"}},"tool_call_id":"t1"}}"#;
    // It asks once the test saw its report (an ask changes its message).
    let script = format!(
        "nc -z -w 2 127.0.0.1 {port} && echo REACHED || echo REFUSED; \
         krad report idle -m offline-far; until [ -e go ]; do sleep 0.05; done; \
         krad raw '{ask}'; echo; echo ASKED; exec sleep 600"
    );
    let answer = app.request(
        json!({"Spawn": {"profile": "exec", "environment": "far-off",
        "command": ["sh", "-c", script]}}),
    );
    let id = answer["Agent"]["terminal"]
        .as_u64()
        .unwrap_or_else(|| panic!("{answer}"));
    app.until(id, Duration::from_secs(60), |r| {
        r["message"] == "offline-far"
    });
    let screen = app.until_screen(id, "REFUSED");
    assert!(!screen.contains("REACHED"), "{screen}");
    assert!(
        outside.accept().is_err(),
        "a connection reached the host's 127.0.0.1"
    );
    std::fs::write(worktree.join("go"), "").unwrap();
    let until = std::time::Instant::now() + Duration::from_secs(30);
    let asked = loop {
        let asks = app.request(json!("Asks"));
        if let Some(first) = asks["Asks"].as_array().and_then(|a| a.first()) {
            break first.clone();
        }
        assert!(std::time::Instant::now() < until, "no ask: {asks}");
        std::thread::sleep(Duration::from_millis(25));
    };
    assert_eq!(asked["terminal"], id);
    let out = app.krad(&["answer", asked["ask"].as_str().unwrap(), "allow"]);
    assert_eq!(exit_code(&out), 0, "{}", crate::support::stderr(&out));
    let screen = app.until_screen(id, "ASKED");
    assert!(screen.contains("\"option\":\"allow\""), "{screen}");
}

/// A host whose sshd refuses Unix-socket forwarding: a contained Spawn with
/// a network of its own there is `failed` at once, saying what to change.
#[test]
fn a_host_that_refuses_socket_forwarding_fails_the_spawn_saying_why() {
    let sshd = crate::ssh::Sshd::start_with("AllowStreamLocalForwarding no\n");
    let (app, _) = crate::ssh::app_with_host_configured(
        &sshd,
        "",
        "\n[sandbox]\nprofiles = [\"exec\"]\nnetwork = \"none\"\n",
    );
    app.request(json!({"CreateWorktree": {"name": "far-no", "host": "far"}}));
    let started = std::time::Instant::now();
    let refused = app.request(json!({"Spawn": {"profile": "exec",
        "environment": "far-no", "command": ["true"]}}));
    assert_eq!(crate::support::code(&refused), "failed", "{refused}");
    let message = refused["Error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("AllowStreamLocalForwarding"), "{message}");
    assert!(message.contains("refused to forward"), "{message}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    // The host still works for a Spawn that needs no socket there.
    assert_eq!(
        app.request(json!("Hosts"))["Hosts"][0]["state"],
        "up",
        "the link stays up"
    );
}

/// The link to a host drops (sshd stopped and started again: the session and
/// its forwards go, their sockets stay on the host's disk): once it is
/// re-opened, the contained terminal's sockets are cleared and forwarded
/// again, and the agent there, which lived on in tmux, reaches the bus again.
#[test]
fn on_an_ssh_host_a_sandbox_reaches_the_bus_again_after_the_link_came_back() {
    let mut sshd = crate::ssh::Sshd::start();
    let (app, _) = crate::ssh::app_with_host_configured(
        &sshd,
        "",
        "\n[sandbox]\nprofiles = [\"exec\"]\nnetwork = \"none\"\n",
    );
    let created = app.request(json!({"CreateWorktree": {"name": "far-back", "host": "far"}}));
    let worktree = std::path::PathBuf::from(
        created["Environment"]["path"]
            .as_str()
            .unwrap_or_else(|| panic!("{created}")),
    );
    let script = "krad report idle -m before-drop; until [ -e go ]; do sleep 0.05; done; \
                  krad report idle -m after-drop; exec sleep 600";
    let answer = app.request(
        json!({"Spawn": {"profile": "exec", "environment": "far-back",
        "command": ["sh", "-c", script]}}),
    );
    let id = answer["Agent"]["terminal"]
        .as_u64()
        .unwrap_or_else(|| panic!("{answer}"));
    app.until(id, Duration::from_secs(60), |r| {
        r["message"] == "before-drop"
    });
    let host = |app: &crate::support::App| app.request(json!("Hosts"))["Hosts"][0].clone();
    sshd.stop();
    crate::support::wait_until(Duration::from_secs(60), || host(&app)["state"] != "up");
    sshd.start_again();
    crate::support::wait_until(Duration::from_secs(60), || {
        host(&app)["state"] == "up" && host(&app)["reconnects"].as_u64() >= Some(1)
    });
    std::fs::write(worktree.join("go"), "").unwrap();
    app.until(id, Duration::from_secs(60), |r| {
        r["message"] == "after-drop"
    });
}
