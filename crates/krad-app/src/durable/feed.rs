//! The durable facet's record of each pane: its events with their cursors, its
//! turns, its queued sends, and its conversation's items — kept on disk (one
//! meta file and one JSON-lines file per conversation, 0600) so the history
//! outlives the terminal and the app.
//!
//! The feed learns of agents from the store (see `follow` in the module above)
//! and of asks from [`crate::asks::Asks`]. Events live in memory: a reader from
//! another epoch, or too far behind, gets the pane's whole current view.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use krad_bus::protocol::{AgentRecord, AgentState, AnsweredInfo, AskInfo, DecidedBy};
use krad_bus::request::ask::AskKind;
use krad_durable::limits;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Events kept per pane; a reader further behind gets the whole view.
const KEPT_EVENTS: usize = 4000;
/// What a whole view's items may weigh, under the events answer's 8 MiB.
const VIEW_BYTES: usize = 7 * 1024 * 1024;

/// One entry of a conversation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Item {
    /// `i<n>`, in the conversation's order.
    pub id: String,
    /// user, reply, thinking, notice, markdown, code or link.
    pub kind: String,
    /// The text (cut to the kind's limit, cleaned).
    pub text: String,
    /// When (RFC 3339 UTC).
    pub at: String,
    /// A link's address (`https://` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// What a conversation is, besides its items.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Meta {
    /// `c<terminal>`.
    pub conversation: String,
    /// The terminal.
    pub terminal: u64,
    /// Its environment.
    pub workspace: String,
    /// Its profile.
    pub profile: String,
    /// What the phone shows.
    pub title: String,
    /// When it started.
    pub started_at: String,
    /// When its terminal was closed.
    pub ended_at: Option<String>,
    /// Its last turn.
    pub turn: u64,
    /// Items so far.
    pub items: u64,
    /// The agent's own session id, when it reported one (to resume it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

/// What taking in a record came to.
#[derive(Debug, Default)]
pub(crate) struct Observed {
    /// Texts queued for the next turn: the agent just went idle, type them.
    pub queued: Vec<String>,
    /// A turn just ended.
    pub turn_ended: bool,
    /// The agent's message was recorded as its reply.
    pub replied: bool,
}

struct Pane {
    meta: Meta,
    /// The last event's cursor.
    cursor: u64,
    events: VecDeque<(u64, Value)>,
    /// The newest items (≤ the whole view's count).
    items: VecDeque<Item>,
    state: &'static str,
    message: Option<String>,
    /// Texts waiting for the next turn.
    queued: Vec<String>,
}

#[derive(Default, Serialize, Deserialize)]
struct Titles {
    workspaces: BTreeMap<String, String>,
    tabs: BTreeMap<u64, String>,
}

#[derive(Default)]
struct Inner {
    panes: BTreeMap<u64, Pane>,
    titles: Titles,
    /// Closed conversations shown again (read-only).
    reopened: BTreeSet<u64>,
}

/// The feed of every pane.
#[derive(Default)]
pub(crate) struct Feed {
    enabled: AtomicBool,
    dir: OnceLock<PathBuf>,
    rev: AtomicU64,
    inner: Mutex<Inner>,
}

/// A pane's state on the wire.
pub(crate) fn wire_state(state: AgentState, asking: bool) -> &'static str {
    match state {
        AgentState::Exited => "exited",
        _ if asking => "waiting",
        AgentState::Starting => "starting",
        AgentState::Working => "working",
        AgentState::Idle | AgentState::Other => "idle",
        AgentState::Asking => "waiting",
    }
}

/// `c<terminal>` → the terminal.
pub(crate) fn conversation_terminal(id: &str) -> Option<u64> {
    id.strip_prefix('c')?.parse().ok()
}

