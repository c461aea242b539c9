//! Asks: questions agents raise on the bus (`Ask`), open until a person or a
//! client answers (`Answer`), the agent goes on without one, or they expire.
//!
//! * An ask's id is a hash of its terminal and the agent's tool-call id, so the
//!   same tool call raised again after a reconnect is the same ask — it joins the
//!   open one, or gets the decision it already had.
//! * A permission card is built from the tool's name and input only, never from
//!   the model's words; `allow-always` is offered only when the card shows the
//!   whole input, uncut and uncleaned.
//! * The first decision wins; the last 500 decided asks of each terminal are kept,
//!   in memory and in the app's store, so that a late answer after a restart
//!   still learns who decided first.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use krad_bus::protocol::{
    AnsweredInfo, ApiError, AskAnswer, AskInfo, DecidedBy, ErrorCode, TerminalRef,
};
use krad_bus::request::ask::{Ask, AskKind};
use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::sync::watch;

mod card;

pub(crate) use card::time_left;
use card::{Card, check_answer};

use krad_store::{Db, Kind, StoreError, Tx};

/// Decided asks kept per terminal.
const KEPT_DECIDED: usize = 500;
/// Terminals whose decided asks a restart reads back.
const KEPT_TERMINALS: usize = 256;
/// Open asks per terminal, as the durable facet allows.
const MAX_OPEN_PER_TERMINAL: usize = 50;
/// Options of a choice, fields of a form.
const MAX_OPTIONS: usize = 8;
const MAX_FIELDS: usize = 6;
/// The longest title; longer ones are cut.
const MAX_TITLE: usize = 500;
/// The part of a tool's input a permission card shows.
const MAX_CARD_INPUT: usize = 300;

struct Open {
    info: AskInfo,
    seq: u64,
    waiters: usize,
    done: watch::Sender<Option<AnsweredInfo>>,
}

#[derive(Default)]
struct Inner {
    open: BTreeMap<String, Open>,
    decided: BTreeMap<u64, VecDeque<AnsweredInfo>>,
    seq: u64,
}

/// What raising an ask gave.
pub(crate) enum Raised {
    /// It was decided already (the same tool call, raised again).
    Decided(AnsweredInfo),
    /// It is open: wait on the receiver. `fresh` when this call opened it.
    Open {
        /// The ask.
        info: Box<AskInfo>,
        /// Resolves with the decision.
        decision: watch::Receiver<Option<AnsweredInfo>>,
        /// Whether this call opened it.
        fresh: bool,
    },
}

/// What the phone's answer to an ask came to.
pub(crate) enum PhoneAnswer {
    /// It decided the ask.
    Taken(AnsweredInfo),
    /// The ask changed since the phone showed it (its revision moved).
    Stale(Box<AskInfo>),
    /// Someone decided it first.
    Decided(AnsweredInfo),
    /// The app does not know the ask (any more, or not yet).
    Unknown,
}

/// Who is told of every ask opened, changed and closed (the durable
/// facet's feed): the asks know it by this alone.
pub(crate) trait AskListener: Send + Sync {
    fn ask_opened(&self, info: &AskInfo);
    fn ask_changed(&self, info: &AskInfo);
    fn ask_closed(&self, info: &AskInfo, decided: &AnsweredInfo);
}

/// Every ask of the app.
#[derive(Default)]
pub(crate) struct AskBoard {
    inner: Mutex<Inner>,
    /// Told of every ask opened, changed and closed (the durable facet).
    feed: OnceLock<Arc<dyn AskListener>>,
    /// Where decisions are kept across restarts.
    decided_store: OnceLock<Arc<Db>>,
}

/// A decided ask as the store keeps it (and as a line of the file an earlier
/// krad kept them in).
#[derive(serde::Serialize, serde::Deserialize)]
struct KeptDecision {
    terminal: u64,
    decided: AnsweredInfo,
}

/// A decided ask's key in the store: by terminal, then ask.
fn decided_key(terminal: u64, ask: &str) -> String {
    format!("{terminal:020}/{ask}")
}

