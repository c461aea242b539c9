//! The app's one state store: every agent record, the global `rev`, and the
//! index of changes that Wait, Check and SubscribeAgents read.
//!
//! * What must survive a restart (counters, environments, groups, kept
//!   terminals) is written through to the transactional store ([`Db`], see
//!   [`crate::state_db`]) before the change is visible; the maps here are its
//!   in-memory copy for reads.
//! * Each change bumps the global rev (persisted by reservation: the store
//!   holds a rev above the current one, rewritten each time the rev reaches it)
//!   and the agent's record carries it.
//! * `changes` maps each agent's latest rev to the agent (and each removal's rev
//!   to a tombstone). A subscriber remembers the last rev it sent and reads the
//!   range after it: it gets every agent that changed, once, with its current
//!   record, in rev order. A slow subscriber therefore costs no memory and never
//!   misses a final state — its updates are conflated by construction.
//! * Each record's JSON is kept beside it, serialized once per change: List,
//!   Check and every subscriber splice those bytes rather than cloning and
//!   serializing the record each time.
//! * Each agent has a `watch` channel holding its record, so a Wait on one agent
//!   wakes only for that agent, and still reads the final record after the
//!   terminal was removed.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime};

use krad_bus::protocol::{
    AgentRecord, AgentState, EncodedAnswer, RecordJson, RemovedInfo, StateSource, StreamLine,
    StreamMessage, TerminalRef,
};
use krad_store::{Db, Kind, StoreError, Tx};
use krad_term::Terminal;
use tokio::sync::watch;

use crate::profile::Profile;
use crate::records::{
    EnvironmentRecord, GroupRecord, REV_RESERVATION, StateFile, TerminalEntry, VariantRecord,
};
use crate::state_db::{NEXT_TERMINAL, REV_RESERVED};

/// Changes kept as they were made, newest last: a subscriber less than this
/// many changes behind gets each of them, not only each agent's latest (see
/// [`Store::lines_since`]).
const RECENT_CHANGES: usize = 1024;

/// Tombstones of removed terminals kept for resuming subscribers; past this the
/// oldest are dropped and a resume from before them gets a fresh snapshot.
const MAX_TOMBSTONES: usize = 10_000;

/// What the store knows of one terminal besides its record.
pub(crate) struct Entry {
    /// The record clients see.
    pub record: AgentRecord,
    /// The terminal, while the app hosts it.
    pub terminal: Arc<dyn Terminal>,
    /// The profile it was started with.
    pub profile: Arc<Profile>,
    /// The last output or report, for the quiet-time rule.
    pub last_activity: Instant,
    /// The file holding the terminal's token.
    pub token_file: Option<PathBuf>,
    /// The program announces its own state on its screen (OSC 7501): those
    /// announcements decide the state, and Reports only bring messages.
    pub announces_state: bool,
    /// Its hooks have reported at least once (the program is up).
    pub hook_heard: bool,
    /// A prompt waits to be typed once the program is up: until then, an idle
    /// report does not make it idle (the task has not been given yet).
    pub prompt_pending: bool,
    /// The prompt was given on the command line and its turn has not ended: a
    /// program announcing `idle` meanwhile is starting up, not done.
    pub first_turn_pending: bool,
    /// A question read on the screen (a login, a trust dialog) made it `asking`:
    /// the state and source it had before.
    pub screen_question: Option<(AgentState, StateSource)>,
    /// A report's message that came before the announcement of the state it
    /// belongs to (Codex's turn-complete notify before its `done`).
    pub pending_message: Option<String>,
    /// A turn-complete report's message that came while the agent was idle
    /// with no turn's end waiting for its message: Codex runs its notify from
    /// its core, which can be a whole turn ahead of the announcements on its
    /// screen (the report before the turn's `working`). Kept across that
    /// `working` for the `done` that follows it.
    pub reported_ahead: Option<String>,
    /// A turn's end was announced (`done`) with no message yet: the report
    /// that comes while it is idle is that turn's, not one ahead of it.
    pub turn_end_unreported: bool,
    /// The agent's own permission dialog was seen on screen while it asked.
    pub dialog_seen: bool,
    /// Permission asks it raised on the bus (its PermissionRequest hook ran): a
    /// Codex approval dialog before any says its hook did not run.
    pub permission_asks: u64,
    /// How many Reports it made: a Send that began before a Report does not
    /// overwrite the state that Report set.
    pub reports: u64,
    /// The files where its CLI records its model calls, as its hooks named
    /// them ([`crate::tokens`] reads them).
    pub transcripts: Vec<PathBuf>,
    /// The user went on past its cost limit (sent to it while it was held):
    /// not stopped again until a limit is set anew ([`crate::budget`]).
    pub budget_waived: bool,
    /// `record` as JSON, rebuilt at every change of it.
    json: RecordJson,
    watch: watch::Sender<AgentRecord>,
}

