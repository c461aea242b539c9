//! The terminals kept in the state file: every terminal of this machine
//! (with a restart-safe host (tmux) the next app takes them back; with the
//! PTY host it shows them `exited`, lost with the app that died), those on
//! SSH hosts with a restart-safe host, and those on SSH hosts that live in
//! tmux there: their records written through before the program starts and at
//! each change worth a write, and forgotten when they go.

use std::path::PathBuf;

use krad_bus::protocol::{AgentRecord, AgentState, Tokens};
use krad_store::Kind;

use super::{Inner, Store};
use crate::records::TerminalEntry;

/// Which terminals' records the state file keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keeping {
    /// This machine's terminals (the PTY host: after a crash they are shown
    /// lost, never forgotten), and those on hosts that live in tmux there.
    Local,
    /// Every terminal (a restart-safe host takes them back).
    All,
}

impl Store {
    /// Keeps terminals' records in the state file from now on, as `keeping`
    /// says, with `endpoint`, the bus endpoint new terminals are given.
    pub(crate) fn keep_terminals(&self, endpoint: &str, keeping: Keeping) {
        let mut inner = self.lock();
        inner.keep_terminals = Some(endpoint.to_owned());
        inner.keeping = keeping;
    }

    /// Stops keeping this machine's terminals and forgets their kept records
    /// (a clean stop closed them all, as Close would have): an exit seen
    /// after this is not written back.
    pub(crate) fn forget_local_kept(&self) {
        let mut inner = self.lock();
        if inner.keeping == Keeping::Local {
            inner.keep_terminals = None;
        }
        let ids: Vec<u64> = inner
            .persisted
            .terminals
            .values()
            .filter(|entry| entry.record.host.is_none())
            .map(|entry| entry.record.terminal)
            .collect();
        drop(inner);
        for id in ids {
            self.forget_kept(id);
        }
    }

    /// Keeps terminal `id`'s record in the state file whatever the host (see
    /// [`crate::remote_tmux`]); call before its record is first kept.
    pub(crate) fn keep_terminal(&self, id: u64) {
        self.lock().kept_anyway.insert(id);
    }

    /// The terminals kept in the state file (by a run with a restart-safe host).
    pub(crate) fn kept_terminals(&self) -> Vec<TerminalEntry> {
        self.lock().persisted.terminals.values().cloned().collect()
    }

    /// Keeps a terminal's record (its pid not yet known) before its program
    /// starts, when terminals are kept: a crash right after the start then
    /// leaves a terminal the next app takes back, not one it ends.
    pub(crate) fn keep_before_start(&self, record: &AgentRecord, token_file: Option<&PathBuf>) {
        let mut inner = self.lock();
        self.keep(&mut inner, record, token_file);
    }

    /// Forgets a kept record whose program never started.
    pub(crate) fn forget_kept(&self, id: u64) {
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
        let anyway = inner.kept_anyway.contains(&record.terminal);
        let by_policy = match inner.keeping {
            Keeping::All => inner.keep_terminals.clone(),
            Keeping::Local => inner
                .keep_terminals
                .clone()
                .filter(|_| record.host.is_none()),
        };
        let Some(endpoint) = by_policy.or_else(|| anyway.then(String::new)) else {
            return;
        };
        let id = record.terminal;
        // Its user's waiver of its cost limit, once it is on record.
        let waived = inner.agents.get(&id).map(|e| e.budget_waived);
        let worth_a_write = match inner.persisted.terminals.get_mut(&id) {
            Some(kept) => {
                let was = &kept.record;
                let changed = was.state != record.state
                    || waived.is_some_and(|w| w != kept.budget_waived)
                    || was.state_source != record.state_source
                    || was.message != record.message
                    || was.exit_code != record.exit_code
                    || was.signal != record.signal
                    || was.pid != record.pid;
                kept.record = record.clone();
                if let Some(waived) = waived {
                    kept.budget_waived = waived;
                }
                changed
            }
            None => {
                inner.persisted.terminals.insert(
                    id,
                    TerminalEntry {
                        record: record.clone(),
                        token_file: token_file.cloned(),
                        endpoint: record.host.is_none().then_some(endpoint),
                        budget_waived: waived.unwrap_or(false),
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

    /// Writes the kept terminals' tokens through to the state file where they
    /// changed (one write for all): after a restart no agent's cost, nor any
    /// total made of them, is lower than the last one read.
    pub(super) fn keep_spend(&self, tokens: &[(u64, Tokens)]) {
        let mut inner = self.lock();
        let changed: Vec<(u64, TerminalEntry)> = tokens
            .iter()
            .filter_map(|(id, tokens)| {
                let kept = inner.persisted.terminals.get_mut(id)?;
                if kept.record.tokens.as_ref() == Some(tokens) {
                    return None;
                }
                kept.record.tokens = Some(tokens.clone());
                Some((*id, kept.clone()))
            })
            .collect();
        if changed.is_empty() {
            return;
        }
        let written = self.db.write(|tx| {
            for (id, kept) in &changed {
                tx.put(Kind::Terminal, &id.to_string(), kept)?;
            }
            Ok(())
        });
        if let Err(e) = written {
            tracing::error!("cannot keep the terminals' costs: {e}");
        }
    }
}
