//! The store's own tests: a record's cached JSON, its watchers and the revs
//! always follow the record, whatever an update's closure says.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use krad_bus::protocol::{AgentRecord, AgentState, RecordJson, Response, StateSource};
use krad_term::{ExitStatus, Snapshot, Terminal};
use tokio::sync::oneshot;

use super::Store;
use crate::config::Config;
use crate::profile::Profiles;

/// A terminal with nothing behind it: the store only keeps it.
struct Nothing;

impl Terminal for Nothing {
    fn id(&self) -> u64 {
        7
    }

    fn pid(&self) -> Option<u32> {
        None
    }

    fn write(&self, _bytes: Vec<u8>) -> oneshot::Receiver<std::io::Result<()>> {
        oneshot::channel().1
    }

    fn resize(&self, _cols: u16, _rows: u16) -> std::io::Result<()> {
        Ok(())
    }

    fn snapshot(&self, _scrollback_lines: usize) -> Snapshot {
        Snapshot::blank((80, 24))
    }

    fn bracketed_paste(&self) -> bool {
        false
    }

    fn close(&self, _grace: Duration) {}

    fn exit_status(&self) -> Option<ExitStatus> {
        None
    }
}

fn record() -> AgentRecord {
    AgentRecord {
        terminal: 7,
        environment: "main".into(),
        host: None,
        name: Some("one".into()),
        profile: "exec".into(),
        command: vec!["sleep".into(), "3600".into()],
        lead: false,
        parent: None,
        group: None,
        variant: None,
        state: AgentState::Working,
        state_source: StateSource::Screen,
        message: None,
        exit_code: None,
        signal: None,
        pid: Some(1234),
        title: None,
        started_at: "2026-12-02T00:00:00.000Z".into(),
        state_since: "2026-12-02T00:00:00.000Z".into(),
        rev: 0,
        usage: None,
        tokens: None,
        max_cost_usd: None,
        hook_problem: None,
        queue_place: None,
    }
}

/// A store in a fresh directory holding [`record`].
fn store_with_one(dir: &std::path::Path) -> Store {
    let store = Store::open(crate::state_db::open(dir).unwrap()).unwrap();
    let profiles = Profiles::from_config(&Config::parse("").unwrap()).unwrap();
    let profile = profiles.get("exec").unwrap();
    store.insert(record(), Arc::new(Nothing), profile, None);
    store
}

/// The cached JSON is the JSON of the record as it is now.
fn assert_cache_matches(store: &Store) {
    let record = store.record(7).unwrap();
    let cached = store.json(7).unwrap();
    assert_eq!(cached.as_str(), RecordJson::of(&record).as_str());
    let listed = Response::Agents(vec![record.clone()]).to_line();
    assert_eq!(store.list_answer(None).as_bytes(), listed);
    assert_eq!(
        store.list_answer(Some(&record.environment)).as_bytes(),
        listed
    );
}

#[test]
fn list_answer_follows_every_insert_update_and_removal() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_one(dir.path());
    let profiles = Profiles::from_config(&Config::parse("").unwrap()).unwrap();
    let profile = profiles.get("exec").unwrap();
    let listed = |store: &Store| store.list_answer(None).as_bytes().to_vec();
    let typed = |store: &Store, ids: &[u64]| {
        let records = ids.iter().map(|id| store.record(*id).unwrap()).collect();
        Response::Agents(records).to_line()
    };
    assert_eq!(listed(&store), typed(&store, &[7]));
    // Asked again with nothing changed: the same bytes.
    assert_eq!(listed(&store), typed(&store, &[7]));

    let mut second = record();
    second.terminal = 8;
    second.environment = "wt-a".into();
    store.insert(second, Arc::new(Nothing), profile, None);
    assert_eq!(listed(&store), typed(&store, &[7, 8]));
    assert_eq!(
        store.list_answer(Some("wt-a")).as_bytes(),
        typed(&store, &[8])
    );

    store.update(8, |e| {
        e.record.title = Some("renamed".into());
        true
    });
    assert_eq!(listed(&store), typed(&store, &[7, 8]));
    assert!(String::from_utf8_lossy(&listed(&store)).contains("renamed"));

    store.remove(7);
    assert_eq!(listed(&store), typed(&store, &[8]));
    store.remove(8);
    assert_eq!(listed(&store), Response::Agents(Vec::new()).to_line());
}

