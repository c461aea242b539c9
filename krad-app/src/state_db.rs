//! The app's store on disk, `state.db` (see [`krad_store`]): opening it,
//! importing once the JSON files an earlier krad kept (`state.json`,
//! `request-ids.json`), and keeping request ids' answers there.
//!
//! An import is all or nothing: it fills `state.db.import` and renames it to
//! `state.db` only once complete, then renames the JSON files to `*.imported`.
//! A damaged JSON file stops the start with a message, as a damaged store does;
//! nothing is ever replaced by an empty one.

use std::path::Path;
use std::sync::Arc;

use krad_bus::server::request_log::{self, Entry, KEPT_PER_CALLER, KeptAnswers, RequestLog};
use krad_store::{Db, KeptAnswer, Kind};

use crate::records::StatePath;

/// The store's file name in the state directory.
pub(crate) const FILE: &str = "state.db";
/// Counter: every rev up to it may have been used.
pub(crate) const REV_RESERVED: &str = "rev_reserved";
/// Counter: the next terminal id to give out.
pub(crate) const NEXT_TERMINAL: &str = "next_terminal";

const LEGACY_STATE: &str = "state.json";
const LEGACY_REQUEST_IDS: &str = "request-ids.json";

/// Opens the store in `state_dir`, importing an earlier krad's JSON files first.
pub(crate) fn open(state_dir: &Path) -> Result<Arc<Db>, String> {
    let path = state_dir.join(FILE);
    let legacy = [LEGACY_STATE, LEGACY_REQUEST_IDS]
        .iter()
        .any(|name| state_dir.join(name).exists());
    if !path.exists() && legacy {
        import(state_dir)?;
    }
    Db::open(&path).map(Arc::new).map_err(|e| e.to_string())
}