/// Imports the decided asks an earlier krad kept in `legacy` (one JSON line
/// each), then renames the file `*.imported`.
fn import_decided(db: &Db, legacy: &Path) {
    let Ok(text) = std::fs::read_to_string(legacy) else {
        return;
    };
    let imported = db.write(|tx| {
        for kept in text
            .lines()
            .filter_map(|l| serde_json::from_str::<KeptDecision>(l).ok())
        {
            tx.put(
                Kind::DecidedAsk,
                &decided_key(kept.terminal, &kept.decided.ask),
                &kept,
            )?;
        }
        Ok(())
    });
    match imported {
        Ok(()) => {
            let mut done = legacy.as_os_str().to_owned();
            done.push(".imported");
            if let Err(e) = std::fs::rename(legacy, done) {
                tracing::warn!("imported {} but cannot rename it: {e}", legacy.display());
            }
        }
        Err(e) => tracing::warn!("cannot import {}: {e}", legacy.display()),
    }
}

impl AskBoard {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps decisions in the store from now on, after reading the ones kept
    /// there — and, once, those an earlier krad kept in the file `legacy`
    /// (renamed `*.imported` after). At most the last 500 per terminal of the
    /// newest 256 terminals are kept.
    pub(crate) fn keep_decided_in(&self, db: Arc<Db>, legacy: &Path) {
        import_decided(&db, legacy);
        let kept = match db.read(|tx| tx.all::<KeptDecision>(Kind::DecidedAsk)) {
            Ok(kept) => kept,
            Err(e) => {
                tracing::error!("cannot read the decided asks: {e}");
                Vec::new()
            }
        };
        let mut dropped = Vec::new();
        {
            let mut inner = self.lock();
            for (_, kept) in kept {
                let list = inner.decided.entry(kept.terminal).or_default();
                list.push_back(kept.decided);
                while list.len() > KEPT_DECIDED {
                    dropped.extend(list.pop_front().map(|d| decided_key(kept.terminal, &d.ask)));
                }
            }
            // Decisions of the newest terminals only: ids are never reused, and
            // old terminals' asks cannot be answered any more.
            while inner.decided.len() > KEPT_TERMINALS {
                let Some((oldest, list)) = inner.decided.pop_first() else {
                    break;
                };
                dropped.extend(list.iter().map(|d| decided_key(oldest, &d.ask)));
            }
        }
        if !dropped.is_empty()
            && let Err(e) = db.write(|tx| {
                for key in &dropped {
                    tx.remove(Kind::DecidedAsk, key)?;
                }
                Ok(())
            })
        {
            tracing::warn!("cannot forget old decided asks: {e}");
        }
        let _ = self.decided_store.set(db);
    }

    /// Tells `feed` of every ask from now on.
    pub(crate) fn tell(&self, feed: Arc<dyn AskListener>) {
        let _ = self.feed.set(feed);
    }

    /// Opens (or joins, or recalls) the ask a terminal raises. The same ask
    /// raised again with other words changes in place: its revision moves.
    pub(crate) fn raise(&self, terminal: &TerminalRef, request: &Ask) -> Result<Raised, ApiError> {
        let id = self
            .open_permission_like(terminal, request)
            .unwrap_or_else(|| ask_id(terminal, request.tool_call_id.as_deref()));
        let card = Card::of(request);
        let mut inner = self.lock();
        if let Some(decided) = inner
            .decided
            .get(&terminal.terminal)
            .and_then(|d| d.iter().find(|a| a.ask == id))
        {
            return Ok(Raised::Decided(decided.clone()));
        }
        if let Some(open) = inner.open.get_mut(&id) {
            return Ok(self.join(open, card, request));
        }
        room_for_another(&inner, terminal.terminal)?;
        let info = card.into_info(id, terminal, request);
        Ok(self.open(&mut inner, info))
    }

    /// The id of the open permission ask `request` repeats, if any. Without a
    /// tool-call id (Claude Code's PermissionRequest has none), the same tool
    /// with the same input, asked again while open, is the same ask.
    fn open_permission_like(&self, terminal: &TerminalRef, request: &Ask) -> Option<String> {
        match (&request.tool_call_id, request.kind, &request.tool) {
            (None, AskKind::Permission, Some(tool)) => self
                .lock()
                .open
                .values()
                .find(|o| {
                    o.info.terminal == terminal.terminal
                        && o.info.kind == AskKind::Permission
                        && o.info.tool.as_ref() == Some(tool)
                })
                .map(|o| o.info.ask.clone()),
            _ => None,
        }
    }