#[test]
fn a_record_edited_by_a_closure_that_returns_false_is_still_a_change() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_one(dir.path());
    let mut watch = store.watch(7).unwrap();
    watch.mark_unchanged();
    let rev_before = store.rev();

    // The closure edits the record, then says nothing changed (as an exit
    // that records its code on an agent already marked exited could).
    let after = store
        .update(7, |e| {
            e.record.exit_code = Some(3);
            false
        })
        .unwrap();

    assert_eq!(after.exit_code, Some(3));
    assert_cache_matches(&store);
    assert!(
        store.json(7).unwrap().as_str().contains("\"exit_code\":3"),
        "the cached JSON shows the edit"
    );
    assert!(store.rev() > rev_before, "the edit bumped the revs");
    assert_eq!(after.rev, store.rev());
    assert!(
        watch.has_changed().unwrap(),
        "the agent's watchers were told"
    );
    assert_eq!(watch.borrow_and_update().exit_code, Some(3));
    let mut lines = Vec::new();
    store.lines_since(rev_before, None, &mut lines);
    assert_eq!(lines.len(), 1, "subscribers resuming see the change");
}

#[test]
fn an_update_that_changes_nothing_is_not_a_change() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_one(dir.path());
    let mut watch = store.watch(7).unwrap();
    watch.mark_unchanged();
    let rev_before = store.rev();
    let json_before = store.json(7).unwrap().as_str().to_owned();

    // Edits outside the record (and none inside it) are no change.
    store
        .update(7, |e| {
            e.prompt_pending = true;
            false
        })
        .unwrap();

    assert_eq!(store.rev(), rev_before);
    assert!(!watch.has_changed().unwrap());
    assert_eq!(store.json(7).unwrap().as_str(), json_before);
    assert_cache_matches(&store);
}

#[test]
fn a_change_reported_true_rebuilds_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_one(dir.path());
    store
        .update(7, |e| {
            e.record.title = Some("✳ a \"quoted\" title".into());
            true
        })
        .unwrap();
    assert_cache_matches(&store);
}

#[test]
fn a_reader_a_little_behind_gets_every_change_and_one_far_behind_the_latest() {
    use krad_bus::protocol::StreamLine;
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_one(dir.path());
    let retitle = |n: usize| {
        store.update(7, |e| {
            e.record.title = Some(format!("t{n}"));
            true
        });
    };
    let titles = |since: u64, environment: Option<&str>| {
        let mut lines: Vec<StreamLine> = Vec::new();
        store.lines_since(since, environment, &mut lines);
        lines
            .iter()
            .map(|line| match line {
                StreamLine::Agent(json) => {
                    let record: AgentRecord = serde_json::from_str(json.as_str()).unwrap();
                    record.title.unwrap_or_default()
                }
                other => panic!("not an agent: {other:?}"),
            })
            .collect::<Vec<_>>()
    };

    // A few changes behind: each of them, in order.
    let since = store.rev();
    (0..3).for_each(retitle);
    assert_eq!(titles(since, None), ["t0", "t1", "t2"]);
    assert_eq!(titles(since, Some("elsewhere")), Vec::<String>::new());

    // Further behind than the changes kept: the agent once, as it is now.
    let since = store.rev();
    (0..super::RECENT_CHANGES + 5).for_each(retitle);
    let last = format!("t{}", super::RECENT_CHANGES + 4);
    assert_eq!(titles(since, None), [last]);

    // A removal comes after the agent's last change.
    let since = store.rev();
    retitle(0);
    store.remove(7);
    let mut lines: Vec<StreamLine> = Vec::new();
    store.lines_since(since, None, &mut lines);
    assert!(matches!(
        &lines[..],
        [StreamLine::Agent(_), StreamLine::Message(_)]
    ));
}

/// The next-terminal counter the store holds.
fn stored_next_terminal(store: &Store) -> u64 {
    store
        .db()
        .read(|tx| tx.counter(crate::state_db::NEXT_TERMINAL))
        .unwrap()
        .unwrap()
}

