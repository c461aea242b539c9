//! The feed: what the phone is shown of every pane — the [`Feed`] the app
//! tells of agents and asks, and the phone's readers read (the durable
//! facet, [`crate::phone`], serves it).
//!
//! The feed learns of agents from the store (see `follow` in phone.rs) and
//! of asks as their [`crate::asks::AskListener`]. Each pane's record is a
//! `Pane` of `pane_log`; what outlives the app is kept by `disk`; `events`
//! is the wire's vocabulary, `ask_wire` an ask as the wire shows it. Events
//! live in memory: a reader from another epoch, or too far behind, gets the
//! pane's whole current view. Imports nothing above the store.

pub(crate) mod ask_wire;
pub(crate) mod disk;
pub(crate) mod events;
pub(crate) mod pane_log;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use krad_bus::protocol::{AgentRecord, AnsweredInfo, AskInfo, DecidedBy};
use krad_durable::limits;
use serde_json::Value;

use self::ask_wire::wire_ask;
use self::disk::{Disk, Meta, Span, Titles};
use self::events::{Event, Item, ItemKind, PaneState, view};
use self::pane_log::{Observed, Page, Pane};

// The names the calls of the wire (`calls/`) reach through the feed.

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
    disk: OnceLock<Disk>,
    rev: AtomicU64,
    inner: Mutex<Inner>,
}

/// Texts a pane holds for its next turn, at most (each ≤ 32 KiB): past it, the
/// phone is told `busy` and sends again once the agent took them.
pub(crate) const MAX_QUEUED: usize = 32;

/// A pane's turn and state (a pane the feed does not know: turn 0, starting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct PaneStatus {
    /// Its current (or last) turn.
    pub turn: u64,
    /// Its state.
    pub state: PaneState,
}

impl Feed {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts recording, with the conversations under `dir` (made 0700).
    pub(crate) fn enable(&self, dir: &Path) -> std::io::Result<()> {
        let disk = Disk::open(dir)?;
        self.lock().titles = disk.titles();
        let _ = self.disk.set(disk);
        self.enabled.store(true, Ordering::SeqCst);
        Ok(())
    }

