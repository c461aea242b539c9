//! The state's changes from bus events and calls: the bell and highlight,
//! the selection kept across changes, the header's totals, refusals.

use super::*;
use crate::test_support::record;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::json;

fn snapshot(agents: Vec<AgentRecord>) -> SnapshotInfo {
    SnapshotInfo {
        rev: 1,
        agents,
        removed: Vec::new(),
        fresh: true,
    }
}

#[test]
fn an_agent_that_starts_asking_rings_and_is_highlighted() {
    let mut state = State::new(true);
    state.snapshot(snapshot(vec![
        record(json!({"terminal":1})),
        record(json!({"terminal":2})),
    ]));
    assert_eq!(state.selected, Some(RowKey::Agent(1)));
    let effects = state.agent(record(json!({"terminal":2,"state":"asking"})));
    assert!(effects.contains(&Effect::Bell), "{effects:?}");
    assert!(state.alerted.contains(&2));
    // Asking sorts first in its group.
    assert_eq!(state.rows[1], RowKey::Agent(2));
    // Asking again rings no bell.
    let effects = state.agent(record(json!({"terminal":2,"state":"asking","rev":2})));
    assert!(!effects.contains(&Effect::Bell));
    // Selecting it ends the highlight and follows it in the preview.
    let effects = state.move_selection(-1);
    assert!(effects.contains(&Effect::Preview(Some(2))), "{effects:?}");
    assert!(state.alerted.is_empty());
}

#[test]
fn more_agents_asking_in_other_apps_ring_but_the_first_count_does_not() {
    let mut state = State::new(true);
    assert!(state.counted_elsewhere(1).is_empty(), "the first count");
    assert_eq!(state.counted_elsewhere(2), [Effect::Bell]);
    assert!(state.counted_elsewhere(2).is_empty());
    assert!(state.counted_elsewhere(0).is_empty());
    assert_eq!(state.counted_elsewhere(1), [Effect::Bell]);
    // After a switch the app on screen is counted anew: no bell for that.
    state.asking_elsewhere = None;
    assert!(state.counted_elsewhere(3).is_empty());
    assert_eq!(state.asking_elsewhere, Some(3));
}

#[test]
fn a_removed_selection_moves_to_its_neighbour() {
    let mut state = State::new(true);
    state.snapshot(snapshot(vec![
        record(json!({"terminal":1})),
        record(json!({"terminal":2})),
    ]));
    state.move_selection(1);
    assert_eq!(state.selected, Some(RowKey::Agent(2)));
    let effects = state.removed(&RemovedInfo {
        terminal: 2,
        rev: 3,
    });
    assert_eq!(state.selected, Some(RowKey::Agent(1)));
    assert!(effects.contains(&Effect::Preview(Some(1))));
    state.snapshot(snapshot(Vec::new()));
    assert!(state.rows.is_empty() && state.selected.is_none());
}

#[test]
fn an_environment_with_work_is_offered_with_force() {
    let mut state = State::new(true);
    let close = Close {
        environment: Some("feat".into()),
        ..Close::default()
    };
    let refusal = Refusal {
        message: "feat has uncommitted work".into(),
        conflict: true,
    };
    state.done(&Action::Close(close.clone()), Err(refusal.clone()));
    let Mode::Confirm(confirm) = &state.mode else {
        panic!("{:?}", state.mode)
    };
    assert_eq!(
        confirm.yes,
        Action::Close(Close {
            force: Some(true),
            ..close.clone()
        })
    );
    // A terminal's refusal is only said.
    state.mode = Mode::List;
    let terminal = Close {
        target: Some(3),
        ..Close::default()
    };
    state.done(&Action::Close(terminal), Err(refusal));
    assert_eq!(state.mode, Mode::List);
    assert!(state.flash.as_ref().is_some_and(|f| f.error));
}

#[test]
fn closing_an_environment_names_the_agents_it_ends() {
    let mut state = State::new(true);
    state.snapshot(snapshot(vec![
        record(json!({"terminal":7,"environment":"feat","name":"inside","state":"working"})),
        record(json!({"terminal":8,"environment":"feat","state":"exited"})),
        record(json!({"terminal":9,"environment":"feat","state":"idle"})),
        record(json!({"terminal":10,"environment":"other","state":"working"})),
        record(json!({"terminal":11,"environment":"feat","state":"queued"})),
    ]));
    state.selected = Some(RowKey::Group("env:feat".into()));
    state.key(KeyEvent::new(KeyCode::Char('x'), KeyModifiers::NONE));
    let Mode::Confirm(confirm) = &state.mode else {
        panic!("{:?}", state.mode)
    };
    assert_eq!(confirm.lines[0], "Close environment feat?");
    assert_eq!(confirm.lines[1], "It ends 2 running agents: 7 (inside), 9.");
}

#[test]
fn totals_count_states_and_cost() {
    let mut state = State::new(true);
    state.snapshot(snapshot(vec![
        record(json!({"terminal":1,"state":"asking"})),
        record(
            json!({"terminal":2,"tokens":{"input":1,"output":1,"cache_write":0,
            "cache_read":0,"model":null,"cost_usd":0.5,"cost_unknown":null}}),
        ),
    ]));
    let totals = state.totals();
    assert_eq!((totals.agents, totals.asking, totals.working), (2, 1, 1));
    assert!((totals.cost_usd - 0.5).abs() < 1e-9);
}

#[test]
fn a_sample_changes_the_cost_and_nothing_else() {
    let mut state = State::new(true);
    state.snapshot(snapshot(vec![
        record(json!({"terminal":1})),
        record(json!({"terminal":2,"rev":7})),
    ]));
    let rows = state.rows.clone();
    let tokens: krad_bus::protocol::Tokens = serde_json::from_value(json!({"input":1,"output":1,
        "cache_write":0,"cache_read":0,"model":null,"cost_usd":0.25,"cost_unknown":null}))
    .unwrap();
    state.sampled(SampledInfo {
        rev: 7,
        agents: vec![
            krad_bus::protocol::SampledAgent {
                terminal: 2,
                usage: None,
                tokens: Some(tokens),
            },
            // A terminal the list does not have is no one's.
            krad_bus::protocol::SampledAgent {
                terminal: 9,
                usage: None,
                tokens: None,
            },
        ],
    });
    assert!((state.totals().cost_usd - 0.25).abs() < 1e-9);
    assert_eq!(state.agents[&2].rev, 7);
    assert_eq!(state.rows, rows);
    assert_eq!(state.agents.len(), 2);
}