impl Entry {
    /// Whether the agent tells its own state (hooks, OSC 7501 announcements):
    /// then keys sent to it, or an ask it walked away from, claim no state for it.
    pub(crate) fn tells_its_state(&self) -> bool {
        self.profile.hooks != crate::config::HookKind::None || self.announces_state
    }
}

enum Change {
    Agent(u64),
    Removed { terminal: u64, environment: String },
}

/// Terminal ids reserved in the store at once. A Spawn with nothing else to
/// record writes only when the block runs out; a crash skips what was left of
/// it (ids are never given twice, and after a crash not always dense), a clean
/// stop gives it back ([`Store::release_terminal_ids`]).
pub(crate) const TERMINAL_ID_BLOCK: u64 = 16;

struct Inner {
    rev: u64,
    persisted: StateFile,
    /// Terminal ids below this are reserved in the store (its next-terminal
    /// counter): they may be given without a write (see [`TERMINAL_ID_BLOCK`]).
    terminals_reserved: u64,
    start_rev: u64,
    resume_floor: u64,
    agents: BTreeMap<u64, Entry>,
    changes: BTreeMap<u64, Change>,
    tombstones: usize,
    /// The bus endpoint terminals are given, once the app keeps its terminals'
    /// records in the state file (always after its start): see [`Keeping`].
    keep_terminals: Option<String>,
    /// Which terminals' records are kept: this machine's only, or also those
    /// on SSH hosts (a restart-safe host keeps every one).
    keeping: Keeping,
    /// Terminals kept in the state file whatever the host (those on SSH hosts
    /// that live in tmux there: a restarted app attaches to them again).
    kept_anyway: std::collections::BTreeSet<u64>,
    /// List's answer for every agent, at the rev it was spliced at: every
    /// change of an agent moves the rev, so a match means the same bytes.
    list_answer: Option<(u64, EncodedAnswer)>,
    /// The last [`RECENT_CHANGES`] changes, in rev order, with the environment
    /// of each; every change after `recent_floor` is among them.
    recent: VecDeque<(u64, String, StreamLine)>,
    recent_floor: u64,
    /// What the sampler changed, for the streams ([`sampled`]).
    sampling: sampled::Sampling,
    /// More processes sampled as part of a terminal's usage: the checks
    /// running in its variant ([`crate::checks`]).
    also_sampled: BTreeMap<u64, Vec<u32>>,
}

impl Inner {
    /// Keeps a change as it was made, for subscribers a little behind.
    fn remember(&mut self, rev: u64, environment: &str, line: StreamLine) {
        if self.recent.len() == RECENT_CHANGES
            && let Some((dropped, _, _)) = self.recent.pop_front()
        {
            self.recent_floor = dropped;
        }
        self.recent.push_back((rev, environment.to_owned(), line));
    }
}

/// The store. Its lock is held only for short, non-blocking work.
pub(crate) struct Store {
    inner: Mutex<Inner>,
    revs: watch::Sender<u64>,
    /// The number of the last sample published to the streams.
    sampled: watch::Sender<u64>,
    db: Arc<Db>,
}

fn io(e: StoreError) -> std::io::Error {
    std::io::Error::other(e)
}

/// RFC 3339 UTC, milliseconds.
pub(crate) fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

