//! Telling the user, not just the bus: `[notify]` in the config runs a command
//! and/or shows a desktop notification when an agent needs them — it moved to
//! `asking`, to `idle` after `working`, or `exited`.
//!
//! One task follows the store's changes. Each terminal is told about at most
//! once per `debounce_secs` (an exit always gets through). The command gets the
//! agent's record as JSON on stdin and the kind in `KRAD_NOTIFY_KIND`; it never
//! gets a token (the app's own `KRAD_ADE_TOKEN*` variables are removed).

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use crate::config::{NotifyConfig, NotifyKind};
use crate::store::Store;
use krad_bus::protocol::{AgentRecord, AgentState, StreamMessage};
use tokio::io::AsyncWriteExt;

/// How long a notify command may run before it is killed.
const COMMAND_LIMIT: Duration = Duration::from_secs(30);
/// Notify commands running at once, at most; more are dropped (and logged).
const MAX_RUNNING: usize = 4;

/// The kind of notification a move from `before` to the record's state is.
pub(crate) fn kind_of(before: Option<AgentState>, after: &AgentRecord) -> Option<NotifyKind> {
    match (before, after.state) {
        (Some(AgentState::Asking), AgentState::Asking) => None,
        (_, AgentState::Asking) => Some(NotifyKind::Asking),
        (Some(AgentState::Working), AgentState::Idle) => Some(NotifyKind::Idle),
        (Some(AgentState::Exited), AgentState::Exited) => None,
        (_, AgentState::Exited) => Some(NotifyKind::Exited),
        _ => None,
    }
}

/// Starts the notifier when the config has `[notify]`.
pub(crate) fn start(config: Option<&NotifyConfig>, store: &Arc<Store>) {
    let Some(config) = config.cloned() else {
        return;
    };
    let store = store.clone();
    tokio::spawn(async move { run(store, config).await });
}

async fn run(store: Arc<Store>, config: NotifyConfig) {
    let mut revs = store.revs();
    let mut seen_rev = *revs.borrow_and_update();
    let mut states: HashMap<u64, AgentState> = store
        .list(None)
        .into_iter()
        .map(|r| (r.terminal, r.state))
        .collect();
    let mut last_told: HashMap<u64, tokio::time::Instant> = HashMap::new();
    let debounce = Duration::from_secs(config.debounce_secs);
    let running = Arc::new(tokio::sync::Semaphore::new(MAX_RUNNING));
    let desktop = config.desktop && notify_send_installed();
    if config.desktop && !desktop {
        tracing::warn!(
            "[notify] desktop = true, but notify-send is not installed (apt install libnotify-bin)"
        );
    }
    while revs.changed().await.is_ok() {
        let (changes, now_rev) = store.changes_since(seen_rev, None);
        seen_rev = now_rev;
        for change in changes {
            let record = match change {
                StreamMessage::Agent(record) => record,
                StreamMessage::Removed(removed) => {
                    states.remove(&removed.terminal);
                    last_told.remove(&removed.terminal);
                    continue;
                }
                _ => continue,
            };
            let before = states.insert(record.terminal, record.state);
            let Some(kind) = kind_of(before, &record) else {
                continue;
            };
            if !config.on.contains(&kind) {
                continue;
            }
            let now = tokio::time::Instant::now();
            if kind != NotifyKind::Exited
                && last_told
                    .get(&record.terminal)
                    .is_some_and(|at| now.duration_since(*at) < debounce)
            {
                continue;
            }
            last_told.insert(record.terminal, now);
            let Ok(permit) = running.clone().try_acquire_owned() else {
                tracing::warn!(
                    terminal = record.terminal,
                    "notify: {MAX_RUNNING} notifications still running; this one is dropped"
                );
                continue;
            };
            let command = config.command.clone();
            tokio::spawn(async move {
                if let Some(command) = command {
                    run_command(&command, kind, &record).await;
                }
                if desktop {
                    desktop_notification(kind, &record).await;
                }
                drop(permit);
            });
        }
    }
}

