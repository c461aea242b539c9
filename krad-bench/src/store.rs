//! The app's store: the commit of one state change with its request id's
//! answer, in `state.db` (krad-store: SQLite, WAL, synchronous=NORMAL) against
//! what the app did before it (the baseline, measured in the same run): the
//! whole `state.json` rewritten pretty-printed, fsynced and renamed, and the
//! whole `request-ids.json` rewritten. And terminal output kept as it arrives:
//! appended to a transcript file (what the app does) against one row per chunk
//! in the same SQLite set-up (what keeping transcripts in the store would cost).

use std::path::Path;
use std::time::Instant;

use anyhow::Context as _;
use krad_store::{Db, KeptAnswer, Kind};
use serde_json::{Map, Value, json};

use crate::Ctx;
use crate::util::Summary;

/// Records in the state (a busy app: environments and kept terminals).
const RECORDS: usize = 300;
/// Answers in the request-id log.
const ANSWERS: usize = 500;
/// Commits per way, taken in alternating blocks.
const COMMITS: usize = 1_000;
const BLOCK: usize = 50;

/// Measures both ways and prints the table.
pub(crate) fn store(ctx: &Ctx) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut state: Map<String, Value> = (0..RECORDS)
        .map(|i| (format!("env-{i}"), record(i, 0)))
        .collect();
    let mut answers: Vec<Value> = (0..ANSWERS).map(answer).collect();
    let db = Db::open(&dir.path().join("state.db")).context("opening the store")?;
    let (mut json_ms, mut db_ms) = (Vec::new(), Vec::new());
    let mut n = 0;
    while json_ms.len() < COMMITS {
        for _ in 0..BLOCK {
            n += 1;
            let key = format!("env-{}", n % RECORDS);
            let start = Instant::now();
            state.insert(key.clone(), record(n % RECORDS, n));
            answers.remove(0);
            answers.push(answer(n));
            write_json_files(dir.path(), &state, &answers)?;
            json_ms.push(start.elapsed().as_secs_f64() * 1e3);

            let start = Instant::now();
            let value = record(n % RECORDS, n);
            db.write(|tx| {
                tx.put(Kind::Environment, &key, &value)?;
                tx.set_counter("rev_reserved", n as u64)?;
                tx.keep_answer(
                    &KeptAnswer {
                        caller: "client".into(),
                        id: format!("r{n}"),
                        fingerprint: "0".repeat(64),
                        answer: answer(n).to_string(),
                    },
                    ANSWERS,
                )
            })?;
            db_ms.push(start.elapsed().as_secs_f64() * 1e3);
        }
    }
    transcripts(ctx, dir.path())?;
    let (json, db) = (Spread::of(&mut json_ms), Spread::of(&mut db_ms));
    ctx.out("## The store: one change and its request id's answer, committed\n");
    ctx.out(&format!(
        "{COMMITS} commits each way, in alternating blocks of {BLOCK}; a state of {RECORDS} \
         records (~1 KB each) and {ANSWERS} kept answers.\n"
    ));
    ctx.out("| way | median ms | p99 ms | median ÷ baseline | p99 ÷ baseline |");
    ctx.out("|---|---:|---:|---:|---:|");
    ctx.out(&format!(
        "| baseline: state.json rewritten (fsync, rename) + request-ids.json rewritten | {:.3} | {:.3} | 1 | 1 |",
        json.median, json.p99
    ));
    ctx.out(&format!(
        "| krad: one transaction in state.db (WAL, synchronous=NORMAL) | {:.3} | {:.3} | {:.3} | {:.3} |\n",
        db.median,
        db.p99,
        db.median / json.median,
        db.p99 / json.p99
    ));
    Ok(())
}

/// Output chunks per way.
const CHUNKS: usize = 8_192;
/// Bytes per chunk (a PTY read).
const CHUNK: usize = 4_096;