impl Store {
    /// Opens the store over `db`, starting the rev above anything a previous
    /// run used.
    pub(crate) fn open(db: Arc<Db>) -> Result<Store, String> {
        let persisted = db
            .write(|tx| {
                let start_rev = tx.counter(REV_RESERVED)?.unwrap_or(0);
                tx.set_counter(REV_RESERVED, start_rev + REV_RESERVATION)?;
                let terminals = tx
                    .all::<TerminalEntry>(Kind::Terminal)?
                    .into_iter()
                    .map(|(_, entry)| (entry.record.terminal, entry))
                    .collect();
                Ok(StateFile {
                    rev_reserved: start_rev,
                    next_terminal: tx.counter(NEXT_TERMINAL)?.unwrap_or(1).max(1),
                    environments: tx.all(Kind::Environment)?.into_iter().collect(),
                    groups: tx.all(Kind::Group)?.into_iter().collect(),
                    terminals,
                })
            })
            .map_err(|e| e.to_string())?;
        let start_rev = persisted.rev_reserved;
        Ok(Store {
            inner: Mutex::new(Inner {
                rev: start_rev,
                terminals_reserved: persisted.next_terminal,
                persisted: StateFile {
                    rev_reserved: start_rev + REV_RESERVATION,
                    ..persisted
                },
                start_rev,
                resume_floor: 0,
                agents: BTreeMap::new(),
                changes: BTreeMap::new(),
                tombstones: 0,
                keep_terminals: None,
                keeping: Keeping::Local,
                kept_anyway: Default::default(),
                list_answer: None,
                recent: VecDeque::new(),
                recent_floor: start_rev,
                sampling: Default::default(),
                also_sampled: BTreeMap::new(),
            }),
            revs: watch::channel(start_rev).0,
            sampled: watch::channel(0).0,
            db,
        })
    }