impl Feed {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts recording, with the conversations under `dir` (made 0700).
    pub fn enable(&self, dir: &Path) -> std::io::Result<()> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir.join("conversations"))?;
        let titles = std::fs::read(dir.join("titles.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        self.lock().titles = titles;
        let _ = self.dir.set(dir.to_path_buf());
        self.enabled.store(true, Ordering::SeqCst);
        Ok(())
    }

    fn on(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Grows with every change a reader can see.
    pub fn rev(&self) -> u64 {
        self.rev.load(Ordering::SeqCst)
    }

    fn bump(&self) {
        self.rev.fetch_add(1, Ordering::SeqCst);
    }

    fn conversations_dir(&self) -> Option<PathBuf> {
        self.dir.get().map(|d| d.join("conversations"))
    }

    /// Takes in an agent's record after a change.
    pub fn observe(&self, record: &AgentRecord, asking: bool) -> Observed {
        if !self.on() {
            return Observed::default();
        }
        let state = wire_state(record.state, asking);
        let mut inner = self.lock();
        let dir = self.conversations_dir();
        let pane = inner
            .panes
            .entry(record.terminal)
            .or_insert_with(|| Pane::open(dir.as_deref(), record));
        let mut observed = Observed::default();
        let mut changed = false;
        if pane.state != state {
            // A turn starts when the agent goes to work (or asks) from rest.
            let active = |s: &str| matches!(s, "working" | "waiting");
            observed.turn_ended = active(pane.state) && !active(state);
            if active(state) && !active(pane.state) {
                pane.meta.turn += 1;
                let turn = pane.meta.turn;
                pane.push(json!({"type": "turn", "turn": turn}));
                pane.save_meta(dir.as_deref());
            }
            pane.state = state;
            pane.push(json!({"type": "state", "state": state}));
            if state == "idle" {
                observed.queued = std::mem::take(&mut pane.queued);
            }
            if state == "exited" {
                let how = match (record.exit_code, record.signal) {
                    (Some(code), _) => format!("The program exited with code {code}."),
                    (_, Some(signal)) => format!("The program was killed by signal {signal}."),
                    _ => "The program ended.".to_owned(),
                };
                pane.add_item(dir.as_deref(), "notice", &how, None);
            }
            changed = true;
        }
        let message = record.message.clone().filter(|m| !m.trim().is_empty());
        if message != pane.message {
            if let Some(text) = &message
                && state != "waiting"
            {
                let kind = if matches!(state, "idle" | "exited") {
                    "reply"
                } else {
                    "notice"
                };
                pane.add_item(dir.as_deref(), kind, text, None);
                observed.replied = kind == "reply";
                changed = true;
            }
            pane.message = message;
        }
        drop(inner);
        if changed {
            self.bump();
        }
        observed
    }

    /// A terminal was closed: its conversation ends.
    pub fn removed(&self, terminal: u64) {
        if !self.on() {
            return;
        }
        let dir = self.conversations_dir();
        if let Some(mut pane) = self.lock().panes.remove(&terminal) {
            pane.meta.ended_at = Some(crate::store::now_rfc3339());
            pane.save_meta(dir.as_deref());
        }
        self.bump();
    }

    /// Keeps the agent's own session id with its conversation.
    pub fn session(&self, terminal: u64, session: &str) {
        if !self.on() {
            return;
        }
        let dir = self.conversations_dir();
        if let Some(pane) = self.lock().panes.get_mut(&terminal)
            && pane.meta.session.as_deref() != Some(session)
        {
            pane.meta.session = Some(session.to_owned());
            pane.save_meta(dir.as_deref());
        }
    }

    /// Records an item in a pane's conversation (a text sent, a notice).
    pub fn item(&self, terminal: u64, kind: &str, text: &str) {
        if !self.on() {
            return;
        }
        let dir = self.conversations_dir();
        if let Some(pane) = self.lock().panes.get_mut(&terminal) {
            pane.add_item(dir.as_deref(), kind, text, None);
        }
        self.bump();
    }

    /// An ask opened.
    pub fn ask_opened(&self, info: &AskInfo) {
        self.ask_event(info.terminal, json!({"type": "ask", "ask": wire_ask(info)}));
    }

    /// An ask changed in place (its revision moved).
    pub fn ask_changed(&self, info: &AskInfo) {
        self.ask_event(
            info.terminal,
            json!({"type": "ask-changed", "ask": wire_ask(info)}),
        );
    }

    /// An ask was decided.
    pub fn ask_closed(&self, info: &AskInfo, decided: &AnsweredInfo) {
        let by = decided_by(decided.by);
        self.ask_event(
            info.terminal,
            json!({"type": "ask-closed", "ask": info.ask, "title": info.title,
                   "decidedBy": by, "by": by, "outcome": decided.answer}),
        );
        let notice = match decided.by {
            DecidedBy::Program => Some("Decided in the durable agent"),
            DecidedBy::Timeout => Some("Timed out before an answer"),
            DecidedBy::Client | DecidedBy::Phone | DecidedBy::Other => None,
        };
        if let Some(notice) = notice {
            self.item(
                info.terminal,
                "notice",
                &format!("{notice}: {}", info.title),
            );
        }
    }

    fn ask_event(&self, terminal: u64, event: Value) {
        if !self.on() {
            return;
        }
        if let Some(pane) = self.lock().panes.get_mut(&terminal) {
            pane.push(event);
        }
        self.bump();
    }

    /// A pane's turn and state, when the feed knows the pane.
    pub fn turn_and_state(&self, terminal: u64) -> Option<(u64, &'static str)> {
        self.lock()
            .panes
            .get(&terminal)
            .map(|p| (p.meta.turn, p.state))
    }

    /// Holds a text for the pane's next turn.
    pub fn queue(&self, terminal: u64, text: String) -> bool {
        let mut inner = self.lock();
        let Some(pane) = inner.panes.get_mut(&terminal) else {
            return false;
        };
        pane.queued.push(text);
        true
    }

    /// The events after `after`, or the whole view (`reset`) for a reader from
    /// another epoch, without a cursor, or too far behind. `open_asks` are the
    /// pane's open asks, as the wire shows them. `None`: no such pane.
    pub fn events(
        &self,
        terminal: u64,
        after: Option<u64>,
        same_epoch: bool,
        open_asks: Vec<Value>,
    ) -> Option<(u64, bool, Vec<Value>)> {
        let inner = self.lock();
        let pane = inner.panes.get(&terminal)?;
        let oldest = pane
            .events
            .front()
            .map_or(pane.cursor, |(c, _)| c.saturating_sub(1));
        match after {
            Some(after) if same_epoch && after <= pane.cursor && after >= oldest => {
                let events = pane
                    .events
                    .iter()
                    .filter(|(c, _)| *c > after)
                    .take(limits::EVENTS)
                    .map(|(c, e)| with_cursor(e, *c))
                    .collect::<Vec<_>>();
                let cursor = events
                    .last()
                    .and_then(|e| e.get("cursor"))
                    .and_then(Value::as_u64)
                    .unwrap_or(after);
                Some((cursor, false, events))
            }
            _ => {
                let items: Vec<Item> = pane.items.iter().cloned().collect();
                let view = view(pane.state, pane.meta.turn, open_asks, &items);
                Some((pane.cursor, true, view))
            }
        }
    }

    /// The whole view of a closed conversation shown again (read-only).
    pub fn closed_view(&self, terminal: u64) -> Option<Vec<Value>> {
        if !self.lock().reopened.contains(&terminal) {
            return None;
        }
        let meta = self.meta(terminal)?;
        let items = self.read_items(terminal, 0, limits::VIEW_ITEMS, true);
        Some(view("exited", meta.turn, Vec::new(), &items))
    }

    /// Renames a workspace or a tab.
    pub fn rename(&self, workspace: Option<&str>, tab: Option<u64>, title: &str) {
        let mut inner = self.lock();
        if let Some(workspace) = workspace {
            inner
                .titles
                .workspaces
                .insert(workspace.to_owned(), title.to_owned());
        }
        match tab {
            // An empty title gives the tab back its own (the agent's name or title).
            Some(tab) if title.is_empty() => drop(inner.titles.tabs.remove(&tab)),
            Some(tab) => drop(inner.titles.tabs.insert(tab, title.to_owned())),
            None => {}
        }
        if let Some(dir) = self.dir.get()
            && let Ok(bytes) = serde_json::to_vec(&inner.titles)
            && let Err(e) = write_private(&dir.join("titles.json"), &bytes)
        {
            tracing::warn!("cannot keep the durable titles: {e}");
        }
        drop(inner);
        self.bump();
    }

    /// A workspace's title, if renamed.
    pub fn workspace_title(&self, workspace: &str) -> Option<String> {
        self.lock().titles.workspaces.get(workspace).cloned()
    }

    /// A tab's title, if renamed.
    pub fn tab_title(&self, tab: u64) -> Option<String> {
        self.lock().titles.tabs.get(&tab).cloned()
    }

    /// Shows a closed conversation again.
    pub fn reopen(&self, terminal: u64) {
        self.lock().reopened.insert(terminal);
        self.bump();
    }

    /// Hides a reopened conversation again.
    pub fn hide(&self, terminal: u64) -> bool {
        let gone = self.lock().reopened.remove(&terminal);
        self.bump();
        gone
    }

    /// The reopened conversations.
    pub fn reopened(&self) -> Vec<Meta> {
        let ids: Vec<u64> = self.lock().reopened.iter().copied().collect();
        ids.into_iter().filter_map(|t| self.meta(t)).collect()
    }

    /// A conversation's meta: the live pane's, or the one on disk.
    pub fn meta(&self, terminal: u64) -> Option<Meta> {
        if let Some(pane) = self.lock().panes.get(&terminal) {
            return Some(pane.meta.clone());
        }
        let dir = self.conversations_dir()?;
        let bytes = std::fs::read(dir.join(format!("{terminal}.json"))).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Every conversation, newest first.
    pub fn conversations(&self) -> Vec<Meta> {
        let Some(dir) = self.conversations_dir() else {
            return Vec::new();
        };
        let mut terminals: Vec<u64> = std::fs::read_dir(&dir)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter_map(|e| {
                        e.file_name()
                            .to_str()?
                            .strip_suffix(".json")?
                            .parse::<u64>()
                            .ok()
                    })
                    .collect()
            })
            .unwrap_or_default();
        terminals.sort_unstable_by(|a, b| b.cmp(a));
        terminals.into_iter().filter_map(|t| self.meta(t)).collect()
    }

    /// Items of a conversation from index `from`, at most `limit`; with
    /// `newest`, the last `limit` instead.
    pub fn read_items(&self, terminal: u64, from: usize, limit: usize, newest: bool) -> Vec<Item> {
        let Some(dir) = self.conversations_dir() else {
            return Vec::new();
        };
        let Ok(file) = std::fs::File::open(dir.join(format!("{terminal}.jsonl"))) else {
            return Vec::new();
        };
        let lines = std::io::BufReader::new(file)
            .lines()
            .map_while(Result::ok)
            .filter_map(|line| serde_json::from_str::<Item>(&line).ok());
        if newest {
            let mut last: VecDeque<Item> = VecDeque::new();
            for item in lines {
                last.push_back(item);
                if last.len() > limit {
                    last.pop_front();
                }
            }
            last.into()
        } else {
            lines.skip(from).take(limit).collect()
        }
    }
}