/// Terminal output: appended to a file, or inserted row by row in SQLite.
fn transcripts(ctx: &Ctx, dir: &Path) -> anyhow::Result<()> {
    use std::io::Write;
    let chunk = vec![b'x'; CHUNK];
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("1.log"))?;
    let started = Instant::now();
    for _ in 0..CHUNKS {
        file.write_all(&chunk)?;
    }
    let append = started.elapsed().as_secs_f64();
    let sqlite = rusqlite::Connection::open(dir.join("transcripts.db"))?;
    sqlite.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
         CREATE TABLE output (terminal INTEGER, seq INTEGER, bytes BLOB, PRIMARY KEY (terminal, seq));",
    )?;
    let started = Instant::now();
    for seq in 0..CHUNKS {
        sqlite
            .prepare_cached("INSERT INTO output (terminal, seq, bytes) VALUES (1, ?1, ?2)")?
            .execute(rusqlite::params![seq as i64, chunk])?;
    }
    let rows = started.elapsed().as_secs_f64();
    let mib = (CHUNKS * CHUNK) as f64 / (1024.0 * 1024.0);
    ctx.out("## Transcripts: terminal output kept as it arrives\n");
    ctx.out(&format!(
        "{CHUNKS} chunks of {CHUNK} bytes ({mib:.0} MiB), each kept before the next.\n"
    ));
    ctx.out("| way | MiB/s | ÷ append |");
    ctx.out("|---|---:|---:|");
    ctx.out(&format!(
        "| append to the transcript file (krad) | {:.0} | 1 |",
        mib / append
    ));
    ctx.out(&format!(
        "| one row per chunk in SQLite (WAL, synchronous=NORMAL) | {:.0} | {:.3} |\n",
        mib / rows,
        append / rows
    ));
    Ok(())
}

/// Median and 99th percentile.
struct Spread {
    median: f64,
    p99: f64,
}

impl Spread {
    fn of(samples: &mut [f64]) -> Spread {
        samples.sort_by(f64::total_cmp);
        let p99 = samples
            .get(samples.len() * 99 / 100)
            .copied()
            .unwrap_or_default();
        Spread {
            median: Summary::of(samples).median,
            p99,
        }
    }
}

/// The baseline: both files rewritten whole, as the app did before state.db.
fn write_json_files(
    dir: &Path,
    state: &Map<String, Value>,
    answers: &[Value],
) -> anyhow::Result<()> {
    use std::io::Write;
    let bytes = serde_json::to_vec_pretty(state)?;
    let temp = dir.join("state.json.tmp");
    let mut file = std::fs::File::create(&temp)?;
    file.write_all(&bytes)?;
    file.sync_all()?;
    std::fs::rename(&temp, dir.join("state.json"))?;
    std::fs::File::open(dir)?.sync_all()?;
    let ids = serde_json::to_vec(&json!({ "callers": { "client": answers } }))?;
    std::fs::write(dir.join("request-ids.json.tmp"), ids)?;
    std::fs::rename(
        dir.join("request-ids.json.tmp"),
        dir.join("request-ids.json"),
    )?;
    Ok(())
}

/// A record of about 1 KB, like an environment's.
fn record(i: usize, version: usize) -> Value {
    json!({
        "name": format!("env-{i}"),
        "path": format!("/home/someone/src/project/.git/krad/worktrees/env-{i}"),
        "branch": format!("krad/env-{i}"),
        "base": "0123456789abcdef0123456789abcdef01234567",
        "base_environment": "main",
        "host": null,
        "group": format!("group-{}", i / 4),
        "variant": i % 4 + 1,
        "phase": "ready",
        "setup": {
            "command": "npm ci && npm run build",
            "exit_code": 0,
            "output": format!("{} (version {version})", "added 1200 packages in 14s; ".repeat(20)),
        },
    })
}

/// A kept answer of about 300 bytes.
fn answer(n: usize) -> Value {
    json!({
        "id": format!("r{n}"),
        "fingerprint": "0".repeat(64),
        "answer": { "Agent": { "terminal": n, "environment": "main", "state": "starting", "command": ["claude"] } },
    })
}