/// Imports `state.json` and `request-ids.json` into a new `state.db`.
fn import(state_dir: &Path) -> Result<(), String> {
    let state = StatePath::in_dir(state_dir).load()?;
    let ids_path = state_dir.join(LEGACY_REQUEST_IDS);
    let answers = match std::fs::read(&ids_path) {
        Ok(bytes) => request_log::read_legacy_file(&bytes).map_err(|e| {
            format!(
                "{} is damaged ({e}); move it aside to start without the answers it kept",
                ids_path.display()
            )
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(format!("cannot read {}: {e}", ids_path.display())),
    };
    let fresh = state_dir.join(format!("{FILE}.import"));
    for leftover in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{leftover}", fresh.display()));
    }
    let failed = |e: krad_store::StoreError| format!("cannot import the state into {FILE}: {e}");
    let db = Db::open(&fresh).map_err(failed)?;
    db.write(|tx| {
        tx.set_counter(REV_RESERVED, state.rev_reserved)?;
        tx.set_counter(NEXT_TERMINAL, state.next_terminal.max(1))?;
        for (name, record) in &state.environments {
            tx.put(Kind::Environment, name, record)?;
        }
        for (name, record) in &state.groups {
            tx.put(Kind::Group, name, record)?;
        }
        for (id, entry) in &state.terminals {
            tx.put(Kind::Terminal, &id.to_string(), entry)?;
        }
        for (caller, entry) in &answers {
            tx.keep_answer(&kept(caller, entry), KEPT_PER_CALLER)?;
        }
        Ok(())
    })
    .map_err(failed)?;
    // Closed cleanly, the log is folded into the file: one file to rename.
    drop(db);
    std::fs::rename(&fresh, state_dir.join(FILE))
        .map_err(|e| format!("cannot put the imported {FILE} in place: {e}"))?;
    for name in [LEGACY_STATE, LEGACY_REQUEST_IDS] {
        let old = state_dir.join(name);
        if old.exists()
            && let Err(e) = std::fs::rename(&old, state_dir.join(format!("{name}.imported")))
        {
            tracing::warn!("imported {name} but cannot rename it: {e}");
        }
    }
    tracing::info!(
        environments = state.environments.len(),
        groups = state.groups.len(),
        terminals = state.terminals.len(),
        answers = answers.len(),
        "imported the JSON state of an earlier krad into {FILE}"
    );
    Ok(())
}

fn kept(caller: &str, entry: &Entry) -> KeptAnswer {
    KeptAnswer {
        caller: caller.to_owned(),
        id: entry.id.clone(),
        fingerprint: entry.fingerprint.clone(),
        answer: entry.answer.to_string(),
    }
}

/// The key of the intent a request with an id records (see [`crate::intents`]).
pub(crate) fn intent_key(caller: &str, id: &str) -> String {
    format!("{caller}\n{id}")
}

/// Request ids' answers, kept in the store.
struct KeptInStore(Arc<Db>);

impl KeptAnswers for KeptInStore {
    fn settle(&self, caller: &str, entry: Option<&Entry>, id: &str) -> Result<(), String> {
        self.0
            .write(|tx| {
                if let Some(entry) = entry {
                    tx.keep_answer(&kept(caller, entry), KEPT_PER_CALLER)?;
                }
                tx.remove(Kind::Intent, &intent_key(caller, id))?;
                Ok(())
            })
            .map_err(|e| e.to_string())
    }

    fn forget_caller(&self, caller: &str) -> Result<(), String> {
        self.0
            .write(|tx| tx.forget_caller(caller))
            .map_err(|e| e.to_string())
    }
}

/// The request-id log, starting from the answers the store keeps.
pub(crate) fn request_log(db: &Arc<Db>) -> Result<RequestLog, String> {
    let kept = db.read(|tx| tx.kept_answers()).map_err(|e| e.to_string())?;
    let mut answers = Vec::with_capacity(kept.len());
    for answer in kept {
        let value = serde_json::from_str(&answer.answer).map_err(|e| {
            format!(
                "{}: the kept answer of request id {:?} cannot be read ({e}); move the file aside \
                 to start afresh",
                db.path().display(),
                answer.id
            )
        })?;
        answers.push((
            answer.caller,
            Entry {
                id: answer.id,
                fingerprint: answer.fingerprint,
                answer: value,
            },
        ));
    }
    Ok(RequestLog::kept_in(
        Arc::new(KeptInStore(db.clone())),
        answers,
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::records::{GroupRecord, StateFile};
    use krad_bus::server::request_log::Begin;
    use krad_bus::token::Principal;

    #[test]
    fn an_earlier_krad_s_json_is_imported_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = StateFile {
            rev_reserved: 3000,
            next_terminal: 12,
            ..StateFile::default()
        };
        state.groups.insert(
            "g".into(),
            GroupRecord {
                name: "g".into(),
                base: "abc".into(),
                base_environment: "main".into(),
                host: None,
                count: 2,
                variants: Default::default(),
                picked: None,
                max_cost_usd: None,
            },
        );
        StatePath::in_dir(dir.path()).save(&state).unwrap();
        std::fs::write(
            dir.path().join(LEGACY_REQUEST_IDS),
            r#"{"callers":{"client":[{"id":"r1","fingerprint":"f","answer":"Ok"}]}}"#,
        )
        .unwrap();
        let db = open(dir.path()).unwrap();
        let (next, group) = db
            .read(|tx| {
                Ok((
                    tx.counter(NEXT_TERMINAL)?,
                    tx.get::<GroupRecord>(Kind::Group, "g")?,
                ))
            })
            .unwrap();
        assert_eq!((next, group.map(|g| g.count)), (Some(12), Some(2)));
        assert!(dir.path().join("state.json.imported").exists());
        assert!(!dir.path().join(LEGACY_STATE).exists());
        let log = request_log(&db).unwrap();
        // Known: another request under the same id is a reuse, a new id is fresh.
        let request = serde_json::json!("x");
        assert!(matches!(
            log.begin(&Principal::Client, "r1", &request),
            Begin::Reused
        ));
        assert!(matches!(
            log.begin(&Principal::Client, "r2", &request),
            Begin::Fresh(_)
        ));
    }

    #[test]
    fn a_damaged_json_state_stops_the_import_and_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(LEGACY_REQUEST_IDS), "{\"callers\":").unwrap();
        let error = open(dir.path()).err().unwrap();
        assert!(error.contains("is damaged"), "{error}");
        assert!(dir.path().join(LEGACY_REQUEST_IDS).exists());
        assert!(!dir.path().join(FILE).exists());
    }
}