impl Pane {
    fn open(dir: Option<&Path>, record: &AgentRecord) -> Pane {
        let on_disk: Option<Meta> = dir
            .and_then(|d| std::fs::read(d.join(format!("{}.json", record.terminal))).ok())
            .and_then(|b| serde_json::from_slice(&b).ok());
        let fresh = on_disk.is_none();
        let meta = on_disk.unwrap_or_else(|| Meta {
            conversation: format!("c{}", record.terminal),
            terminal: record.terminal,
            workspace: record.environment.clone(),
            profile: record.profile.clone(),
            title: pane_title(record),
            started_at: record.started_at.clone(),
            ended_at: None,
            turn: 0,
            items: 0,
            session: None,
        });
        let mut pane = Pane {
            meta,
            cursor: 0,
            events: VecDeque::new(),
            items: VecDeque::new(),
            state: "starting",
            message: None,
            queued: Vec::new(),
        };
        if let Some(dir) = dir {
            if fresh {
                pane.save_meta(Some(dir));
            } else if let Ok(file) =
                std::fs::File::open(dir.join(format!("{}.jsonl", record.terminal)))
            {
                for item in std::io::BufReader::new(file)
                    .lines()
                    .map_while(Result::ok)
                    .filter_map(|l| serde_json::from_str::<Item>(&l).ok())
                {
                    pane.items.push_back(item);
                    if pane.items.len() > limits::VIEW_ITEMS {
                        pane.items.pop_front();
                    }
                }
            }
        }
        pane
    }

