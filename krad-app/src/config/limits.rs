//! `[limits]`: how many terminals may live and work at once, and the memory
//! they may take — the values only; [`crate::limits`] applies them. A leaf.

use serde::Deserialize;

/// `[limits]` in the config; each limit off unless set.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// At most this many live (not exited) terminals.
    pub max_terminals: Option<usize>,
    /// At most this many agents working or starting at once.
    pub max_working: Option<usize>,
    /// No new terminal while the machine's available memory is below this.
    pub min_free_memory_mib: Option<u64>,
    /// Each terminal on this machine in a cgroup v2 whose `memory.max` is this.
    pub memory_max_mib: Option<u64>,
}

impl LimitsConfig {
    /// Checks what serde cannot: a limit of 0 would refuse everything.
    pub fn validate(&self) -> Result<(), String> {
        if self.memory_max_mib == Some(0) {
            return Err(
                "[limits]: memory_max_mib must be at least 1 (leave it out for no limit)"
                    .to_owned(),
            );
        }
        if self.max_terminals == Some(0) || self.max_working == Some(0) {
            return Err(
                "[limits]: max_terminals and max_working must be at least 1 (leave one out for no limit)"
                    .to_owned(),
            );
        }
        Ok(())
    }
}