/// Terminal ids are reserved a block at a time: within it none is written,
/// none is given twice after a crash (a reopen without a clean stop), and a
/// clean stop gives the rest back so that ids go on densely.
#[test]
fn terminal_ids_are_reserved_a_block_at_a_time_and_never_given_twice() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(crate::state_db::open(dir.path()).unwrap()).unwrap();
    let first = store.allocate_terminal_id().unwrap();
    let reserved = stored_next_terminal(&store);
    assert_eq!(reserved, first + super::TERMINAL_ID_BLOCK);
    let mut given = vec![first];
    for _ in 1..super::TERMINAL_ID_BLOCK {
        given.push(store.allocate_terminal_id().unwrap());
        assert_eq!(
            stored_next_terminal(&store),
            reserved,
            "no write within the block"
        );
    }
    // The block ran out: the next id reserves another.
    given.push(store.allocate_terminal_id().unwrap());
    assert_eq!(
        stored_next_terminal(&store),
        reserved + super::TERMINAL_ID_BLOCK
    );
    // One with more to record writes at once, and stays in the block.
    let with = store.allocate_terminal_id_with(|_, _| Ok(())).unwrap();
    given.push(with);
    assert_eq!(
        stored_next_terminal(&store),
        reserved + super::TERMINAL_ID_BLOCK
    );
    assert!(
        given.windows(2).all(|w| w[1] == w[0] + 1),
        "ids go up one by one: {given:?}"
    );
    let last = *given.last().unwrap();
    drop(store);

    // A crash: the next run starts past the whole block.
    let store = Store::open(crate::state_db::open(dir.path()).unwrap()).unwrap();
    let after_crash = store.allocate_terminal_id().unwrap();
    assert!(after_crash > last, "{after_crash} after {last}");
    // A clean stop gives back what was not given.
    store.release_terminal_ids();
    assert_eq!(stored_next_terminal(&store), after_crash + 1);
    drop(store);
    let store = Store::open(crate::state_db::open(dir.path()).unwrap()).unwrap();
    assert_eq!(store.allocate_terminal_id().unwrap(), after_crash + 1);
}

/// A sample's values reach the streams as one published sample, only while
/// one follows, never with a new rev; a stream behind by several gets each
/// terminal once, and one of another environment gets nothing.
#[test]
fn samples_are_published_once_only_while_followed_and_move_no_rev() {
    use krad_bus::protocol::{Tenths, Usage};
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_one(dir.path());
    let usage = |cpu: u32, at: &str| Usage {
        cpu_percent: Tenths(cpu),
        rss_bytes: 4096,
        processes: 1,
        sampled_at: at.into(),
    };
    let rev = store.rev();
    let record_rev = store.record(7).unwrap().rev;
    // Nobody follows: nothing kept, nothing published.
    store.set_usage([(7, usage(10, "a"))]);
    store.publish_samples();
    assert_eq!(store.sampled_since(0, None), (None, 0));

    let mut followed = store.sampled();
    assert_eq!(*followed.borrow_and_update(), 0);
    store.set_usage([(7, usage(20, "b"))]);
    store.publish_samples();
    assert!(followed.has_changed().unwrap());
    let (json, seq) = store.sampled_since(0, None);
    assert_eq!(seq, 1);
    let json = json.unwrap();
    assert!(
        json.starts_with(r#"[{"terminal":7,"usage":{"cpu_percent":2,"#),
        "{json}"
    );
    assert_eq!(store.sampled_since(0, Some("other")), (None, 1));
    assert_eq!(store.sampled_since(1, None), (None, 1));
    // Only the time of the sample changed: no news.
    store.set_usage([(7, usage(20, "c"))]);
    store.publish_samples();
    assert_eq!(store.sampled_since(1, None), (None, 1));
    // Two samples later, a stream one behind gets the terminal once.
    store.set_usage([(7, usage(30, "d"))]);
    store.publish_samples();
    store.set_usage([(7, usage(40, "e"))]);
    store.publish_samples();
    let (json, seq) = store.sampled_since(1, Some("main"));
    assert_eq!(seq, 3);
    let json = json.unwrap();
    assert_eq!(json.matches("\"terminal\":7").count(), 1, "{json}");
    assert!(json.contains("\"cpu_percent\":4,"), "{json}");
    // Further behind than the samples kept: every agent with values.
    for cpu in 50..60 {
        store.set_usage([(7, usage(cpu, "f"))]);
        store.publish_samples();
    }
    let (json, _) = store.sampled_since(0, None);
    assert!(json.unwrap().contains("\"cpu_percent\":5.9"));
    assert_eq!(store.rev(), rev);
    assert_eq!(store.record(7).unwrap().rev, record_rev);
}
