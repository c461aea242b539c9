//! The app's transactional store: everything it must not forget across a crash
//! — counters, records (environments, groups, kept terminals, intents), and the
//! answers kept for request ids — in one SQLite file, changed only inside
//! transactions.
//!
//! * **One file, one writer.** [`Db`] holds one connection behind a mutex; a
//!   [`Db::write`] is one `BEGIN IMMEDIATE … COMMIT`, so a state change and the
//!   request id that caused it land together or not at all.
//! * **Crash safety.** Write-ahead log, `synchronous = NORMAL`: a commit is one
//!   append to the WAL and survives the app's death (SIGKILL, panic) at any
//!   instant; a power cut may lose the last commits but never tears one.
//! * **No fsync on a commit.** The WAL is copied back into the file (and
//!   synced) by a thread of the store's own every [`CHECKPOINT_EVERY`], not by
//!   whichever commit crosses SQLite's threshold.
//! * **Never silently emptied.** A file that is not a sound database, or one
//!   written by a newer schema, is refused with [`StoreError`] saying what to
//!   do; nothing is replaced.
//!
//! Values are JSON text: the app's types change more often than this schema,
//! and serde's defaults carry old records forward.

mod error;
mod schema;

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use serde::Serialize;
use serde::de::DeserializeOwned;

pub use error::StoreError;
pub use schema::SCHEMA_VERSION;

/// What a record is; each kind is its own key space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A worktree environment, by name.
    Environment,
    /// A variant group, by name.
    Group,
    /// A terminal of a restart-safe host, by id.
    Terminal,
    /// A mutation under way, by its key (see the app's `intents`).
    Intent,
    /// A decided ask, by terminal and ask.
    DecidedAsk,
    /// An environment's block of TCP ports, by environment name.
    PortBlock,
    /// Work waiting in the app's queue for room under its limits, by its
    /// place in line (a zero-padded sequence number).
    Queued,
    /// A check's latest run in a variant, by environment and check
    /// (`login-1/test`; see the app's `checks`).
    Check,
}

impl Kind {
    /// Its name in the store.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Environment => "environment",
            Kind::Group => "group",
            Kind::Terminal => "terminal",
            Kind::Intent => "intent",
            Kind::DecidedAsk => "decided_ask",
            Kind::PortBlock => "port_block",
            Kind::Queued => "queued",
            Kind::Check => "check",
        }
    }
}

/// An answer kept for a caller's request id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptAnswer {
    /// Who asked (`client`, `terminal:main/3`, …).
    pub caller: String,
    /// Their request id.
    pub id: String,
    /// A hash of the request, to tell a repeat from a reuse.
    pub fingerprint: String,
    /// The answer, as JSON text.
    pub answer: String,
}

/// How often the checkpoint thread copies the WAL back into the file.
pub const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// The store: one SQLite file.
pub struct Db {
    path: PathBuf,
    connection: Mutex<Connection>,
    /// The checkpoint thread, stopped and joined when the store is dropped —
    /// before its connection closes, so that the last close folds the WAL
    /// back into the file.
    checkpoints: Option<Checkpoints>,
}

/// The checkpoint thread: dropping the sender stops it.
type Checkpoints = (mpsc::Sender<()>, std::thread::JoinHandle<()>);

impl Drop for Db {
    fn drop(&mut self) {
        if let Some((stop, thread)) = self.checkpoints.take() {
            drop(stop);
            let _ = thread.join();
        }
    }
}

