//! Section 2, transport: 127.0.0.1 only, one line in and one line out, the line
//! limits and timeouts, the connection cap.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{App, code, read_all};

fn hello_line(app: &App) -> Vec<u8> {
    let mut line = serde_json::to_vec(&app.envelope(json!("Hello"))).unwrap();
    line.push(b'\n');
    line
}

#[test]
fn listens_on_127_0_0_1_only() {
    let app = App::start();
    assert_eq!(app.endpoint.ip().to_string(), "127.0.0.1");
    // Bound to 127.0.0.1 exactly, not to 0.0.0.0: another loopback address is refused.
    let other = std::net::SocketAddr::from(([127, 0, 0, 2], app.endpoint.port()));
    assert!(TcpStream::connect_timeout(&other, Duration::from_secs(2)).is_err());
    // And the kernel's own table says so.
    let table = std::fs::read_to_string(format!("/proc/{}/net/tcp", app.pid)).unwrap();
    let port = format!("{:04X}", app.endpoint.port());
    let listening: Vec<&str> = table
        .lines()
        .filter(|l| l.split_whitespace().nth(3) == Some("0A"))
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter(|local| local.ends_with(&format!(":{port}")))
        .collect();
    assert_eq!(listening, vec![format!("0100007F:{port}")]);
}

#[test]
fn one_line_in_one_line_out_then_close() {
    let app = App::start();
    let answer = app.send_raw(&hello_line(&app));
    assert!(answer.ends_with('\n'));
    assert_eq!(answer.matches('\n').count(), 1, "{answer}");
    let hello: Value = serde_json::from_str(answer.trim_end()).unwrap();
    assert_eq!(hello["Hello"]["api_version"], 1);
    assert_eq!(hello["Hello"]["pid"], app.pid);
}

#[test]
fn bytes_after_the_first_newline_are_ignored() {
    let app = App::start();
    let mut bytes = hello_line(&app);
    bytes.extend_from_slice(b"{\"this is\": garbage\n and more \xff\xfe\n");
    bytes.extend(hello_line(&app));
    let answer = app.send_raw(&bytes);
    assert_eq!(answer.matches('\n').count(), 1, "{answer}");
    assert!(answer.starts_with("{\"Hello\""), "{answer}");
}

#[test]
fn a_line_may_arrive_in_pieces() {
    let app = App::start();
    let line = hello_line(&app);
    let mut stream = app.connect();
    for chunk in line.chunks(7) {
        stream.write_all(chunk).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(read_all(&mut stream).starts_with("{\"Hello\""));
}

/// A line of exactly `len` bytes, `\n` included, made long with an ignored field.
fn line_of_len(app: &App, len: usize) -> Vec<u8> {
    let mut envelope = app.envelope(json!("Hello"));
    envelope["padding"] = json!("");
    let base = serde_json::to_vec(&envelope).unwrap().len() + 1;
    envelope["padding"] = json!("x".repeat(len - base));
    let mut line = serde_json::to_vec(&envelope).unwrap();
    line.push(b'\n');
    assert_eq!(line.len(), len);
    line
}

#[test]
fn a_line_of_exactly_64_kib_is_accepted() {
    let app = App::start();
    let answer = app.send_raw(&line_of_len(&app, 65_536));
    assert!(answer.starts_with("{\"Hello\""), "{answer}");
}

#[test]
fn a_line_of_64_kib_and_one_byte_is_refused() {
    let app = App::start();
    let answer: Value =
        serde_json::from_str(app.send_raw(&line_of_len(&app, 65_537)).trim_end()).unwrap();
    assert_eq!(code(&answer), "bad_request");
    assert!(
        answer["Error"]["message"]
            .as_str()
            .unwrap()
            .contains("65536")
    );
}

#[test]
fn a_flood_without_newline_is_answered_at_once() {
    let app = App::start();
    let stream = app.connect();
    let mut writer = stream.try_clone().unwrap();
    let flood = std::thread::spawn(move || {
        let chunk = vec![b'x'; 64 * 1024];
        let mut sent = 0usize;
        while sent < 4 * 1024 * 1024 {
            match writer.write(&chunk) {
                Ok(n) => sent += n,
                Err(_) => break, // the app closed after answering
            }
        }
        sent
    });
    let started = Instant::now();
    let mut reader = stream;
    let answer = read_all(&mut reader);
    let took = started.elapsed();
    flood.join().unwrap();
    let answer: Value = serde_json::from_str(answer.trim_end())
        .unwrap_or_else(|e| panic!("no answer to the flood ({e}): {answer:?}"));
    assert_eq!(code(&answer), "bad_request");
    assert!(
        took < Duration::from_secs(1),
        "the flood was answered after {took:?}"
    );
    // The app is fine afterwards.
    assert!(app.request(json!("Hello"))["Hello"].is_object());
}

#[test]
fn a_silent_client_gets_bad_request_after_the_shipped_10_s() {
    let app = App::start();
    let mut stream = app.connect();
    let started = Instant::now();
    stream.write_all(b"{\"api_version\":1,").unwrap();
    let answer = read_all(&mut stream);
    let took = started.elapsed();
    let answer: Value = serde_json::from_str(answer.trim_end()).unwrap();
    assert_eq!(code(&answer), "bad_request");
    assert!(
        answer["Error"]["message"]
            .as_str()
            .unwrap()
            .contains("10 s"),
        "{answer}"
    );
    assert!(
        took >= Duration::from_millis(9_900),
        "answered after {took:?}"
    );
    assert!(took < Duration::from_secs(15), "answered after {took:?}");
}

#[test]
fn a_line_cut_short_by_the_client_is_bad_request() {
    let app = App::start();
    let mut stream = app.connect();
    stream.write_all(b"{\"api_version\":1").unwrap();
    stream.shutdown(std::net::Shutdown::Write).unwrap();
    let answer: Value = serde_json::from_str(read_all(&mut stream).trim_end()).unwrap();
    assert_eq!(code(&answer), "bad_request");
}

#[test]
fn a_client_that_half_closes_after_its_line_still_gets_the_answer() {
    // `nc -N` and friends shut down their write side once the line is sent.
    let app = App::start();
    let mut stream = app.connect();
    stream.write_all(&hello_line(&app)).unwrap();
    stream.shutdown(std::net::Shutdown::Write).unwrap();
    assert!(read_all(&mut stream).starts_with("{\"Hello\""));
}

#[test]
fn idle_connections_do_not_delay_a_hello() {
    let app = App::start_with(&["--line-timeout-ms", "60000"]);
    let idle: Vec<TcpStream> = (0..200).map(|_| app.connect()).collect();
    let started = Instant::now();
    assert!(app.request(json!("Hello"))["Hello"].is_object());
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(2),
        "Hello took {took:?} behind 200 idle connections"
    );
    let stats = app.request(json!("Stats"));
    assert!(
        stats["Stats"]["connections_open"].as_u64().unwrap() >= 201,
        "{stats}"
    );
    drop(idle);
}

