//! Why the store cannot be used: the one error type of the crate. Imports
//! nothing of the crate.

use std::path::PathBuf;

/// Why the store cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The file is not a sound database.
    #[error(
        "{} is damaged ({reason}); nothing was changed. Move it aside to start with no records \
         (the app keeps no copy), or put back a copy of it",
        path.display()
    )]
    Damaged {
        /// The store's file.
        path: PathBuf,
        /// What SQLite said.
        reason: String,
    },
    /// The file was written by a newer krad.
    #[error(
        "{} was written by a newer krad (store schema {found}; this krad knows up to {known}); \
         run that krad, or move the file aside",
        path.display()
    )]
    Newer {
        /// The store's file.
        path: PathBuf,
        /// Its schema version.
        found: i64,
        /// The newest this build knows.
        known: i64,
    },
    /// A stored value does not read as the type asked for.
    #[error("the stored {kind} {key:?} cannot be read ({reason})")]
    Unreadable {
        /// Its kind.
        kind: &'static str,
        /// Its key.
        key: String,
        /// serde's message.
        reason: String,
    },
    /// The file could not be created.
    #[error("cannot create {}: {source}", path.display())]
    Create {
        /// The store's file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// SQLite failed (disk full, I/O error, …).
    #[error("the app's store failed: {0}")]
    Sql(#[from] rusqlite::Error),
    /// A value could not be written as JSON.
    #[error("a value could not be stored: {0}")]
    Encode(#[from] serde_json::Error),
}