    /// Joins an open ask raised again: one more waiter, and when its words
    /// changed, the new ones at the next revision.
    fn join(&self, open: &mut Open, card: Card, request: &Ask) -> Raised {
        open.waiters += 1;
        if open.info.title != card.title
            || open.info.options != card.options
            || open.info.fields != card.fields
        {
            open.info.title = card.title;
            open.info.options = card.options;
            open.info.fields = card.fields;
            open.info.tool = request.tool.clone();
            open.info.revision += 1;
            if let Some(feed) = self.feed.get() {
                feed.ask_changed(&open.info);
            }
        }
        Raised::Open {
            info: Box::new(open.info.clone()),
            decision: open.done.subscribe(),
            fresh: false,
        }
    }

    /// Opens a new ask and tells the feed.
    fn open(&self, inner: &mut Inner, info: AskInfo) -> Raised {
        inner.seq += 1;
        let seq = inner.seq;
        let (done, decision) = watch::channel(None);
        if let Some(feed) = self.feed.get() {
            feed.ask_opened(&info);
        }
        inner.open.insert(
            info.ask.clone(),
            Open {
                info: info.clone(),
                seq,
                waiters: 1,
                done,
            },
        );
        Raised::Open {
            info: Box::new(info),
            decision,
            fresh: true,
        }
    }

    /// Decides an open ask; the first decision wins. `from` is the deciding
    /// terminal, which may not answer its own ask.
    pub(crate) fn decide(
        &self,
        id: &str,
        by: DecidedBy,
        answer: AskAnswer,
        from: Option<u64>,
    ) -> Result<AnsweredInfo, ApiError> {
        self.decide_with(id, by, answer, from, &|_| Ok(()))
    }

