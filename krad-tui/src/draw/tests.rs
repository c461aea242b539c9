//! Drawing at odd sizes and with odd text, on ratatui's `TestBackend`.

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::json;

use super::*;
use crate::test_support::record;

fn screen_text(state: &mut State, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    let layout = areas(Rect::new(0, 0, width, height));
    state.keep_in_view(
        usize::from(layout.list.height),
        usize::from(layout.preview.height),
    );
    terminal.draw(|frame| draw(frame, state)).unwrap();
    let buffer = terminal.backend().buffer().clone();
    let mut text = String::new();
    for y in 0..buffer.area.height {
        for x in 0..buffer.area.width {
            text.push_str(buffer[(x, y)].symbol());
        }
        text.push('\n');
    }
    text
}

#[test]
fn an_empty_list_says_how_to_start() {
    let mut state = State::showing(Vec::new());
    let text = screen_text(&mut state, 80, 24);
    assert!(text.contains("No agents yet"), "{text}");
    assert!(text.contains("0 agents"), "{text}");
    assert!(text.contains("q quit"), "{text}");
}

#[test]
fn every_size_down_to_nothing_draws_without_panic() {
    let wide = "日本語のメッセージ🙂".repeat(20);
    let mut state = State::showing(
        (1..=30)
            .map(|id| {
                record(
                    json!({"terminal":id,"name":wide,"message":format!("{wide}\u{1b}[31m\t\r"),
                    "state": if id % 3 == 0 {"asking"} else {"working"}}),
                )
            })
            .collect(),
    );
    let apps = crate::state::apps::AppsPicker {
        rows: Some(vec![crate::state::apps::AppRow {
            root: format!("/src/{wide}"),
            agents: Some((3, 1)),
            current: true,
        }]),
        selected: 0,
    };
    for mode in [Mode::List, Mode::Help, Mode::Apps(apps)] {
        state.mode = mode;
        for width in [0, 1, 2, 5, 19, 40, 79, 80, 81, 120, 300] {
            for height in [0, 1, 2, 3, 5, 24, 60] {
                screen_text(&mut state, width, height);
            }
        }
    }
}

#[test]
fn a_narrow_screen_keeps_state_and_message() {
    let mut state = State::showing(vec![record(
        json!({"terminal":7,"name":"fix-login","state":"asking","message":"May I run rm?"}),
    )]);
    let text = screen_text(&mut state, 80, 24);
    let row = text.lines().find(|l| l.contains("fix-login")).unwrap();
    assert!(
        row.contains("asking") && row.contains("May I run rm?"),
        "{row}"
    );
    assert!(text.contains("1 asking"), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 80));
}

#[test]
fn agents_asking_in_other_apps_show_in_the_header_only_when_there_are_some() {
    let mut state = State::showing(vec![record(json!({"terminal":1}))]);
    let header = |state: &mut State| {
        screen_text(state, 100, 24)
            .lines()
            .next()
            .unwrap_or("")
            .to_owned()
    };
    assert!(!header(&mut state).contains("other apps"));
    state.asking_elsewhere = Some(2);
    let text = header(&mut state);
    assert!(
        text.contains("0 asking · 2 asking in other apps (A) · 1 working"),
        "{text}"
    );
}

#[test]
fn the_app_gone_is_said() {
    let mut state = State::showing(vec![record(json!({"terminal":1}))]);
    state.unlinked("connection refused".into());
    let text = screen_text(&mut state, 80, 24);
    assert!(text.contains("app stopped: reconnecting"), "{text}");
    assert!(text.contains("The app is not reachable"), "{text}");
}

#[test]
fn the_selection_stays_in_view_in_a_long_list() {
    let mut state = State::showing((1..=200).map(|id| record(json!({"terminal":id}))).collect());
    for _ in 0..149 {
        state.move_selection(1);
    }
    let text = screen_text(&mut state, 80, 24);
    assert!(text.contains("150 "), "{text}");
}

#[test]
fn the_preview_draws_colours_and_wide_characters() {
    let mut state = State::showing(vec![record(json!({"terminal":1}))]);
    let generation = state.preview.generation;
    state.preview.screen(
        generation,
        20,
        4,
        "\x1b[H\x1b[2J\x1b[31m日本\x1b[0m ok".as_bytes(),
    );
    let mut terminal = Terminal::new(TestBackend::new(80, 24)).unwrap();
    terminal.draw(|frame| draw(frame, &state)).unwrap();
    let buffer = terminal.backend().buffer().clone();
    let preview = areas(Rect::new(0, 0, 80, 24)).preview;
    let cell = &buffer[(preview.x, preview.y)];
    assert_eq!(cell.symbol(), "日");
    assert_eq!(cell.fg, ratatui::style::Color::Indexed(1));
    // Without colour: the same text, no colour.
    state.color = false;
    terminal.draw(|frame| draw(frame, &state)).unwrap();
    let cell = &terminal.backend().buffer()[(preview.x, preview.y)];
    assert_eq!(cell.fg, ratatui::style::Color::Reset);
}

/// The whole key list fits at 80×24, the smallest size the UI promises (its
/// last line was cut).
#[test]
fn the_help_fits_at_80_by_24() {
    let mut state = State::showing(Vec::new());
    state.mode = Mode::Help;
    let text = screen_text(&mut state, 80, 24);
    for (key, _) in crate::draw::overlay::HELP {
        assert!(text.contains(key.trim()), "{key:?} missing:\n{text}");
    }
    assert!(text.contains("any key closes this"), "{text}");
}

/// A confirmation whose lines wrap is as tall as its rows: its last lines
/// and the keys to answer it are not cut (they were, by one row per wrap).
#[test]
fn a_confirm_with_long_lines_shows_its_last_line_and_its_keys() {
    let mut state = State::showing(Vec::new());
    let long = "No pick by rule: no variant passed every gating check on its work as it is \
                now (krad variants check runs them)";
    state.mode = Mode::Confirm(crate::state::Confirm {
        lines: vec![
            long.to_owned(),
            String::new(),
            long.replace("No pick by rule", "No best"),
            "the last line".to_owned(),
        ],
        yes: crate::state::Action::Pick(krad_bus::request::pick_variant::PickVariant::default()),
    });
    let text = screen_text(&mut state, 100, 30);
    assert!(text.contains("the last line"), "{text}");
    assert!(text.contains("y yes"), "{text}");
}
