//! The records the app keeps across restarts (environments, groups, kept
//! terminals), and `state.json`, the file an earlier krad kept them in — read
//! once, to import it into the store (see [`crate::state_db`]).
//!
//! The global `rev` never goes back: the store holds a reservation above the
//! current rev (the app writes a new one each time the rev reaches it, so it does
//! not write at every change), and a restarted app starts from the reservation.
//! Terminal ids are persisted before each terminal starts, so none is reused.
//! With a restart-safe terminal host (tmux), each terminal's record is kept too,
//! so that a restarted app takes the terminals back (see `crate::adopt`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use krad_bus::protocol::{AgentRecord, ApiError, ErrorCode, SetupInfo};
use serde::{Deserialize, Serialize};

/// How many revs are reserved at a time.
pub(crate) const REV_RESERVATION: u64 = 1000;

/// What the app keeps, as `state.json` held it (and as the store is read into).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StateFile {
    /// Every rev up to this one may have been used; start above it.
    pub rev_reserved: u64,
    /// The next terminal id to give out.
    pub next_terminal: u64,
    /// The worktree environments, by name.
    #[serde(default)]
    pub environments: BTreeMap<String, EnvironmentRecord>,
    /// The variant groups, by name.
    #[serde(default)]
    pub groups: BTreeMap<String, GroupRecord>,
    /// The terminals of a restart-safe host, by id (kept until closed).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub terminals: BTreeMap<u64, TerminalEntry>,
}

/// A terminal of a restart-safe host, as a restarted app needs it back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TerminalEntry {
    /// Its record, as of its last change of state.
    pub record: AgentRecord,
    /// The token file its program reads (a restarted app writes the new token
    /// there: the path is in the program's environment).
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// The bus endpoint in the program's environment (a restarted app listens
    /// there too, when it can).
    #[serde(default)]
    pub endpoint: Option<String>,
    /// Its user went on past its cost limit (see [`crate::budget`]): a
    /// restarted app does not stop it again.
    #[serde(default)]
    pub budget_waived: bool,
}

/// Where a worktree environment is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Phase {
    /// `git worktree add` is running (or was, when the app died).
    Creating,
    /// The setup command runs.
    SettingUp,
    /// Ready for agents.
    Ready,
    /// The setup command failed.
    SetupFailed,
}

/// A worktree environment the app created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct EnvironmentRecord {
    /// Its name.
    pub name: String,
    /// Its directory.
    pub path: PathBuf,
    /// Its branch.
    pub branch: String,
    /// The commit it was created from.
    pub base: String,
    /// The environment it was created from (PickVariant merges back into it).
    pub base_environment: String,
    /// The SSH host it lives on (none: this machine).
    #[serde(default)]
    pub host: Option<String>,
    /// Its variant group and number.
    pub group: Option<String>,
    /// Its number in the group.
    pub variant: Option<u32>,
    /// Where it is in its life.
    pub phase: Phase,
    /// The setup command's outcome.
    pub setup: Option<SetupInfo>,
    /// When it was created (RFC 3339); absent in records made before krad
    /// kept it (its age then comes from the worktree's `.git` file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
}

/// A variant group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct GroupRecord {
    /// Its name.
    pub name: String,
    /// The commit every variant started from.
    pub base: String,
    /// The environment the base came from (the default target of PickVariant).
    pub base_environment: String,
    /// The SSH host its variants live on (none: this machine).
    #[serde(default)]
    pub host: Option<String>,
    /// How many variants it has.
    pub count: u32,
    /// Its variants' environments and terminals, as they start.
    pub variants: BTreeMap<u32, VariantRecord>,
    /// The variant kept, once picked.
    pub picked: Option<u32>,
    /// What its variants may cost together (RunVariants' `max_group_cost_usd`,
    /// the config's `[budget]`, or Budget's): kept with the group, so that a
    /// restart forgets no limit.
    #[serde(default)]
    pub max_cost_usd: Option<krad_bus::protocol::Dollars>,
}

/// One variant of a group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct VariantRecord {
    /// Its environment.
    pub environment: String,
    /// Its agent's terminal, once spawned.
    pub terminal: Option<u64>,
    /// Whether its agent runs contained (RunVariants' `sandbox`, `[sandbox]
    /// profiles`): its checks run in a sandbox too, after its agent's Close
    /// as well — never outside.
    #[serde(default)]
    pub contained: bool,
}

/// Where an earlier krad's state.json lives (writing it is for tests).
#[derive(Debug, Clone)]
pub(crate) struct StatePath {
    path: PathBuf,
}

impl StatePath {
    /// `dir/state.json`.
    pub(crate) fn in_dir(dir: &Path) -> StatePath {
        StatePath {
            path: dir.join("state.json"),
        }
    }

    /// Reads the state; a missing file is a fresh start.
    pub(crate) fn load(&self) -> Result<StateFile, String> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                format!(
                    "{} is damaged ({e}); move it aside to start afresh",
                    self.path.display()
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(StateFile {
                next_terminal: 1,
                ..StateFile::default()
            }),
            Err(e) => Err(format!("cannot read {}: {e}", self.path.display())),
        }
    }

    /// Writes the state atomically and durably, 0600 (see
    /// [`krad_bus::private_file`]): the file of earlier versions, for the tests
    /// of its import.
    #[cfg(test)]
    pub(crate) fn save(&self, state: &StateFile) -> std::io::Result<()> {
        let bytes = serde_json::to_vec_pretty(state).map_err(std::io::Error::other)?;
        krad_bus::private_file::write(&self.path, &bytes)
    }
}

/// `not_found` for a terminal.
pub(crate) fn no_terminal(id: u64) -> ApiError {
    ApiError::new(ErrorCode::NotFound, format!("no terminal {id}"))
        .with_detail(serde_json::json!({ "terminal": id }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_starts_fresh() {
        let dir = tempfile::tempdir().unwrap();
        let path = StatePath::in_dir(dir.path());
        assert_eq!(path.load().unwrap().next_terminal, 1);
        let state = StateFile {
            rev_reserved: 2000,
            next_terminal: 7,
            ..StateFile::default()
        };
        path.save(&state).unwrap();
        assert_eq!(path.load().unwrap(), state);
        std::fs::write(dir.path().join("state.json"), "{").unwrap();
        assert!(path.load().unwrap_err().contains("damaged"));
    }
}
