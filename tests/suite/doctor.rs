//! `krad doctor`: nothing wrong exits 0; a host whose link failed is a
//! problem with what to do (exit 1, in text and JSON); no app exits 7. (An
//! agent whose hooks did not run: tests/suite/real/codex.rs, with the real
//! Codex CLI.)

use serde_json::Value;

use crate::support::{App, exit_code, stdout};

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
    assert!(text.contains("1 agents, 1 hosts"), "{text}");
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
