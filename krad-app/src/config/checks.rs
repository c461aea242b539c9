//! `[checks]`: the commands run in every variant's worktree to score it —
//! the values only; [`crate::checks`] runs them. A leaf.
//!
//! ```toml
//! [checks]
//! parallel = 2                  # at most this many at once, app-wide (default: half the cores)
//! test = "cargo test"           # a name and a shell command (10 min, gates a pick)
//! lint = { command = "cargo clippy -- -D warnings", timeout_secs = 300, gates = false }
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

/// A check's time limit when the config gives none.
const DEFAULT_TIMEOUT_SECS: u64 = 600;

/// The longest time limit a check may have (a day).
const MAX_TIMEOUT_SECS: u64 = 86_400;

/// `[checks]` in the config: none by default.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
pub struct ChecksConfig {
    /// At most this many checks run at once across the app (default: half
    /// the machine's cores, at least 1).
    #[serde(default)]
    pub parallel: Option<usize>,
    /// The checks, by name.
    #[serde(flatten)]
    pub commands: BTreeMap<String, CheckEntry>,
}

/// One check as the config writes it: a command alone, or a table.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum CheckEntry {
    /// `test = "cargo test"`.
    Command(String),
    /// `lint = { command = "…", timeout_secs = 300, gates = false }`.
    Table(CheckTable),
}

/// A check's table.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct CheckTable {
    /// The shell command (`sh -c`), run in the variant's worktree.
    pub command: String,
    /// Killed (outcome `timed_out`) after this long (default 600).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// Whether a pick by rule needs it passed (default true).
    #[serde(default)]
    pub gates: Option<bool>,
}

/// One check, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckSpec {
    /// Its name.
    pub name: String,
    /// The shell command.
    pub command: String,
    /// Its time limit.
    pub timeout: Duration,
    /// Whether a pick by rule needs it passed.
    pub gates: bool,
}

impl ChecksConfig {
    /// The checks, by name, with their defaults filled in.
    pub fn specs(&self) -> Vec<CheckSpec> {
        self.commands
            .iter()
            .map(|(name, entry)| {
                let (command, timeout, gates) = match entry {
                    CheckEntry::Command(command) => (command.clone(), None, None),
                    CheckEntry::Table(table) => {
                        (table.command.clone(), table.timeout_secs, table.gates)
                    }
                };
                CheckSpec {
                    name: name.clone(),
                    command,
                    timeout: Duration::from_secs(timeout.unwrap_or(DEFAULT_TIMEOUT_SECS)),
                    gates: gates.unwrap_or(true),
                }
            })
            .collect()
    }

    /// How many checks may run at once: `parallel`, else half the cores
    /// (at least 1).
    pub fn parallel(&self) -> usize {
        self.parallel.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get() / 2)
                .unwrap_or(1)
                .max(1)
        })
    }

    /// Checks what serde cannot: names, commands and limits that make sense.
    pub fn validate(&self) -> Result<(), String> {
        if self.parallel == Some(0) {
            return Err("[checks]: parallel must be at least 1".to_owned());
        }
        for spec in self.specs() {
            let name = &spec.name;
            let well_named = !name.is_empty()
                && name.len() <= 64
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            if !well_named {
                return Err(format!(
                    "[checks]: check {name:?} needs a name of 1–64 letters, digits, '-' or '_'"
                ));
            }
            if spec.command.trim().is_empty() {
                return Err(format!("[checks]: check {name:?} needs a command"));
            }
            let secs = spec.timeout.as_secs();
            if secs == 0 || secs > MAX_TIMEOUT_SECS {
                return Err(format!(
                    "[checks]: check {name:?}: timeout_secs must be 1 to {MAX_TIMEOUT_SECS}"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct File {
        checks: ChecksConfig,
    }

    fn parse(text: &str) -> Result<ChecksConfig, String> {
        let file: File = toml::from_str(text).map_err(|e| e.to_string())?;
        file.checks.validate()?;
        Ok(file.checks)
    }

    #[test]
    fn a_command_alone_or_a_table() {
        let checks = parse(
            "[checks]\nparallel = 2\ntest = \"cargo test\"\n\
             lint = { command = \"cargo clippy\", timeout_secs = 30, gates = false }\n",
        )
        .unwrap();
        assert_eq!(checks.parallel(), 2);
        let specs = checks.specs();
        assert_eq!(specs.len(), 2);
        assert_eq!(specs[0].name, "lint");
        assert_eq!(specs[0].timeout, Duration::from_secs(30));
        assert!(!specs[0].gates);
        assert_eq!(specs[1].command, "cargo test");
        assert_eq!(specs[1].timeout, Duration::from_secs(DEFAULT_TIMEOUT_SECS));
        assert!(specs[1].gates);
    }

    #[test]
    fn nonsense_is_refused() {
        assert!(parse("[checks]\nparallel = 0\n").is_err());
        assert!(parse("[checks]\ntest = \"\"\n").is_err());
        assert!(parse("[checks]\ntest = { command = \"x\", timeout_secs = 0 }\n").is_err());
        assert!(parse("[checks]\n\"a b\" = \"x\"\n").is_err());
        assert!(parse("[checks]\ntest = { command = \"x\", typo = 1 }\n").is_err());
        assert!(ChecksConfig::default().parallel() >= 1);
    }
}