    /// [`AskBoard::decide`], with `also` written in the transaction that keeps the
    /// decision (an Answer's intent: the decision was its own).
    pub(crate) fn decide_with(
        &self,
        id: &str,
        by: DecidedBy,
        answer: AskAnswer,
        from: Option<u64>,
        also: &dyn Fn(&Tx<'_>) -> Result<(), StoreError>,
    ) -> Result<AnsweredInfo, ApiError> {
        let mut inner = self.lock();
        let Some(open) = inner.open.get(id) else {
            let first = inner
                .decided
                .values()
                .flatten()
                .find(|a| a.ask == id)
                .cloned();
            return Err(match first {
                Some(first) => already_decided(id, &first),
                None => ApiError::new(ErrorCode::NotFound, format!("no ask {id}"))
                    .with_detail(json!({ "ask": id })),
            });
        };
        if from == Some(open.info.terminal) {
            return Err(ApiError::new(
                ErrorCode::Forbidden,
                "an agent may not answer its own ask",
            ));
        }
        let by_a_person = matches!(by, DecidedBy::Client | DecidedBy::Phone);
        if by_a_person && time_left(&open.info, SystemTime::now()).is_zero() {
            // Past the expiry it published: the timeout decided it, whatever
            // the timer says; the late answer learns so.
            drop(inner);
            let timed_out = self.decide(id, DecidedBy::Timeout, AskAnswer::Nothing, None)?;
            return Err(already_decided(id, &timed_out));
        }
        if by_a_person {
            check_answer(&open.info, &answer)?;
        }
        let Some(open) = inner.open.remove(id) else {
            return Err(ApiError::internal("the ask vanished"));
        };
        let decided = AnsweredInfo {
            ask: id.to_owned(),
            by,
            answer,
        };
        let terminal = open.info.terminal;
        let kept = inner.decided.entry(terminal).or_default();
        kept.push_back(decided.clone());
        let mut forgotten = None;
        while kept.len() > KEPT_DECIDED {
            forgotten = kept.pop_front().map(|d| decided_key(terminal, &d.ask));
        }
        if let Some(db) = self.decided_store.get() {
            let line = KeptDecision {
                terminal,
                decided: decided.clone(),
            };
            let kept = db.write(|tx| {
                tx.put(Kind::DecidedAsk, &decided_key(terminal, id), &line)?;
                if let Some(key) = &forgotten {
                    tx.remove(Kind::DecidedAsk, key)?;
                }
                also(tx)
            });
            if let Err(e) = kept {
                tracing::warn!("cannot keep a decided ask: {e}");
            }
        }
        open.done.send_replace(Some(decided.clone()));
        if let Some(feed) = self.feed.get() {
            feed.ask_closed(&open.info, &decided);
        }
        Ok(decided)
    }

    /// The phone's answer to an ask of `terminal`'s pane, shown at `revision`.
    /// `allow_always`: whether the phone's transport may choose `allow-always`.
    pub(crate) fn answer_from_phone(
        &self,
        id: &str,
        terminal: u64,
        revision: Option<u64>,
        answer: AskAnswer,
        allow_always: bool,
    ) -> Result<PhoneAnswer, ApiError> {
        {
            let inner = self.lock();
            match inner.open.get(id) {
                Some(open) if open.info.terminal == terminal => {
                    if revision.is_some_and(|r| r != open.info.revision) {
                        return Ok(PhoneAnswer::Stale(Box::new(open.info.clone())));
                    }
                    if !allow_always && answer.option() == Some("allow-always") {
                        return Err(ApiError::new(
                            ErrorCode::Invalid,
                            "allow-always is not offered over TLS: the token is the only lock",
                        ));
                    }
                }
                Some(_) => return Ok(PhoneAnswer::Unknown),
                None => {
                    return Ok(inner
                        .decided
                        .get(&terminal)
                        .and_then(|d| d.iter().find(|a| a.ask == id))
                        .cloned()
                        .map_or(PhoneAnswer::Unknown, PhoneAnswer::Decided));
                }
            }
        }
        match self.decide(id, DecidedBy::Phone, answer, None) {
            Ok(decided) => Ok(PhoneAnswer::Taken(decided)),
            Err(e) if e.code == ErrorCode::Conflict => Ok(self
                .decided(id)
                .map_or(PhoneAnswer::Unknown, PhoneAnswer::Decided)),
            Err(e) if e.code == ErrorCode::NotFound => Ok(PhoneAnswer::Unknown),
            Err(e) => Err(e),
        }
    }

    /// A decided ask's outcome, while it is kept.
    pub(crate) fn decided(&self, id: &str) -> Option<AnsweredInfo> {
        self.lock()
            .decided
            .values()
            .flatten()
            .find(|a| a.ask == id)
            .cloned()
    }

    /// Decides a terminal's open asks by `program` (its turn was interrupted).
    pub(crate) fn decide_all_by_program(&self, terminal: u64) -> usize {
        let ids: Vec<String> = self
            .list(Some(terminal))
            .into_iter()
            .map(|a| a.ask)
            .collect();
        ids.iter()
            .filter(|id| {
                self.decide(id, DecidedBy::Program, AskAnswer::Nothing, None)
                    .is_ok()
            })
            .count()
    }

    /// A waiter left (its client went away): when none is left, the agent went on
    /// without an answer, and the ask is decided by `program`.
    pub(crate) fn leave(&self, id: &str) {
        let last = {
            let mut inner = self.lock();
            match inner.open.get_mut(id) {
                Some(open) => {
                    open.waiters = open.waiters.saturating_sub(1);
                    open.waiters == 0
                }
                None => false,
            }
        };
        if last {
            let _ = self.decide(id, DecidedBy::Program, AskAnswer::Nothing, None);
        }
    }

    /// The open asks, oldest first.
    pub(crate) fn list(&self, terminal: Option<u64>) -> Vec<AskInfo> {
        let inner = self.lock();
        let mut open: Vec<&Open> = inner
            .open
            .values()
            .filter(|o| terminal.is_none_or(|t| o.info.terminal == t))
            .collect();
        open.sort_by_key(|o| o.seq);
        open.into_iter().map(|o| o.info.clone()).collect()
    }

    /// The terminal of an open ask.
    pub(crate) fn terminal_of(&self, id: &str) -> Option<u64> {
        self.lock().open.get(id).map(|o| o.info.terminal)
    }

    /// Whether a terminal has an open ask.
    pub(crate) fn has_open(&self, terminal: u64) -> bool {
        self.lock()
            .open
            .values()
            .any(|o| o.info.terminal == terminal)
    }
}

/// A conflict when `terminal` already has as many open asks as allowed.
fn room_for_another(inner: &Inner, terminal: u64) -> Result<(), ApiError> {
    let open_here = inner
        .open
        .values()
        .filter(|o| o.info.terminal == terminal)
        .count();
    if open_here >= MAX_OPEN_PER_TERMINAL {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            format!("terminal {terminal} already has {MAX_OPEN_PER_TERMINAL} open asks"),
        ));
    }
    Ok(())
}