    fn push(&mut self, event: Value) {
        self.cursor += 1;
        self.events.push_back((self.cursor, event));
        while self.events.len() > KEPT_EVENTS {
            self.events.pop_front();
        }
    }

    fn add_item(&mut self, dir: Option<&Path>, kind: &str, text: &str, url: Option<String>) {
        let max = if matches!(kind, "markdown" | "code") {
            limits::CODE_ITEM
        } else {
            limits::TEXT_ITEM
        };
        self.meta.items += 1;
        let item = Item {
            id: format!("i{}", self.meta.items),
            kind: kind.to_owned(),
            text: limits::cut(text, max),
            at: crate::store::now_rfc3339(),
            url,
        };
        if let Some(dir) = dir {
            let path = dir.join(format!("{}.jsonl", self.meta.terminal));
            if let Err(e) = append_private(&path, &item) {
                tracing::warn!(
                    terminal = self.meta.terminal,
                    "cannot keep a conversation item: {e}"
                );
            }
            self.save_meta(Some(dir));
        }
        self.push(json!({"type": "item", "item": item}));
        self.items.push_back(item);
        if self.items.len() > limits::VIEW_ITEMS {
            self.items.pop_front();
        }
    }

    fn save_meta(&self, dir: Option<&Path>) {
        let Some(dir) = dir else { return };
        let path = dir.join(format!("{}.json", self.meta.terminal));
        match serde_json::to_vec(&self.meta) {
            Ok(bytes) => {
                if let Err(e) = write_private(&path, &bytes) {
                    tracing::warn!(
                        terminal = self.meta.terminal,
                        "cannot keep a conversation: {e}"
                    );
                }
            }
            Err(e) => tracing::warn!("cannot encode a conversation: {e}"),
        }
    }
}