/// Runs the notify command with the record on stdin; logs what went wrong.
async fn run_command(command: &[String], kind: NotifyKind, record: &AgentRecord) {
    let Some((program, args)) = command.split_first() else {
        return;
    };
    let mut child = match tokio::process::Command::new(program)
        .args(args)
        .env("KRAD_NOTIFY_KIND", kind.as_str())
        .env("KRAD_NOTIFY_TERMINAL", record.terminal.to_string())
        .env_remove("KRAD_ADE_TOKEN")
        .env_remove("KRAD_ADE_TOKEN_FILE")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            tracing::warn!("notify: cannot run {program:?}: {e}");
            return;
        }
    };
    let mut line = serde_json::to_vec(record).unwrap_or_default();
    line.push(b'\n');
    if let Some(mut stdin) = child.stdin.take() {
        // A command that does not read its stdin is fine.
        let _ = stdin.write_all(&line).await;
    }
    match tokio::time::timeout(COMMAND_LIMIT, child.wait()).await {
        Ok(Ok(status)) if status.success() => {}
        Ok(Ok(status)) => tracing::warn!("notify: {program:?} failed ({status})"),
        Ok(Err(e)) => tracing::warn!("notify: {program:?}: {e}"),
        Err(_) => {
            tracing::warn!("notify: {program:?} ran past {COMMAND_LIMIT:?}; killed");
            let _ = child.kill().await;
        }
    }
}

/// What a person reads: `krad: fix-login (terminal 4) needs you`, and the message.
pub(crate) fn summary(kind: NotifyKind, record: &AgentRecord) -> (String, String) {
    let who = match &record.name {
        Some(name) => format!("{name} (terminal {})", record.terminal),
        None => format!("terminal {}", record.terminal),
    };
    let title = match kind {
        NotifyKind::Asking => format!("krad: {who} needs you"),
        NotifyKind::Idle => format!("krad: {who} is done"),
        NotifyKind::Exited => format!("krad: {who} exited"),
    };
    (title, record.message.clone().unwrap_or_default())
}

async fn desktop_notification(kind: NotifyKind, record: &AgentRecord) {
    let (title, body) = summary(kind, record);
    let urgency = if kind == NotifyKind::Asking {
        "critical"
    } else {
        "normal"
    };
    let run = tokio::process::Command::new("notify-send")
        .args(["--app-name=krad", "--urgency", urgency, "--", &title, &body])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .status();
    match tokio::time::timeout(COMMAND_LIMIT, run).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::warn!("notify: notify-send: {e}"),
        Err(_) => tracing::warn!("notify: notify-send hung; killed"),
    }
}

fn notify_send_installed() -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| dir.join("notify-send").is_file())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(state: AgentState) -> AgentRecord {
        let mut r: AgentRecord = serde_json::from_value(serde_json::json!({
            "terminal": 4, "environment": "main", "profile": "claude", "command": ["claude"], "lead": false,
            "cwd": "/r", "state": "idle", "state_source": "hook", "started_at": "x",
            "state_since": "x", "rev": 1
        }))
        .unwrap();
        r.state = state;
        r
    }

    #[test]
    fn kinds() {
        use AgentState::*;
        assert_eq!(
            kind_of(Some(Working), &record(Asking)),
            Some(NotifyKind::Asking)
        );
        assert_eq!(kind_of(Some(Asking), &record(Asking)), None);
        assert_eq!(
            kind_of(Some(Working), &record(Idle)),
            Some(NotifyKind::Idle)
        );
        assert_eq!(kind_of(Some(Starting), &record(Idle)), None);
        assert_eq!(kind_of(Some(Idle), &record(Idle)), None);
        assert_eq!(
            kind_of(Some(Idle), &record(Exited)),
            Some(NotifyKind::Exited)
        );
        assert_eq!(kind_of(Some(Exited), &record(Exited)), None);
    }

    #[test]
    fn config_needs_something_to_do() {
        let parse = |s: &str| toml::from_str::<NotifyConfig>(s).unwrap();
        assert!(parse("desktop = false").validate().is_err());
        assert!(parse("command = []").validate().is_err());
        let ok = parse("command = [\"notify-me\"]\non = [\"asking\"]");
        assert!(ok.validate().is_ok());
        assert_eq!(ok.on, [NotifyKind::Asking]);
        assert_eq!(ok.debounce_secs, 10);
        assert!(toml::from_str::<NotifyConfig>("on = [\"sometimes\"]").is_err());
    }

    #[test]
    fn summaries() {
        let mut r = record(AgentState::Asking);
        r.name = Some("fix-login".into());
        r.message = Some("Bash: rm -rf build".into());
        assert_eq!(
            summary(NotifyKind::Asking, &r),
            (
                "krad: fix-login (terminal 4) needs you".to_owned(),
                "Bash: rm -rf build".to_owned()
            )
        );
    }
}