#[test]
fn hundreds_of_concurrent_hellos_are_all_answered() {
    let app = App::start();
    let line = hello_line(&app);
    let endpoint = app.endpoint;
    let threads: Vec<_> = (0..300)
        .map(|_| {
            let line = line.clone();
            std::thread::spawn(move || {
                let mut stream = TcpStream::connect(endpoint).unwrap();
                stream
                    .set_read_timeout(Some(Duration::from_secs(30)))
                    .unwrap();
                stream.write_all(&line).unwrap();
                let mut answer = String::new();
                stream.read_to_string(&mut answer).unwrap();
                answer
            })
        })
        .collect();
    for thread in threads {
        let answer = thread.join().unwrap();
        assert!(answer.starts_with("{\"Hello\""), "{answer}");
    }
    let stats = app.request(json!("Stats"));
    assert!(stats["Stats"]["requests_total"].as_u64().unwrap() >= 300);
}

#[test]
fn past_the_connection_cap_the_newest_is_answered_busy_at_once() {
    let app = App::start_with(&["--max-connections", "4", "--line-timeout-ms", "60000"]);
    let held: Vec<TcpStream> = (0..4).map(|_| app.connect()).collect();
    // Let the app accept all four before the fifth arrives.
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    let answer: Value = serde_json::from_str(app.send_raw(&hello_line(&app)).trim_end()).unwrap();
    assert_eq!(code(&answer), "busy", "{answer}");
    assert_eq!(answer["Error"]["retryable"], true);
    assert!(started.elapsed() < Duration::from_secs(2));
    drop(held);
    // Once the held connections are gone, requests get through again.
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let answer = app.request(json!("Stats"));
        if answer["Stats"].is_object() {
            assert!(answer["Stats"]["errors_by_code"]["busy"].as_u64().unwrap() >= 1);
            break;
        }
        assert!(Instant::now() < until, "still busy: {answer}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_client_that_never_reads_does_not_hold_up_others() {
    let app = App::start();
    let mut rude = app.connect();
    rude.write_all(&hello_line(&app)).unwrap();
    // never reads, never closes
    assert!(app.request(json!("Hello"))["Hello"].is_object());
    drop(rude);
}

#[test]
fn the_nc_example_of_docs_protocol_md_works() {
    // The pipeline docs/protocol.md shows, run by a real shell and OpenBSD nc.
    let app = App::start();
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(r#"printf '{"api_version":1,"token":"%s","from":"Client","request":"Hello"}\n' "$TOKEN" | nc -N "${EP%:*}" "${EP##*:}""#)
        .env("TOKEN", app.token())
        .env("EP", app.endpoint.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["Hello"]["pid"], app.pid);
}