/// A pane's title: its name, else its terminal title, else its profile.
pub(crate) fn pane_title(record: &AgentRecord) -> String {
    let title = record
        .name
        .clone()
        .or_else(|| record.title.clone().filter(|t| !t.trim().is_empty()))
        .unwrap_or_else(|| format!("{} {}", record.profile, record.terminal));
    limits::cut(&title, limits::TITLE)
}

/// The whole view: state, turn, open asks, then the newest items that fit.
fn view(state: &str, turn: u64, open_asks: Vec<Value>, items: &[Item]) -> Vec<Value> {
    let mut events = vec![
        json!({"type": "state", "state": state}),
        json!({"type": "turn", "turn": turn}),
    ];
    events.extend(
        open_asks
            .into_iter()
            .map(|ask| json!({"type": "ask", "ask": ask})),
    );
    let mut budget = VIEW_BYTES;
    let mut kept = Vec::new();
    for item in items.iter().rev().take(limits::VIEW_ITEMS) {
        let size = item.text.len() + 128;
        if size > budget {
            break;
        }
        budget -= size;
        kept.push(json!({"type": "item", "item": item}));
    }
    kept.reverse();
    events.extend(kept);
    events
}

fn with_cursor(event: &Value, cursor: u64) -> Value {
    let mut event = event.clone();
    if let Value::Object(map) = &mut event {
        map.insert("cursor".into(), json!(cursor));
    }
    event
}

/// `decidedBy` on the wire.
pub(crate) fn decided_by(by: DecidedBy) -> &'static str {
    match by {
        DecidedBy::Phone => "phone",
        DecidedBy::Client => "client",
        DecidedBy::Program => "program",
        DecidedBy::Timeout => "timeout",
        DecidedBy::Other => "other",
    }
}

/// An ask as the wire shows it, within the seed's limits.
pub(crate) fn wire_ask(info: &AskInfo) -> Value {
    let (kind, max_options) = match info.kind {
        AskKind::Permission => ("permission", limits::PERMISSION_OPTIONS),
        AskKind::Choice => ("choice", limits::CHOICE_OPTIONS),
        AskKind::Text => ("text", 0),
        AskKind::Form => ("form", 0),
    };
    let options: Vec<Value> = info
        .options
        .iter()
        .filter(|o| limits::valid_id(&o.id))
        .take(max_options)
        .map(|o| json!({"id": o.id, "label": limits::cut(&o.label, limits::TITLE)}))
        .collect();
    let fields: Vec<Value> = info
        .fields
        .iter()
        .filter(|f| limits::valid_id(&f.id))
        .take(limits::FORM_FIELDS)
        .map(|f| json!({"id": f.id, "label": limits::cut(&f.label, limits::TITLE)}))
        .collect();
    let mut ask = json!({
        "id": info.ask,
        "kind": kind,
        "title": limits::cut(&info.title, limits::TEXT_ITEM),
        "revision": info.revision,
        "createdAt": info.created_at,
        "expiresAt": info.expires_at,
        "options": options,
        "fields": fields,
    });
    if let Some(tool) = &info.tool {
        ask["tool"] = json!({"name": limits::cut(&tool.name, limits::TITLE)});
    }
    ask
}

/// Takes `allow-always` off the asks of a list of events (TLS callers).
pub(crate) fn without_allow_always(events: &mut [Value]) {
    for event in events {
        if let Some(ask) = event.get_mut("ask") {
            strip_allow_always(ask);
        }
    }
}

