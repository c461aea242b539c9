//! The terminals kept in the state file, for a restart-safe host (tmux) and
//! for the terminals on SSH hosts that live in tmux there: which are kept,
//! their records written through before the program starts and at each
//! change worth a write, and forgotten when they go.

use std::path::PathBuf;

use krad_bus::protocol::{AgentRecord, AgentState};
use krad_store::Kind;

use super::{Inner, Store};
use crate::records::TerminalEntry;

impl Store {
    /// Keeps every terminal's record in the state file from now on (the host is
    /// restart-safe), with `endpoint`, the bus endpoint new terminals are given.
    pub fn keep_terminals(&self, endpoint: &str) {
        self.lock().keep_terminals = Some(endpoint.to_owned());
    }

    /// Keeps terminal `id`'s record in the state file whatever the host (see
    /// [`crate::remote_tmux`]); call before its record is first kept.
    pub fn keep_terminal(&self, id: u64) {
        self.lock().kept_anyway.insert(id);
    }

    /// The terminals kept in the state file (by a run with a restart-safe host).
    pub fn kept_terminals(&self) -> Vec<TerminalEntry> {
        self.lock().persisted.terminals.values().cloned().collect()
    }

    /// Keeps a terminal's record (its pid not yet known) before its program
    /// starts, when terminals are kept: a crash right after the start then
    /// leaves a terminal the next app takes back, not one it ends.
    pub fn keep_before_start(&self, record: &AgentRecord, token_file: Option<&PathBuf>) {
        let mut inner = self.lock();
        self.keep(&mut inner, record, token_file);
    }

    /// Forgets a kept record whose program never started.
    pub fn forget_kept(&self, id: u64) {
        let mut inner = self.lock();
        if inner.persisted.terminals.remove(&id).is_some()
            && let Err(e) = self
                .db
                .write(|tx| tx.remove(Kind::Terminal, &id.to_string()))
        {
            tracing::error!(terminal = id, "cannot forget the terminal's record: {e}");
        }
    }

    /// Keeps a terminal's record in the state file, when terminals are kept. A
    /// change of the title alone waits in memory for the next write.
    pub(super) fn keep(
        &self,
        inner: &mut Inner,
        record: &AgentRecord,
        token_file: Option<&PathBuf>,
    ) {
        if record.state == AgentState::Queued {
            // No program yet: the queue keeps it ([`crate::queue`]).
            return;
        }
        let Some(endpoint) = inner.keep_terminals.clone().or_else(|| {
            inner
                .kept_anyway
                .contains(&record.terminal)
                .then(String::new)
        }) else {
            return;
        };
        let id = record.terminal;
        let worth_a_write = match inner.persisted.terminals.get_mut(&id) {
            Some(kept) => {
                let was = &kept.record;
                let changed = was.state != record.state
                    || was.state_source != record.state_source
                    || was.message != record.message
                    || was.exit_code != record.exit_code
                    || was.signal != record.signal
                    || was.pid != record.pid;
                kept.record = record.clone();
                changed
            }
            None => {
                inner.persisted.terminals.insert(
                    id,
                    TerminalEntry {
                        record: record.clone(),
                        token_file: token_file.cloned(),
                        endpoint: record.host.is_none().then_some(endpoint),
                    },
                );
                true
            }
        };
        if worth_a_write
            && let Some(kept) = inner.persisted.terminals.get(&id)
            && let Err(e) = self
                .db
                .write(|tx| tx.put(Kind::Terminal, &id.to_string(), kept))
        {
            tracing::error!(terminal = id, "cannot keep the terminal's record: {e}");
        }
    }
}
