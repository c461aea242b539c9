//! The manager with servers that are not MCP servers at all: one that never
//! answers, one that exits at once. (Real MCP servers are exercised by the
//! integration suite, tests/suite/extensions.rs, with krad-mcp-fixture.)

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use krad_bus::protocol::{ErrorCode, ExtensionState};
use krad_ext::{ExtensionManager, Limits, ServerSpec};
use serde_json::Map;

fn sh(script: &str) -> ServerSpec {
    ServerSpec {
        command: "sh".into(),
        args: vec!["-c".into(), script.into()],
        env: BTreeMap::new(),
        cwd: std::env::temp_dir(),
    }
}

fn manager(servers: &[(&str, ServerSpec)]) -> ExtensionManager {
    let specs = servers
        .iter()
        .map(|(name, spec)| (name.to_string(), spec.clone()))
        .collect();
    ExtensionManager::new(
        specs,
        Limits {
            start_timeout: Duration::from_millis(500),
            stop_grace: Duration::from_millis(300),
            ..Limits::default()
        },
    )
}

#[tokio::test]
async fn listing_starts_nothing() {
    let marker = tempfile_path("listed");
    let m = manager(&[("a", sh(&format!("touch {}; cat", marker.display())))]);
    let list = m.list();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].name, "a");
    assert_eq!(list[0].state, ExtensionState::Stopped);
    assert!(list[0].tools.is_empty());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!marker.exists(), "listing started the server");
}

#[tokio::test]
async fn an_unknown_extension_is_not_found() {
    let m = manager(&[("a", sh("cat"))]);
    let e = m.call("b", "x", Map::new()).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound);
    assert!(
        e.message.contains("\"b\"") && e.message.contains("a"),
        "{e}"
    );
}

#[tokio::test]
async fn a_server_that_never_answers_is_unavailable_and_failed() {
    let m = manager(&[("mute", sh("cat > /dev/null"))]);
    let started = Instant::now();
    let e = m.call("mute", "x", Map::new()).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Unavailable);
    assert!(e.retryable);
    assert!(e.message.contains("did not answer"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(5));
    let info = &m.list()[0];
    assert_eq!(info.state, ExtensionState::Failed);
    assert!(info.error.as_deref().unwrap().contains("did not answer"));
    m.shutdown().await;
}

#[tokio::test]
async fn a_server_that_exits_at_once_says_how_and_backs_off() {
    let m = manager(&[("gone", sh("echo bye >&2; exit 3"))]);
    let e = m.call("gone", "x", Map::new()).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Unavailable);
    assert!(e.message.contains("exit code 3"), "{e}");
    // One failure: the next call tries again at once.
    let e = m.call("gone", "x", Map::new()).await.unwrap_err();
    assert!(e.message.contains("exit code 3"), "{e}");
    // Two failures: the next call is refused without a start, for a while.
    let e = m.call("gone", "x", Map::new()).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Unavailable);
    assert!(e.message.contains("tried again in"), "{e}");
    assert!(e.detail.unwrap()["retry_after_ms"].as_u64().unwrap() <= 1000);
    assert_eq!(m.list()[0].state, ExtensionState::Failed);
    // Launched twice (the refused call launched nothing): one restart.
    assert_eq!(m.list()[0].restarts, 1);
}

#[tokio::test]
async fn a_program_that_cannot_start_is_unavailable() {
    let mut spec = sh("");
    spec.command = "/nonexistent/krad-no-such-server".into();
    let m = manager(&[("none", spec)]);
    let e = m.call("none", "x", Map::new()).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Unavailable);
    assert!(e.message.contains("cannot start"), "{e}");
}

fn tempfile_path(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "krad-ext-test-{}-{name}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ))
}