    fn on(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Grows with every change a reader can see.
    pub(crate) fn rev(&self) -> u64 {
        self.rev.load(Ordering::SeqCst)
    }

    fn bump(&self) {
        self.rev.fetch_add(1, Ordering::SeqCst);
    }

    /// Takes in an agent's record after a change.
    pub(crate) fn observe(&self, record: &AgentRecord, asking: bool) -> Observed {
        if !self.on() {
            return Observed::default();
        }
        let disk = self.disk.get();
        let mut inner = self.lock();
        let pane = inner
            .panes
            .entry(record.terminal)
            .or_insert_with(|| Pane::open(disk, record));
        let (observed, changed) = pane.observe(disk, record, asking);
        drop(inner);
        if changed {
            self.bump();
        }
        observed
    }

    /// A terminal was closed: its conversation ends.
    pub(crate) fn removed(&self, terminal: u64) {
        if !self.on() {
            return;
        }
        if let Some(mut pane) = self.lock().panes.remove(&terminal) {
            pane.meta.ended_at = Some(crate::store::now_rfc3339());
            pane.save_meta(self.disk.get());
        }
        self.bump();
    }

    /// Keeps the agent's own session id with its conversation.
    pub(crate) fn session(&self, terminal: u64, session: &str) {
        if !self.on() {
            return;
        }
        if let Some(pane) = self.lock().panes.get_mut(&terminal)
            && pane.meta.session.as_deref() != Some(session)
        {
            pane.meta.session = Some(session.to_owned());
            pane.save_meta(self.disk.get());
        }
    }

    /// Records an item in a pane's conversation (a text sent, a notice).
    pub(crate) fn item(&self, terminal: u64, kind: ItemKind, text: &str) {
        if !self.on() {
            return;
        }
        if let Some(pane) = self.lock().panes.get_mut(&terminal) {
            pane.add_item(self.disk.get(), kind, text, None);
        }
        self.bump();
    }

    fn ask_event(&self, terminal: u64, event: Event) {
        if !self.on() {
            return;
        }
        if let Some(pane) = self.lock().panes.get_mut(&terminal) {
            pane.push(event);
        }
        self.bump();
    }

    /// A pane's turn and state, when the feed knows the pane.
    pub(crate) fn status(&self, terminal: u64) -> Option<PaneStatus> {
        self.lock().panes.get(&terminal).map(|p| PaneStatus {
            turn: p.meta.turn,
            state: p.state,
        })
    }

    /// Holds a text for the pane's next turn.
    /// `Err(n)`: the pane already holds `n` texts ([`MAX_QUEUED`]), or is gone (0).
    pub(crate) fn queue(&self, terminal: u64, text: String) -> Result<(), usize> {
        let mut inner = self.lock();
        let Some(pane) = inner.panes.get_mut(&terminal) else {
            return Err(0);
        };
        if pane.queued.len() >= MAX_QUEUED {
            return Err(pane.queued.len());
        }
        pane.queued.push(text);
        Ok(())
    }

    /// The events after `after`, or the whole view (`reset`) for a reader from
    /// another epoch, without a cursor, or too far behind. `open_asks` are the
    /// pane's open asks, as the wire shows them. `None`: no such pane.
    pub(crate) fn events(
        &self,
        terminal: u64,
        after: Option<u64>,
        same_epoch: bool,
        open_asks: Vec<Value>,
    ) -> Option<(u64, bool, Vec<Value>)> {
        let inner = self.lock();
        let Page {
            cursor,
            reset,
            events,
        } = inner
            .panes
            .get(&terminal)?
            .page(after, same_epoch, open_asks);
        Some((cursor, reset, events))
    }

    /// The whole view of a closed conversation shown again (read-only).
    pub(crate) fn closed_view(&self, terminal: u64) -> Option<Vec<Value>> {
        if !self.lock().reopened.contains(&terminal) {
            return None;
        }
        let meta = self.meta(terminal)?;
        let items = self.read_items(terminal, Span::Last(limits::VIEW_ITEMS));
        Some(view(PaneState::Exited, meta.turn, Vec::new(), &items))
    }

    /// Renames a workspace or a tab.
    pub(crate) fn rename(&self, workspace: Option<&str>, tab: Option<u64>, title: &str) {
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
        if let Some(disk) = self.disk.get() {
            disk.save_titles(&inner.titles);
        }
        drop(inner);
        self.bump();
    }

    /// A workspace's title, if renamed.
    pub(crate) fn workspace_title(&self, workspace: &str) -> Option<String> {
        self.lock().titles.workspaces.get(workspace).cloned()
    }

    /// A tab's title, if renamed.
    pub(crate) fn tab_title(&self, tab: u64) -> Option<String> {
        self.lock().titles.tabs.get(&tab).cloned()
    }

    /// Shows a closed conversation again.
    pub(crate) fn reopen(&self, terminal: u64) {
        self.lock().reopened.insert(terminal);
        self.bump();
    }

    /// Hides a reopened conversation again.
    pub(crate) fn hide(&self, terminal: u64) -> bool {
        let gone = self.lock().reopened.remove(&terminal);
        self.bump();
        gone
    }

    /// The reopened conversations.
    pub(crate) fn reopened(&self) -> Vec<Meta> {
        let ids: Vec<u64> = self.lock().reopened.iter().copied().collect();
        ids.into_iter().filter_map(|t| self.meta(t)).collect()
    }

    /// A conversation's meta: the live pane's, or the one on disk.
    pub(crate) fn meta(&self, terminal: u64) -> Option<Meta> {
        if let Some(pane) = self.lock().panes.get(&terminal) {
            return Some(pane.meta.clone());
        }
        self.disk.get()?.meta(terminal)
    }

    /// Every conversation, newest first.
    pub(crate) fn conversations(&self) -> Vec<Meta> {
        let Some(disk) = self.disk.get() else {
            return Vec::new();
        };
        disk.terminals()
            .into_iter()
            .filter_map(|t| self.meta(t))
            .collect()
    }

    /// The items of a conversation that `span` says.
    pub(crate) fn read_items(&self, terminal: u64, span: Span) -> Vec<Item> {
        match self.disk.get() {
            Some(disk) => disk.items(terminal, span),
            None => Vec::new(),
        }
    }
}

impl crate::asks::AskListener for Feed {
    /// An ask opened.
    fn ask_opened(&self, info: &AskInfo) {
        let ask = wire_ask(info);
        self.ask_event(info.terminal, Event::Ask { ask });
    }

    /// An ask changed in place (its revision moved).
    fn ask_changed(&self, info: &AskInfo) {
        let ask = wire_ask(info);
        self.ask_event(info.terminal, Event::AskChanged { ask });
    }