/// `a-` and 16 hex characters of SHA-256(environment, terminal, tool-call id);
/// random-ish (time and a counter) without a tool-call id.
fn ask_id(terminal: &TerminalRef, tool_call_id: Option<&str>) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut hash = Sha256::new();
    hash.update(terminal.environment.as_bytes());
    hash.update([0]);
    hash.update(terminal.terminal.to_be_bytes());
    match tool_call_id {
        Some(id) => {
            hash.update(b"call");
            hash.update(id.as_bytes());
        }
        None => {
            let nanos = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            hash.update(nanos.to_be_bytes());
            hash.update(NEXT.fetch_add(1, Ordering::Relaxed).to_be_bytes());
            hash.update(std::process::id().to_be_bytes());
        }
    }
    format!("a-{}", &hex::encode(hash.finalize())[..16])
}

/// `conflict`: the ask was decided first by someone else, as `first` says.
fn already_decided(id: &str, first: &AnsweredInfo) -> ApiError {
    ApiError::new(
        ErrorCode::Conflict,
        format!("ask {id} was already decided by {:?}", first.by).to_lowercase(),
    )
    .with_detail(json!({ "ask": id, "decided": first }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use card::permission_card;
    use krad_bus::request::ask::{AskOption, AskTool};

    fn me() -> TerminalRef {
        TerminalRef {
            environment: "main".into(),
            terminal: 3,
        }
    }

    fn permission(call: &str, command: &str) -> Ask {
        Ask {
            kind: AskKind::Permission,
            tool: Some(AskTool {
                name: "Bash".into(),
                input: json!({"command": command}),
            }),
            tool_call_id: Some(call.into()),
            title: Some("ignored: the model's words".into()),
            options: None,
            fields: None,
            expires_in_secs: None,
        }
    }

    #[test]
    fn an_answer_after_the_published_expiry_is_the_timeout_s_even_by_a_millisecond() {
        let asks = AskBoard::default();
        let Raised::Open { info, .. } = asks.raise(&me(), &permission("c9", "ls")).unwrap() else {
            panic!()
        };
        // Published to the millisecond.
        assert!(info.expires_at.contains('.'), "{}", info.expires_at);
        assert!(!time_left(&info, SystemTime::now()).is_zero());
        // Its expiry passes (a millisecond ago) before any timer fires.
        let past = SystemTime::now() - std::time::Duration::from_millis(1);
        asks.lock().open.get_mut(&info.ask).unwrap().info.expires_at =
            humantime::format_rfc3339_millis(past).to_string();
        let late = asks
            .decide(
                &info.ask,
                DecidedBy::Phone,
                AskAnswer::Option("allow".into()),
                None,
            )
            .unwrap_err();
        assert_eq!(late.code, ErrorCode::Conflict);
        assert_eq!(late.detail.unwrap()["decided"]["by"], "timeout");
        assert_eq!(asks.decided(&info.ask).unwrap().by, DecidedBy::Timeout);
    }

    #[test]
    fn the_same_call_is_the_same_ask_and_the_first_decision_wins() {
        let asks = AskBoard::default();
        let Raised::Open {
            info, fresh: true, ..
        } = asks.raise(&me(), &permission("c1", "ls")).unwrap()
        else {
            panic!()
        };
        assert_eq!(info.title, "Bash: ls");
        let ids: Vec<&str> = info.options.iter().map(|o| o.id.as_str()).collect();
        assert_eq!(ids, ["allow", "allow-always", "deny"]);
        let Raised::Open { fresh: false, .. } = asks.raise(&me(), &permission("c1", "ls")).unwrap()
        else {
            panic!()
        };
        assert_eq!(
            asks.decide(
                &info.ask,
                DecidedBy::Client,
                AskAnswer::Option("nope".into()),
                None
            )
            .unwrap_err()
            .code,
            ErrorCode::Invalid
        );
        assert_eq!(
            asks.decide(
                &info.ask,
                DecidedBy::Client,
                AskAnswer::Option("deny".into()),
                Some(3)
            )
            .unwrap_err()
            .code,
            ErrorCode::Forbidden
        );
        asks.decide(
            &info.ask,
            DecidedBy::Client,
            AskAnswer::Option("deny".into()),
            None,
        )
        .unwrap();
        let again = asks
            .decide(
                &info.ask,
                DecidedBy::Client,
                AskAnswer::Option("allow".into()),
                None,
            )
            .unwrap_err();
        assert_eq!(again.code, ErrorCode::Conflict);
        assert_eq!(again.detail.unwrap()["decided"]["answer"]["option"], "deny");
        let Raised::Decided(decided) = asks.raise(&me(), &permission("c1", "ls")).unwrap() else {
            panic!()
        };
        assert_eq!(decided.by, DecidedBy::Client);
    }

    #[test]
    fn cut_or_cleaned_cards_never_offer_allow_always() {
        let (_, long) = permission_card(
            &AskTool {
                name: "Bash".into(),
                input: json!({"command": "x".repeat(1000)}),
            },
            None,
        );
        assert!(!long.iter().any(|o| o.id == "allow-always"));
        let (title, hidden) = permission_card(
            &AskTool {
                name: "Bash".into(),
                input: json!({"command": "rm\u{202e}fr"}),
            },
            None,
        );
        assert_eq!(title, "Bash: rmfr");
        assert!(!hidden.iter().any(|o| o.id == "allow-always"));
    }

    #[test]
    fn allow_always_only_when_the_agent_offers_a_rule() {
        let tool = AskTool {
            name: "Bash".into(),
            input: json!({"command": "npm test"}),
        };
        let offered = |ids: &[(&str, &str)]| -> Vec<AskOption> {
            ids.iter()
                .map(|(id, label)| AskOption {
                    id: (*id).into(),
                    label: (*label).into(),
                })
                .collect()
        };
        let (_, none) = permission_card(&tool, Some(&offered(&[("allow", "Allow")])));
        let ids: Vec<&str> = none.iter().map(|o| o.id.as_str()).collect();
        assert_eq!(ids, ["allow", "deny"]);
        let rule = offered(&[("allow-always", "Always allow Bash(npm test:*)")]);
        let (_, some) = permission_card(&tool, Some(&rule));
        assert_eq!(some[1].id, "allow-always");
        assert_eq!(some[1].label, "Always allow Bash(npm test:*)");
    }

    #[test]
    fn the_same_tool_and_input_without_a_call_id_joins_the_open_ask() {
        let asks = AskBoard::default();
        let mut ask = permission("unused", "ls");
        ask.tool_call_id = None;
        let Raised::Open { info: first, .. } = asks.raise(&me(), &ask).unwrap() else {
            panic!()
        };
        let Raised::Open {
            info: again, fresh, ..
        } = asks.raise(&me(), &ask).unwrap()
        else {
            panic!()
        };
        assert_eq!((first.ask.as_str(), fresh), (again.ask.as_str(), false));
        asks.decide(&first.ask, DecidedBy::Program, AskAnswer::Nothing, None)
            .unwrap();
        // Decided, the same command later is a new question.
        let Raised::Open {
            info: later, fresh, ..
        } = asks.raise(&me(), &ask).unwrap()
        else {
            panic!()
        };
        assert!(fresh && later.ask != first.ask);
    }

    #[test]
    fn decisions_are_read_back_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("asks-decided.jsonl");
        let db = Arc::new(Db::open(&dir.path().join("state.db")).unwrap());
        let asks = AskBoard::default();
        asks.keep_decided_in(db.clone(), &path);
        let Raised::Open { info, .. } = asks.raise(&me(), &permission("c9", "ls")).unwrap() else {
            panic!()
        };
        asks.decide(
            &info.ask,
            DecidedBy::Phone,
            AskAnswer::Option("deny".into()),
            None,
        )
        .unwrap();
        drop(asks);
        let db = Arc::new(Db::open(&dir.path().join("state.db")).unwrap());
        let again = AskBoard::default();
        again.keep_decided_in(db, &path);
        let Raised::Decided(d) = again.raise(&me(), &permission("c9", "ls")).unwrap() else {
            panic!("the decision was forgotten")
        };
        assert_eq!((d.by, d.answer.option()), (DecidedBy::Phone, Some("deny")));
    }

    #[test]
    fn the_last_waiter_leaving_decides_by_program() {
        let asks = AskBoard::default();
        let Raised::Open { info, .. } = asks.raise(&me(), &permission("c2", "ls")).unwrap() else {
            panic!()
        };
        asks.leave(&info.ask);
        assert!(asks.list(None).is_empty());
        let Raised::Decided(d) = asks.raise(&me(), &permission("c2", "ls")).unwrap() else {
            panic!()
        };
        assert_eq!(d.by, DecidedBy::Program);
    }
}
