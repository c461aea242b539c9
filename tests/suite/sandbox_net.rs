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
fn http_server(body: &'static str) -> (u16, Arc<AtomicUsize>) {
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
    // Each probe prints its marker, whatever curl says.
    let script = format!(
        "A=http://127.0.0.1:{allowed}/; B=http://127.0.0.1:{internet}/; \
         P=\"$HTTPS_PROXY\"; [ -n \"$P\" ] && [ \"$HTTP_PROXY\" = \"$P\" ] && echo PROXY-SET; \
         echo \"proxy:$(curl -s --max-time 20 --noproxy '' -x \"$P\" \"$A\")\"; \
         echo \"tunnel:$(curl -s --max-time 20 -p --noproxy '' -x \"$P\" \"$A\")\"; \
         echo \"relay:$(curl -s --max-time 20 \"$A\")\"; \
         echo \"refused:$(curl -s --max-time 20 --noproxy '' -x \"$P\" -w ' %{{http_code}}' \"$B\")\"; \
         curl -s --max-time 20 -p --noproxy '' -x \"$P\" \"$B\" || echo TUNNEL-REFUSED; \
         curl -s --max-time 20 \"$B\" || echo DIRECT-REFUSED; \
         curl -s --max-time 20 https://example.invalid/ || echo NAME-REFUSED; \
         krad report idle -m netdone; exec sleep 600"
    );
    let answer = app.request(json!({"Spawn": {"profile": "exec",
        "command": ["sh", "-c", script]}}));
    let id = answer["Agent"]["terminal"]
        .as_u64()
        .unwrap_or_else(|| panic!("{answer}"));
    app.until(id, Duration::from_secs(60), |r| r["message"] == "netdone");
    let screen = app.until_screen(id, "NAME-REFUSED");
    for said in [
        "PROXY-SET",
        "proxy:FROM-ALLOWED",
        "tunnel:FROM-ALLOWED",
        "relay:FROM-ALLOWED",
        "not on this sandbox's allowlist",
        "TUNNEL-REFUSED",
        "DIRECT-REFUSED",
    ] {
        assert!(screen.contains(said), "no {said:?} in:\n{screen}");
    }
    assert!(
        screen.contains("allowlist; add it to [sandbox] allow"),
        "{screen}"
    );
    assert!(!screen.contains("FROM-THE-INTERNET"), "{screen}");
    assert_eq!(
        internet_taken.load(Ordering::SeqCst),
        0,
        "the server off the list was reached"
    );
    assert_eq!(allowed_taken.load(Ordering::SeqCst), 3);

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
