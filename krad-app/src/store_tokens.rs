//! What the token reader ([`crate::tokens`]) reads from the store and writes
//! into it: the files each terminal's hooks named, and each one's tokens,
//! written into its record and JSON in place — without a new rev, a stream
//! line or a write to disk, as the CPU and memory samples are
//! (docs/agents.md, "What agents cost").

use std::path::PathBuf;

use krad_bus::protocol::{RecordJson, Tokens};

use super::Store;

impl Store {
    /// The terminals whose hooks named files of their model calls: id and files.
    pub fn token_targets(&self) -> Vec<(u64, Vec<PathBuf>)> {
        self.lock()
            .agents
            .values()
            .filter(|e| e.record.host.is_none() && !e.transcripts.is_empty())
            .map(|e| (e.record.terminal, e.transcripts.clone()))
            .collect()
    }

    /// Writes each terminal's tokens into its record. Waiters are not woken,
    /// and List's kept answer is spliced again at its next call.
    pub fn set_tokens(&self, tokens: impl IntoIterator<Item = (u64, Tokens)>) {
        let mut inner = self.lock();
        let mut changed = false;
        for (id, tokens) in tokens {
            let Some(entry) = inner.agents.get_mut(&id) else {
                continue;
            };
            let tokens = Some(tokens);
            if entry.record.tokens == tokens {
                continue;
            }
            entry.record.tokens = tokens.clone();
            entry.json = RecordJson::of(&entry.record);
            entry.watch.send_if_modified(|watched| {
                watched.tokens = tokens;
                false
            });
            changed = true;
        }
        if changed {
            inner.list_answer = None;
        }
    }
}
