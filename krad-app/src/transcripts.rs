//! The transcripts folder (`<state dir>/transcripts`, one `<id>.log` and maybe
//! `<id>.log.1` per terminal) stays within `[terminals] transcripts_max_mb`:
//! past it, closed terminals' transcripts are removed, oldest first. Live
//! terminals' are never touched (each is bounded by its rotation). Runs at
//! start and after each Close, on a blocking thread.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::config::Settings;
use crate::store::Store;

/// Where terminal `id`'s transcript is written.
pub(crate) fn path(settings: &Settings, id: u64) -> std::path::PathBuf {
    settings
        .state_dir
        .join("transcripts")
        .join(format!("{id}.log"))
}

/// Prunes the transcripts folder, off the runtime's workers.
pub(crate) async fn prune_in_background(settings: &Settings, store: &Store) {
    let dir = settings.state_dir.join("transcripts");
    let budget = settings
        .config
        .terminals
        .transcripts_max_mb
        .saturating_mul(1024 * 1024);
    let live: BTreeSet<u64> = store.list(None).iter().map(|r| r.terminal).collect();
    let pruned = tokio::task::spawn_blocking(move || prune(&dir, &live, budget)).await;
    if let Ok((files, bytes)) = pruned
        && files > 0
    {
        tracing::info!(
            files,
            bytes,
            "removed the oldest transcripts of closed terminals"
        );
    }
}

/// Removes closed terminals' transcripts, oldest first, until the folder holds
/// at most `budget` bytes. Returns the files and bytes removed.
pub(crate) fn prune(dir: &Path, live: &BTreeSet<u64>, budget: u64) -> (usize, u64) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return (0, 0);
    };
    let mut total = 0;
    let mut closed: Vec<(SystemTime, u64, PathBuf)> = Vec::new();
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        total += meta.len();
        let name = entry.file_name();
        let Some(id) = name.to_str().and_then(terminal_of) else {
            continue;
        };
        if !live.contains(&id) {
            let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            closed.push((modified, meta.len(), entry.path()));
        }
    }
    closed.sort();
    let (mut files, mut freed) = (0, 0);
    for (_, size, path) in closed {
        if total <= budget {
            break;
        }
        if std::fs::remove_file(&path).is_ok() {
            total -= size;
            files += 1;
            freed += size;
        }
    }
    (files, freed)
}

/// The terminal of `<id>.log` or `<id>.log.1`.
fn terminal_of(name: &str) -> Option<u64> {
    let stem = name
        .strip_suffix(".log")
        .or_else(|| name.strip_suffix(".log.1"))?;
    stem.parse().ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn closed_terminals_transcripts_go_oldest_first_and_live_ones_stay() {
        let dir = tempfile::tempdir().unwrap();
        let mut age = 0;
        let mut write = |name: &str, bytes: usize| {
            let path = dir.path().join(name);
            std::fs::write(&path, vec![b'x'; bytes]).unwrap();
            // Distinct, increasing modification times, set rather than waited for.
            age += 1;
            let modified = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000 + age);
            std::fs::File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_modified(modified)
                .unwrap();
        };
        write("1.log.1", 400);
        write("1.log", 100);
        write("2.log", 300);
        write("3.log", 1000);
        write("notes.txt", 50);
        let live = BTreeSet::from([3]);
        // 1,850 bytes; keep 1,400: terminal 1's two files go (500), 2's stays.
        assert_eq!(prune(dir.path(), &live, 1400), (2, 500));
        assert!(dir.path().join("2.log").exists());
        assert!(dir.path().join("3.log").exists());
        assert!(dir.path().join("notes.txt").exists());
        // A budget no closed transcript can meet: the live one stays anyway.
        assert_eq!(prune(dir.path(), &live, 0), (1, 300));
        assert!(dir.path().join("3.log").exists());
    }
}