    /// An ask was decided.
    fn ask_closed(&self, info: &AskInfo, decided: &AnsweredInfo) {
        self.ask_event(
            info.terminal,
            Event::AskClosed {
                ask: info.ask.clone(),
                title: info.title.clone(),
                decided_by: decided.by,
                by: decided.by,
                outcome: decided.answer.to_value(),
            },
        );
        let notice = match decided.by {
            DecidedBy::Program => Some("Decided in the durable agent"),
            DecidedBy::Timeout => Some("Timed out before an answer"),
            DecidedBy::Client | DecidedBy::Phone | DecidedBy::Other => None,
        };
        if let Some(notice) = notice {
            self.item(
                info.terminal,
                ItemKind::Notice,
                &format!("{notice}: {}", info.title),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::pane_log::KEPT_EVENTS;
    use super::*;

    fn status(turn: u64, state: PaneState) -> Option<PaneStatus> {
        Some(PaneStatus { turn, state })
    }

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
        assert_eq!(feed.status(1), status(1, PaneState::Working));
        // Asking and back to work is the same turn.
        feed.observe(&record(1, "asking", None), true);
        assert_eq!(feed.status(1), status(1, PaneState::Waiting));
        assert_eq!(feed.status(1), status(1, PaneState::Waiting));
        feed.observe(&record(1, "working", None), false);
        assert_eq!(feed.status(1), status(1, PaneState::Working));
        let ended = feed.observe(&record(1, "idle", Some("all done")), false);
        assert!(ended.turn_ended && ended.replied);
        feed.observe(&record(1, "working", None), false);
        assert_eq!(feed.status(1), status(2, PaneState::Working));
        // The queued text comes back when the agent is idle again.
        assert_eq!(feed.queue(1, "next".into()), Ok(()));
        assert_eq!(
            feed.observe(&record(1, "idle", None), false).queued,
            ["next"]
        );
        // At most MAX_QUEUED wait; an unknown pane holds none.
        feed.observe(&record(1, "working", None), false);
        for i in 0..MAX_QUEUED {
            assert_eq!(feed.queue(1, i.to_string()), Ok(()));
        }
        assert_eq!(feed.queue(1, "one too many".into()), Err(MAX_QUEUED));
        assert_eq!(feed.queue(9, "nobody".into()), Err(0));
        let taken = feed.observe(&record(1, "idle", None), false).queued;
        assert_eq!(taken.len(), MAX_QUEUED);
        assert_eq!(feed.queue(1, "room again".into()), Ok(()));
    }

    #[test]
    fn readers_get_events_after_their_cursor_or_the_whole_view() {
        let (feed, _dir) = feed();
        feed.observe(&record(2, "working", None), false);
        feed.item(2, ItemKind::User, "hello");
        let (cursor, reset, view) = feed.events(2, None, true, vec![]).unwrap();
        assert!(reset);
        assert!(view.iter().any(|e| e["item"]["text"] == "hello"));
        feed.item(2, ItemKind::Notice, "more");
        let (next, reset, events) = feed.events(2, Some(cursor), true, vec![]).unwrap();
        assert!(!reset);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0]["cursor"], json!(next));
        // Another epoch, a cursor from the future, one too far behind: the view.
        assert!(feed.events(2, Some(cursor), false, vec![]).unwrap().1);
        assert!(feed.events(2, Some(next + 10), true, vec![]).unwrap().1);
        for i in 0..(KEPT_EVENTS + 5) {
            feed.item(2, ItemKind::Notice, &i.to_string());
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
    fn events_from_a_cursor_fit_in_the_answer_and_the_rest_comes_next() {
        let (feed, _dir) = feed();
        feed.observe(&record(3, "working", None), false);
        let (start, _, _) = feed.events(3, None, true, vec![]).unwrap();
        let text = "x".repeat(32 * 1024);
        for _ in 0..280 {
            feed.item(3, ItemKind::User, &text);
        }
        let (mut cursor, mut seen) = (start, 0);
        loop {
            let (next, reset, page) = feed.events(3, Some(cursor), true, vec![]).unwrap();
            assert!(!reset);
            let bytes: usize = page.iter().map(|e| e.to_string().len() + 1).sum();
            assert!(bytes <= super::pane_log::EVENTS_BYTES, "{bytes}");
            if page.is_empty() {
                break;
            }
            seen += page.len();
            cursor = next;
        }
        assert_eq!(seen, 280, "every event, over several answers");
    }

    #[test]
    fn conversations_outlive_the_pane_on_disk() {
        let (feed, dir) = feed();
        feed.observe(&record(7, "working", None), false);
        feed.item(7, ItemKind::User, "a\u{1b}b");
        feed.removed(7);
        assert!(feed.status(7).is_none());
        let again = Feed::default();
        again.enable(dir.path()).unwrap();
        let meta = again.meta(7).unwrap();
        assert!(meta.ended_at.is_some());
        let items = again.read_items(7, Span::From { from: 0, limit: 10 });
        assert_eq!(items[0].text, "ab", "control characters removed");
        assert_eq!(items[0].kind, ItemKind::User);
        assert_eq!(items.len(), 1);
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
