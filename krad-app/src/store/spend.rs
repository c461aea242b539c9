//! What the spend reader ([`crate::spend`]) reads from the store and writes
//! into it: the files each terminal's hooks named, and each one's tokens,
//! written into its record and JSON in place — without a new rev or a stream
//! line, as the CPU and memory samples are (docs/agents.md, "What agents
//! cost") — and through to a kept terminal's record when they changed, so
//! that no total goes back after a restart.

use std::path::PathBuf;

use krad_bus::protocol::Tokens;

use super::Store;

impl Store {
    /// The terminals whose hooks named files of their model calls: id and files.
    pub(crate) fn spend_targets(&self) -> Vec<(u64, Vec<PathBuf>)> {
        self.lock()
            .agents
            .values()
            .filter(|e| e.record.host.is_none() && !e.transcripts.is_empty())
            .map(|e| (e.record.terminal, e.transcripts.clone()))
            .collect()
    }

    /// Writes each terminal's tokens into its record, without a new rev.
    pub(crate) fn set_spend(&self, tokens: impl IntoIterator<Item = (u64, Tokens)>) {
        let tokens: Vec<(u64, Tokens)> = tokens.into_iter().collect();
        self.write_in_place(
            tokens.iter().cloned(),
            |record| &mut record.tokens,
            |old, new| old != new,
        );
        self.keep_spend(&tokens);
    }
}