    /// The transactional store underneath, for changes that must land together
    /// with one of the store's (see [`crate::intents`]).
    pub(crate) fn db(&self) -> &Arc<Db> {
        &self.db
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave a record half-written in a
        // way that matters more than stopping the whole app would.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The worktree environments, by name.
    pub(crate) fn environments(&self) -> Vec<EnvironmentRecord> {
        self.lock()
            .persisted
            .environments
            .values()
            .cloned()
            .collect()
    }

    /// One worktree environment.
    pub(crate) fn environment(&self, name: &str) -> Option<EnvironmentRecord> {
        self.lock().persisted.environments.get(name).cloned()
    }

    /// Adds or replaces a worktree environment, persisted before returning.
    pub(crate) fn put_environment(&self, record: EnvironmentRecord) -> std::io::Result<()> {
        self.put_environment_with(record, |_| Ok(()))
    }

    /// The same, with more changes in the same transaction.
    pub(crate) fn put_environment_with(
        &self,
        record: EnvironmentRecord,
        also: impl FnOnce(&Tx<'_>) -> Result<(), StoreError>,
    ) -> std::io::Result<()> {
        let mut inner = self.lock();
        self.db
            .write(|tx| {
                tx.put(Kind::Environment, &record.name, &record)?;
                also(tx)
            })
            .map_err(io)?;
        inner
            .persisted
            .environments
            .insert(record.name.clone(), record);
        Ok(())
    }

    /// Forgets a worktree environment, persisted before returning.
    pub(crate) fn remove_environment(
        &self,
        name: &str,
    ) -> std::io::Result<Option<EnvironmentRecord>> {
        let mut inner = self.lock();
        self.db
            .write(|tx| tx.remove(Kind::Environment, name))
            .map_err(io)?;
        Ok(inner.persisted.environments.remove(name))
    }

    /// One variant group.
    pub(crate) fn group(&self, name: &str) -> Option<GroupRecord> {
        self.lock().persisted.groups.get(name).cloned()
    }

    /// Whether a group name is taken.
    pub(crate) fn has_group(&self, name: &str) -> bool {
        self.lock().persisted.groups.contains_key(name)
    }

    /// Changes (or adds, or removes) a group, persisted before returning.
    pub(crate) fn update_group(
        &self,
        name: &str,
        change: impl FnOnce(&mut Option<GroupRecord>),
    ) -> std::io::Result<()> {
        self.update_group_with(name, change, |_| Ok(()))
    }

    /// Records variant `n` of `group`: its environment, its terminal once it
    /// has an id, and whether its agent runs contained (a group that is gone
    /// is left alone).
    pub(crate) fn record_variant(
        &self,
        group: &str,
        n: u32,
        environment: &str,
        (terminal, contained): (Option<u64>, bool),
    ) -> std::io::Result<()> {
        self.update_group(group, |g| {
            if let Some(g) = g {
                g.variants.insert(
                    n,
                    VariantRecord {
                        environment: environment.to_owned(),
                        terminal,
                        contained,
                    },
                );
            }
        })
    }

    /// The same, with more changes in the same transaction.
    pub(crate) fn update_group_with(
        &self,
        name: &str,
        change: impl FnOnce(&mut Option<GroupRecord>),
        also: impl FnOnce(&Tx<'_>) -> Result<(), StoreError>,
    ) -> std::io::Result<()> {
        let mut inner = self.lock();
        let mut group = inner.persisted.groups.get(name).cloned();
        change(&mut group);
        self.db
            .write(|tx| {
                match &group {
                    Some(group) => tx.put(Kind::Group, name, group)?,
                    None => {
                        tx.remove(Kind::Group, name)?;
                    }
                }
                also(tx)
            })
            .map_err(io)?;
        match group {
            Some(group) => inner.persisted.groups.insert(name.to_owned(), group),
            None => inner.persisted.groups.remove(name),
        };
        Ok(())
    }

    /// The terminals of an environment.
    pub(crate) fn terminals_of(&self, environment: &str) -> Vec<u64> {
        self.lock()
            .agents
            .values()
            .filter(|e| e.record.environment == environment)
            .map(|e| e.record.terminal)
            .collect()
    }

    /// Gives out the next terminal id, reserved in the store before it is
    /// used (never given twice, across crashes too); a write only once every
    /// [`TERMINAL_ID_BLOCK`] ids.
    pub(crate) fn allocate_terminal_id(&self) -> std::io::Result<u64> {
        self.allocate_terminal(None::<fn(&Tx<'_>, u64) -> Result<(), StoreError>>)
    }

    /// [`Store::allocate_terminal_id`] with more changes (given the id) in one
    /// transaction, made now.
    pub(crate) fn allocate_terminal_id_with(
        &self,
        also: impl FnOnce(&Tx<'_>, u64) -> Result<(), StoreError>,
    ) -> std::io::Result<u64> {
        self.allocate_terminal(Some(also))
    }

    fn allocate_terminal(
        &self,
        also: Option<impl FnOnce(&Tx<'_>, u64) -> Result<(), StoreError>>,
    ) -> std::io::Result<u64> {
        let mut inner = self.lock();
        let id = inner.persisted.next_terminal;
        let reserve = (id >= inner.terminals_reserved).then_some(id + TERMINAL_ID_BLOCK);
        if reserve.is_some() || also.is_some() {
            self.db
                .write(|tx| {
                    if let Some(reserved) = reserve {
                        tx.set_counter(NEXT_TERMINAL, reserved)?;
                    }
                    also.map_or(Ok(()), |also| also(tx, id))
                })
                .map_err(io)?;
        }
        if let Some(reserved) = reserve {
            inner.terminals_reserved = reserved;
        }
        inner.persisted.next_terminal = id + 1;
        Ok(id)
    }

    /// Gives back the terminal ids reserved and not given (a clean stop): the
    /// next run goes on from the next id, not past the block.
    pub(crate) fn release_terminal_ids(&self) {
        let mut inner = self.lock();
        let next = inner.persisted.next_terminal;
        if inner.terminals_reserved <= next {
            return;
        }
        match self.db.write(|tx| tx.set_counter(NEXT_TERMINAL, next)) {
            Ok(()) => inner.terminals_reserved = next,
            Err(e) => tracing::warn!("cannot give back the terminal ids reserved: {e}"),
        }
    }

    fn bump(&self, inner: &mut Inner) -> u64 {
        inner.rev += 1;
        if inner.rev >= inner.persisted.rev_reserved {
            let reserved = inner.rev + REV_RESERVATION;
            match self.db.write(|tx| tx.set_counter(REV_RESERVED, reserved)) {
                Ok(()) => inner.persisted.rev_reserved = reserved,
                Err(e) => tracing::error!("cannot persist the rev reservation: {e}"),
            }
        }
        inner.rev
    }

    /// Adds a new agent and returns its record. An agent that waited in the
    /// queue ([`crate::queue`]) is replaced by its started self: its waiters
    /// (its watch) carry on with the new record.
    pub(crate) fn insert(
        &self,
        mut record: AgentRecord,
        terminal: Arc<dyn Terminal>,
        profile: Arc<Profile>,
        token_file: Option<PathBuf>,
    ) -> AgentRecord {
        let mut inner = self.lock();
        let rev = self.bump(&mut inner);
        record.rev = rev;
        // Sampled anew (a record taken back from the last run kept its last).
        record.usage = None;
        let id = record.terminal;
        let waited = inner.agents.remove(&id);
        // Taken back after a restart: its user's waiver holds.
        let budget_waived = inner
            .persisted
            .terminals
            .get(&id)
            .is_some_and(|kept| kept.budget_waived);
        if let Some(waited) = &waited {
            inner.changes.remove(&waited.record.rev);
        }
        inner.changes.insert(rev, Change::Agent(id));
        self.keep(&mut inner, &record, token_file.as_ref());
        let json = RecordJson::of(&record);
        inner.remember(rev, &record.environment, StreamLine::Agent(json.clone()));
        let watch = match waited {
            Some(waited) => {
                waited.watch.send_replace(record.clone());
                waited.watch
            }
            None => watch::channel(record.clone()).0,
        };
        inner.agents.insert(
            id,
            Entry {
                json,
                watch,
                record: record.clone(),
                terminal,
                profile,
                last_activity: Instant::now(),
                announces_state: false,
                hook_heard: false,
                prompt_pending: false,
                first_turn_pending: false,
                screen_question: None,
                pending_message: None,
                reported_ahead: None,
                turn_end_unreported: false,
                dialog_seen: false,
                permission_asks: 0,
                reports: 0,
                transcripts: Vec::new(),
                budget_waived,
                token_file,
            },
        );
        drop(inner);
        self.revs.send_replace(rev);
        record
    }

    /// Changes an agent: `change` edits the entry and says whether the record
    /// changed. A change bumps the revs and wakes the agent's waiters.
    /// Returns the record after, or `None` for an unknown terminal.
    ///
    /// `false` is taken as a hint, not trusted: a record edited anyway (a
    /// closure that set a field, then found nothing else to change) is a
    /// change like any other, so its JSON, its watchers and the revs never
    /// fall behind it. The record last published (the watch's) is what it is
    /// compared with — no copy is taken per call.
    pub(crate) fn update(
        &self,
        id: u64,
        change: impl FnOnce(&mut Entry) -> bool,
    ) -> Option<AgentRecord> {
        let mut inner = self.lock();
        let entry = inner.agents.get_mut(&id)?;
        if !change(entry) && *entry.watch.borrow() == entry.record {
            return Some(entry.record.clone());
        }
        let old_rev = entry.record.rev;
        let rev = self.bump(&mut inner);
        inner.changes.remove(&old_rev);
        inner.changes.insert(rev, Change::Agent(id));
        let entry = inner.agents.get_mut(&id)?;
        entry.record.rev = rev;
        entry.json = RecordJson::of(&entry.record);
        let line = StreamLine::Agent(entry.json.clone());
        let record = entry.record.clone();
        entry.watch.send_replace(record.clone());
        inner.remember(rev, &record.environment, line);
        self.keep(&mut inner, &record, None);
        drop(inner);
        self.revs.send_replace(rev);
        Some(record)
    }

    /// Removes a terminal's record (after Close); subscribers see `Removed`.
    pub(crate) fn remove(&self, id: u64) -> Option<Entry> {
        let mut inner = self.lock();
        let entry = inner.agents.remove(&id)?;
        if inner.persisted.terminals.remove(&id).is_some()
            && let Err(e) = self
                .db
                .write(|tx| tx.remove(Kind::Terminal, &id.to_string()))
        {
            tracing::error!(terminal = id, "cannot forget the terminal's record: {e}");
        }
        let rev = self.bump(&mut inner);
        inner.changes.remove(&entry.record.rev);
        inner.changes.insert(
            rev,
            Change::Removed {
                terminal: id,
                environment: entry.record.environment.clone(),
            },
        );
        let removed = StreamMessage::Removed(RemovedInfo { terminal: id, rev });
        inner.remember(rev, &entry.record.environment, StreamLine::Message(removed));
        inner.tombstones += 1;
        while inner.tombstones > MAX_TOMBSTONES {
            let oldest = inner
                .changes
                .iter()
                .find(|(_, c)| matches!(c, Change::Removed { .. }))
                .map(|(rev, _)| *rev);
            let Some(oldest) = oldest else { break };
            inner.changes.remove(&oldest);
            inner.tombstones -= 1;
            inner.resume_floor = oldest;
        }
        drop(inner);
        self.revs.send_replace(rev);
        Some(entry)
    }

    /// Reads an entry.
    pub(crate) fn with<T>(&self, id: u64, read: impl FnOnce(&Entry) -> T) -> Option<T> {
        self.lock().agents.get(&id).map(read)
    }

    /// An agent's record.
    pub(crate) fn record(&self, id: u64) -> Option<AgentRecord> {
        self.with(id, |e| e.record.clone())
    }

    /// The agents, by terminal id, of one environment or all.
    pub(crate) fn list(&self, environment: Option<&str>) -> Vec<AgentRecord> {
        self.lock()
            .agents
            .values()
            .filter(|e| environment.is_none_or(|env| e.record.environment == env))
            .map(|e| e.record.clone())
            .collect()
    }

    /// List's answer: spliced from the records' JSON under the lock (no copy
    /// of them is taken), and for every agent kept whole until the rev moves —
    /// List after List while nothing changes answers the same bytes.
    pub(crate) fn list_answer(&self, environment: Option<&str>) -> EncodedAnswer {
        let mut inner = self.lock();
        let Some(env) = environment else {
            if let Some((rev, answer)) = &inner.list_answer
                && *rev == inner.rev
            {
                return answer.clone();
            }
            let answer = EncodedAnswer::agents(inner.agents.values().map(|e| &e.json));
            inner.list_answer = Some((inner.rev, answer.clone()));
            return answer;
        };
        EncodedAnswer::agents(
            inner
                .agents
                .values()
                .filter(|e| e.record.environment == env)
                .map(|e| &e.json),
        )
    }

    /// An agent's JSON now.
    pub(crate) fn json(&self, id: u64) -> Option<RecordJson> {
        self.with(id, |e| e.json.clone())
    }

    /// The token files of the hosted terminals.
    pub(crate) fn token_files(&self) -> Vec<PathBuf> {
        self.lock()
            .agents
            .values()
            .filter_map(|e| e.token_file.clone())
            .collect()
    }

    /// Every entry's terminal, for shutdown (not those still queued: no
    /// program runs there).
    pub(crate) fn terminals(&self) -> Vec<Arc<dyn Terminal>> {
        self.lock()
            .agents
            .values()
            .filter(|e| e.record.state != AgentState::Queued)
            .map(|e| e.terminal.clone())
            .collect()
    }

    /// A watch on an agent's record.
    pub(crate) fn watch(&self, id: u64) -> Option<watch::Receiver<AgentRecord>> {
        self.with(id, |e| e.watch.subscribe())
    }

    /// How many agents there are.
    pub(crate) fn count(&self) -> usize {
        self.lock().agents.len()
    }

    /// How many terminals have not exited, and how many are working or
    /// starting (what `[limits]` counts; those still queued are not), under
    /// the lock, no record copied.
    pub(crate) fn live_and_working(&self) -> (usize, usize) {
        let inner = self.lock();
        let live = inner
            .agents
            .values()
            .filter(|e| !matches!(e.record.state, AgentState::Exited | AgentState::Queued));
        live.fold((0, 0), |(live, working), e| {
            let busy = matches!(e.record.state, AgentState::Working | AgentState::Starting);
            (live + 1, working + usize::from(busy))
        })
    }

    /// Whether the app hosts this terminal (in this environment) and its
    /// program was started. One still queued is on record, but no program
    /// has its token yet: a request with it comes from the program the queue
    /// is starting this instant, and must wait for its record (a report
    /// taken into the queued record was lost when the start replaced it).
    pub(crate) fn knows(&self, terminal: &TerminalRef) -> bool {
        self.with(terminal.terminal, |e| {
            e.record.environment == terminal.environment && e.record.state != AgentState::Queued
        })
        .unwrap_or(false)
    }

    /// The global rev now.
    pub(crate) fn rev(&self) -> u64 {
        self.lock().rev
    }

    /// Wakes on every change of the global rev.
    pub(crate) fn revs(&self) -> watch::Receiver<u64> {
        self.revs.subscribe()
    }
}

/// Sets a record's state; says whether anything changed.
///
/// The message describes the state it came with: a new state takes the new
/// message, and `None` clears the old one (a turn that starts has not said
/// anything yet); within the same state, `None` keeps the message there is.
pub(crate) fn set_state(
    record: &mut AgentRecord,
    state: AgentState,
    source: StateSource,
    message: Option<String>,
) -> bool {
    // Stopped at its cost limit: held until the limit is raised (Budget),
    // the user types to it, or it exits (crate::budget).
    let held = record.state == AgentState::Asking && record.state_source == StateSource::Budget;
    if held
        && !matches!(
            source,
            StateSource::Input | StateSource::Process | StateSource::Budget
        )
    {
        return false;
    }
    let mut changed = false;
    let new_state = record.state != state;
    if new_state || record.state_source != source {
        if new_state {
            record.state_since = now_rfc3339();
        }
        record.state = state;
        record.state_source = source;
        changed = true;
    }
    match message {
        Some(message) if record.message.as_deref() != Some(message.as_str()) => {
            record.message = Some(message);
            changed = true;
        }
        None if new_state && record.message.is_some() => {
            record.message = None;
            changed = true;
        }
        _ => {}
    }
    changed
}

mod changes;
mod kept;
mod sampled;
mod spend;
mod usage;

pub(crate) use kept::Keeping;

#[cfg(test)]
mod tests;