/// Takes `allow-always` off one wire ask.
pub(crate) fn strip_allow_always(ask: &mut Value) {
    if let Some(Value::Array(options)) = ask.get_mut("options") {
        options.retain(|o| o.get("id").and_then(Value::as_str) != Some("allow-always"));
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(bytes)?;
    drop(file);
    std::fs::rename(&tmp, path)
}

fn append_private(path: &Path, item: &Item) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut line = serde_json::to_vec(item).map_err(std::io::Error::other)?;
    line.push(b'\n');
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(&line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(terminal: u64, state: &str, message: Option<&str>) -> AgentRecord {
        serde_json::from_value(json!({
            "terminal": terminal, "environment": "main", "name": null, "profile": "shell",
            "command": ["sh"], "lead": false, "parent": null, "group": null, "variant": null,
            "state": state, "state_source": "screen", "message": message, "exit_code": null,
            "signal": null, "pid": 1, "title": null, "started_at": "2026-11-29T00:00:00Z",
            "state_since": "2026-11-29T00:00:00Z", "rev": 1
        }))
        .unwrap()
    }

    fn feed() -> (Feed, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let feed = Feed::default();
        feed.enable(dir.path()).unwrap();
        (feed, dir)
    }

    #[test]
    fn turns_move_when_the_agent_goes_to_work_from_rest() {
        let (feed, _dir) = feed();
        feed.observe(&record(1, "starting", None), false);
        feed.observe(&record(1, "working", None), false);
        assert_eq!(feed.turn_and_state(1), Some((1, "working")));
        // Asking and back to work is the same turn.
        feed.observe(&record(1, "asking", None), true);
        feed.observe(&record(1, "working", None), false);
        assert_eq!(feed.turn_and_state(1), Some((1, "working")));
        let ended = feed.observe(&record(1, "idle", Some("all done")), false);
        assert!(ended.turn_ended && ended.replied);
        feed.observe(&record(1, "working", None), false);
        assert_eq!(feed.turn_and_state(1), Some((2, "working")));
        // The queued text comes back when the agent is idle again.
        assert!(feed.queue(1, "next".into()));
        assert_eq!(
            feed.observe(&record(1, "idle", None), false).queued,
            ["next"]
        );
    }

    #[test]
    fn readers_get_events_after_their_cursor_or_the_whole_view() {
        let (feed, _dir) = feed();
        feed.observe(&record(2, "working", None), false);
        feed.item(2, "user", "hello");
        let (cursor, reset, view) = feed.events(2, None, true, vec![]).unwrap();
        assert!(reset);
        assert!(view.iter().any(|e| e["item"]["text"] == "hello"));
        feed.item(2, "notice", "more");
        let (next, reset, events) = feed.events(2, Some(cursor), true, vec![]).unwrap();
        assert!(!reset);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0]["cursor"], json!(next));
        // Another epoch, a cursor from the future, one too far behind: the view.
        assert!(feed.events(2, Some(cursor), false, vec![]).unwrap().1);
        assert!(feed.events(2, Some(next + 10), true, vec![]).unwrap().1);
        for i in 0..(KEPT_EVENTS + 5) {
            feed.item(2, "notice", &i.to_string());
        }
        assert!(feed.events(2, Some(next), true, vec![]).unwrap().1);
        let (_, _, view) = feed.events(2, Some(0), false, vec![]).unwrap();
        let items = view.iter().filter(|e| e["type"] == "item").count();
        assert_eq!(items, limits::VIEW_ITEMS, "the newest 2,000 items");
        // ≤ 1000 events per answer.
        let last = feed.events(2, None, true, vec![]).unwrap().0;
        let (_, _, page) = feed.events(2, Some(last - 1500), true, vec![]).unwrap();
        assert_eq!(page.len(), limits::EVENTS);
    }

    #[test]
    fn conversations_outlive_the_pane_on_disk() {
        let (feed, dir) = feed();
        feed.observe(&record(7, "working", None), false);
        feed.item(7, "user", "a\u{1b}b");
        feed.removed(7);
        assert!(feed.turn_and_state(7).is_none());
        let again = Feed::default();
        again.enable(dir.path()).unwrap();
        let meta = again.meta(7).unwrap();
        assert!(meta.ended_at.is_some());
        let items = again.read_items(7, 0, 10, false);
        assert_eq!(items[0].text, "ab", "control characters removed");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("conversations/7.jsonl"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(again.closed_view(7).is_none(), "not reopened");
        again.reopen(7);
        assert!(again.closed_view(7).is_some());
    }
}
