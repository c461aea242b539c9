//! The app's state on disk: what must survive a restart, written atomically.
//!
//! The global `rev` never goes back: the file holds a reservation above the
//! current rev (the app writes a new one each time the rev reaches it, so it does
//! not write at every change), and a restarted app starts from the reservation.
//! Terminal ids are persisted before each terminal starts, so none is reused.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// How many revs are reserved at a time.
pub const REV_RESERVATION: u64 = 1000;

/// The contents of `state.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateFile {
    /// Every rev up to this one may have been used; start above it.
    pub rev_reserved: u64,
    /// The next terminal id to give out.
    pub next_terminal: u64,
}

/// Where state.json lives, and writing it.
#[derive(Debug, Clone)]
pub struct StatePath {
    path: PathBuf,
}

impl StatePath {
    /// `dir/state.json`.
    pub fn in_dir(dir: &Path) -> StatePath {
        StatePath {
            path: dir.join("state.json"),
        }
    }

    /// Reads the state; a missing file is a fresh start.
    pub fn load(&self) -> Result<StateFile, String> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                format!(
                    "{} is damaged ({e}); move it aside to start afresh",
                    self.path.display()
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(StateFile {
                rev_reserved: 0,
                next_terminal: 1,
            }),
            Err(e) => Err(format!("cannot read {}: {e}", self.path.display())),
        }
    }

    /// Writes the state atomically (temp file, then rename).
    pub fn save(&self, state: &StateFile) -> std::io::Result<()> {
        let temp = self.path.with_extension("json.tmp");
        let bytes = serde_json::to_vec_pretty(state).map_err(std::io::Error::other)?;
        std::fs::write(&temp, bytes)?;
        std::fs::rename(&temp, &self.path)
    }
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
        };
        path.save(&state).unwrap();
        assert_eq!(path.load().unwrap(), state);
        std::fs::write(dir.path().join("state.json"), "{").unwrap();
        assert!(path.load().unwrap_err().contains("damaged"));
    }
}