impl Db {
    /// Opens (or creates) the store at `path`, refusing a damaged or newer one.
    pub fn open(path: &Path) -> Result<Db, StoreError> {
        let damaged = |e: rusqlite::Error| StoreError::Damaged {
            path: path.to_path_buf(),
            reason: e.to_string(),
        };
        // Only its user reads it (SQLite gives its log files the same mode).
        if !path.exists() {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                .map_err(|source| StoreError::Create {
                    path: path.to_path_buf(),
                    source,
                })?;
        }
        let connection = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        connection.busy_timeout(Duration::from_secs(5))?;
        // The first read of a file that is not a database fails here.
        let mode: String = connection
            .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
            .map_err(damaged)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Damaged {
                path: path.to_path_buf(),
                reason: format!("its journal cannot be a write-ahead log (mode {mode})"),
            });
        }
        connection
            .execute_batch(
                "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = OFF; \
                 PRAGMA wal_autocheckpoint = 0;",
            )
            .map_err(damaged)?;
        let check: String = connection
            .query_row("PRAGMA quick_check", [], |row| row.get(0))
            .map_err(damaged)?;
        if check != "ok" {
            return Err(StoreError::Damaged {
                path: path.to_path_buf(),
                reason: check,
            });
        }
        schema::prepare(&connection, path)?;
        let checkpoints = checkpoints(path)?;
        if checkpoints.is_none() {
            // Without the thread, SQLite's own threshold keeps the WAL bounded.
            connection.execute_batch("PRAGMA wal_autocheckpoint = 1000;")?;
        }
        Ok(Db {
            path: path.to_path_buf(),
            connection: Mutex::new(connection),
            checkpoints,
        })
    }

    /// The store's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic inside a transaction rolled it back (the transaction's drop).
        self.connection
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `change` in one transaction: all of it is committed, or (on an
    /// error) none of it.
    pub fn write<T>(
        &self,
        change: impl FnOnce(&Tx<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut connection = self.lock();
        let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let out = change(&Tx { tx: &tx })?;
        tx.commit()?;
        Ok(out)
    }

    /// Reads in one consistent snapshot.
    pub fn read<T>(
        &self,
        read: impl FnOnce(&Tx<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut connection = self.lock();
        let tx = connection.transaction()?;
        read(&Tx { tx: &tx })
    }
}

/// A transaction's operations.
pub struct Tx<'c> {
    tx: &'c rusqlite::Transaction<'c>,
}

impl Tx<'_> {
    /// A counter, or `None` if it was never set.
    pub fn counter(&self, name: &str) -> Result<Option<u64>, StoreError> {
        let value: Option<i64> = self
            .tx
            .prepare_cached("SELECT value FROM meta WHERE name = ?1")?
            .query_row([name], |row| row.get(0))
            .optional()?;
        Ok(value.map(|v| u64::try_from(v).unwrap_or(0)))
    }

    /// Sets a counter.
    pub fn set_counter(&self, name: &str, value: u64) -> Result<(), StoreError> {
        let value = i64::try_from(value).unwrap_or(i64::MAX);
        self.tx
            .prepare_cached(
                "INSERT INTO meta (name, value) VALUES (?1, ?2)
             ON CONFLICT (name) DO UPDATE SET value = excluded.value",
            )?
            .execute(params![name, value])?;
        Ok(())
    }

    /// Adds or replaces a record.
    pub fn put<V: Serialize + ?Sized>(
        &self,
        kind: Kind,
        key: &str,
        value: &V,
    ) -> Result<(), StoreError> {
        let text = serde_json::to_string(value)?;
        self.tx
            .prepare_cached(
                "INSERT INTO records (kind, key, value) VALUES (?1, ?2, ?3)
             ON CONFLICT (kind, key) DO UPDATE SET value = excluded.value",
            )?
            .execute(params![kind.name(), key, text])?;
        Ok(())
    }

    /// Removes a record; says whether there was one.
    pub fn remove(&self, kind: Kind, key: &str) -> Result<bool, StoreError> {
        let removed = self
            .tx
            .prepare_cached("DELETE FROM records WHERE kind = ?1 AND key = ?2")?
            .execute(params![kind.name(), key])?;
        Ok(removed > 0)
    }

    /// One record.
    pub fn get<V: DeserializeOwned>(&self, kind: Kind, key: &str) -> Result<Option<V>, StoreError> {
        let text: Option<String> = self
            .tx
            .prepare_cached("SELECT value FROM records WHERE kind = ?1 AND key = ?2")?
            .query_row(params![kind.name(), key], |row| row.get(0))
            .optional()?;
        text.map(|text| decode(kind, key, &text)).transpose()
    }

    /// Every record of a kind, with its key.
    pub fn all<V: DeserializeOwned>(&self, kind: Kind) -> Result<Vec<(String, V)>, StoreError> {
        let mut statement = self
            .tx
            .prepare("SELECT key, value FROM records WHERE kind = ?1 ORDER BY key")?;
        let rows = statement.query_map([kind.name()], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (key, text) = row?;
            let value = decode(kind, &key, &text)?;
            out.push((key, value));
        }
        Ok(out)
    }

    /// Keeps an answer, and forgets the caller's oldest beyond `per_caller`.
    pub fn keep_answer(&self, kept: &KeptAnswer, per_caller: usize) -> Result<(), StoreError> {
        self.tx
            .prepare_cached(
                "INSERT INTO answers (caller, id, fingerprint, answer) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (caller, id) DO UPDATE
             SET fingerprint = excluded.fingerprint, answer = excluded.answer",
            )?
            .execute(params![kept.caller, kept.id, kept.fingerprint, kept.answer])?;
        let limit = i64::try_from(per_caller).unwrap_or(i64::MAX);
        // Everything at or below the caller's (per_caller + 1)-th newest; one
        // walk down the (caller, seq) index.
        self.tx
            .prepare_cached(
                "DELETE FROM answers WHERE caller = ?1 AND seq <=
             (SELECT seq FROM answers WHERE caller = ?1 ORDER BY seq DESC LIMIT 1 OFFSET ?2)",
            )?
            .execute(params![kept.caller, limit])?;
        Ok(())
    }

    /// Every kept answer, oldest first.
    pub fn kept_answers(&self) -> Result<Vec<KeptAnswer>, StoreError> {
        let mut statement = self
            .tx
            .prepare("SELECT caller, id, fingerprint, answer FROM answers ORDER BY seq")?;
        let rows = statement.query_map([], |row| {
            Ok(KeptAnswer {
                caller: row.get(0)?,
                id: row.get(1)?,
                fingerprint: row.get(2)?,
                answer: row.get(3)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Forgets every answer kept for a caller.
    pub fn forget_caller(&self, caller: &str) -> Result<(), StoreError> {
        self.tx
            .prepare_cached("DELETE FROM answers WHERE caller = ?1")?
            .execute([caller])?;
        Ok(())
    }
}

/// Starts the checkpoint thread, with its own connection; it ends when the
/// returned sender is dropped. `None` when no thread could start.
fn checkpoints(path: &Path) -> Result<Option<Checkpoints>, StoreError> {
    let connection = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    connection.busy_timeout(Duration::from_secs(5))?;
    let (stop, stopped) = mpsc::channel::<()>();
    let spawned = std::thread::Builder::new()
        .name("krad-store-checkpoint".into())
        .spawn(move || {
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(CHECKPOINT_EVERY)
            {
                // PASSIVE: copies what no reader still needs, never waits on a writer.
                if let Err(e) =
                    connection.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
                {
                    tracing::warn!("the store's checkpoint failed: {e}");
                }
            }
        });
    match spawned {
        Ok(thread) => Ok(Some((stop, thread))),
        Err(e) => {
            tracing::warn!("cannot start the store's checkpoint thread: {e}");
            Ok(None)
        }
    }
}

fn decode<V: DeserializeOwned>(kind: Kind, key: &str, text: &str) -> Result<V, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Unreadable {
        kind: kind.name(),
        key: key.to_owned(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn answer(caller: &str, id: &str) -> KeptAnswer {
        KeptAnswer {
            caller: caller.into(),
            id: id.into(),
            fingerprint: "f".into(),
            answer: format!("{{\"Ok\":\"{id}\"}}"),
        }
    }

    #[test]
    fn a_transaction_lands_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("state.db")).unwrap();
        db.write(|tx| {
            tx.set_counter("next", 7)?;
            tx.put(Kind::Group, "g", &vec![1, 2])
        })
        .unwrap();
        let failed: Result<(), StoreError> = db.write(|tx| {
            tx.set_counter("next", 8)?;
            tx.remove(Kind::Group, "g")?;
            Err(StoreError::Encode(serde::de::Error::custom("stop")))
        });
        assert!(failed.is_err());
        drop(db);
        let db = Db::open(&dir.path().join("state.db")).unwrap();
        let (next, group) = db
            .read(|tx| Ok((tx.counter("next")?, tx.get::<Vec<u32>>(Kind::Group, "g")?)))
            .unwrap();
        assert_eq!((next, group), (Some(7), Some(vec![1, 2])));
    }

    #[test]
    fn answers_are_kept_per_caller_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("state.db")).unwrap();
        db.write(|tx| {
            for i in 0..5 {
                tx.keep_answer(&answer("client", &format!("r{i}")), 3)?;
            }
            tx.keep_answer(&answer("terminal:main/1", "x"), 3)
        })
        .unwrap();
        let ids: Vec<String> = db
            .read(|tx| tx.kept_answers())
            .unwrap()
            .into_iter()
            .map(|a| a.id)
            .collect();
        assert_eq!(ids, ["r2", "r3", "r4", "x"]);
        db.write(|tx| tx.forget_caller("client")).unwrap();
        assert_eq!(db.read(|tx| tx.kept_answers()).unwrap().len(), 1);
    }

    #[test]
    fn a_damaged_file_is_refused_and_left_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        std::fs::write(&path, b"this is not a database, but someone's data").unwrap();
        let error = Db::open(&path).err().unwrap().to_string();
        assert!(error.contains("is damaged"), "{error}");
        assert!(error.contains("Move it aside"), "{error}");
        assert_eq!(
            std::fs::read(&path).unwrap(),
            b"this is not a database, but someone's data"
        );
    }

    #[test]
    fn only_its_user_reads_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let db = Db::open(&path).unwrap();
        db.write(|tx| tx.set_counter("n", 1)).unwrap();
        for file in ["state.db", "state.db-wal"] {
            let mode = std::fs::metadata(dir.path().join(file))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{file}");
        }
    }

    #[test]
    fn a_newer_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        drop(Db::open(&path).unwrap());
        let connection = Connection::open(&path).unwrap();
        connection
            .execute_batch(&format!("PRAGMA user_version = {}", SCHEMA_VERSION + 1))
            .unwrap();
        drop(connection);
        let error = Db::open(&path).err().unwrap().to_string();
        assert!(error.contains("newer krad"), "{error}");
    }

    #[test]
    fn an_unreadable_value_names_its_record() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("state.db")).unwrap();
        db.write(|tx| tx.put(Kind::Environment, "e1", "text"))
            .unwrap();
        let error = db
            .read(|tx| tx.all::<u32>(Kind::Environment))
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("environment \"e1\""), "{error}");
    }
}
