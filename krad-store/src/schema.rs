//! The store's tables, and bringing a file up to this build's schema.
//!
//! `PRAGMA user_version` holds the schema version: 0 is a new file, which gets
//! every table; a version above [`SCHEMA_VERSION`] is refused (a newer krad
//! wrote it). A later schema adds a step here, run in one transaction.

use std::path::Path;

use rusqlite::Connection;

use crate::error::StoreError;

/// The schema this build writes.
pub const SCHEMA_VERSION: i64 = 1;

const VERSION_1: &str = "
    CREATE TABLE meta (
        name  TEXT PRIMARY KEY,
        value INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE records (
        kind  TEXT NOT NULL,
        key   TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (kind, key)
    ) WITHOUT ROWID;
    CREATE TABLE answers (
        seq         INTEGER PRIMARY KEY AUTOINCREMENT,
        caller      TEXT NOT NULL,
        id          TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        answer      TEXT NOT NULL,
        UNIQUE (caller, id)
    );
    CREATE INDEX answers_by_caller ON answers (caller, seq);
    PRAGMA user_version = 1;
";

/// Creates the tables of a new file; refuses a newer one.
pub(crate) fn prepare(connection: &Connection, path: &Path) -> Result<(), StoreError> {
    let version: i64 = connection.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    match version {
        0 => {
            connection.execute_batch(&format!("BEGIN IMMEDIATE; {VERSION_1} COMMIT;"))?;
            Ok(())
        }
        SCHEMA_VERSION => Ok(()),
        found if found > SCHEMA_VERSION => Err(StoreError::Newer {
            path: path.to_path_buf(),
            found,
            known: SCHEMA_VERSION,
        }),
        found => Err(StoreError::Damaged {
            path: path.to_path_buf(),
            reason: format!("unknown schema version {found}"),
        }),
    }
}
