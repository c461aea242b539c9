//! `A`: the apps running on this machine, one per repository, and switching
//! the screen to another. The picker's rows and keys, and what a switch
//! forgets of the app left.
//!
//! Pure: the listing comes in as data (the loop lists the apps on a thread
//! and keeps how to reach each); must never import the bus's client or the
//! terminal.

use crossterm::event::{KeyCode, KeyEvent};

use super::{AsksView, DiffView, Effect, Flash, Link, Mode, State};

/// One running app, as the picker shows it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AppRow {
    /// The repository it serves.
    pub(crate) root: String,
    /// Its agents and how many are asking; none when it did not answer.
    pub(crate) agents: Option<(usize, usize)>,
    /// Whether the screen is on it.
    pub(crate) current: bool,
}

/// The picker: the apps once listed, and the one selected.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct AppsPicker {
    /// The apps (none while they are being listed), in the loop's order: a
    /// switch names a row by its index.
    pub(crate) rows: Option<Vec<AppRow>>,
    /// The selected row.
    pub(crate) selected: usize,
}

impl State {
    /// `A`: opens the picker; the loop lists the apps.
    pub(crate) fn pick_app(&mut self) -> Vec<Effect> {
        self.mode = Mode::Apps(AppsPicker::default());
        vec![Effect::ListApps]
    }

    /// The apps, listed (or why they could not be). The selection starts on
    /// the first app the screen is not on.
    pub(crate) fn apps_listed(&mut self, listed: Result<Vec<AppRow>, String>) {
        let Mode::Apps(picker) = &mut self.mode else {
            return;
        };
        match listed {
            Ok(rows) => {
                picker.selected = rows.iter().position(|r| !r.current).unwrap_or(0);
                picker.rows = Some(rows);
            }
            Err(why) => {
                self.mode = Mode::List;
                self.flash = Some(Flash {
                    text: why,
                    error: true,
                });
            }
        }
    }

    pub(super) fn apps_key(&mut self, mut picker: AppsPicker, key: KeyEvent) -> Vec<Effect> {
        let count = picker.rows.as_ref().map_or(0, Vec::len);
        match key.code {
            KeyCode::Esc | KeyCode::Char('q' | 'A') => return Vec::new(),
            KeyCode::Down | KeyCode::Char('j') if count > 0 => {
                picker.selected = (picker.selected + 1).min(count - 1);
            }
            KeyCode::Up | KeyCode::Char('k') => picker.selected = picker.selected.saturating_sub(1),
            KeyCode::Enter => {
                let chosen = picker.rows.as_ref().and_then(|r| r.get(picker.selected));
                match chosen {
                    Some(row) if row.current => return Vec::new(),
                    Some(row) => {
                        let root = row.root.clone();
                        self.left_app(&root);
                        return vec![Effect::SwitchApp(picker.selected)];
                    }
                    None => {}
                }
            }
            _ => {}
        }
        self.mode = Mode::Apps(picker);
        Vec::new()
    }

    /// The screen leaves its app for the one of `root`: what it showed of the
    /// app left is forgotten (its agents, environments, preview, diff and
    /// asks, the count of asks in the other apps); the folds and the filter
    /// stay.
    fn left_app(&mut self, root: &str) {
        self.agents.clear();
        self.asking_elsewhere = None;
        self.alerted.clear();
        self.environments.clear();
        self.repo = None;
        self.link = Link::Connecting;
        self.preview.follow(None);
        self.diff = DiffView::default();
        self.asks = AsksView::default();
        self.selected = None;
        self.list_offset = 0;
        self.rows.clear();
        self.mode = Mode::List;
        self.say(format!("switching to the app of {root}…"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::record;
    use crossterm::event::KeyModifiers;
    use krad_bus::protocol::SnapshotInfo;
    use serde_json::json;

    fn press(state: &mut State, code: KeyCode) -> Vec<Effect> {
        state.key(KeyEvent::new(code, KeyModifiers::NONE))
    }

    fn row(root: &str, current: bool) -> AppRow {
        AppRow {
            root: root.to_owned(),
            agents: Some((1, 0)),
            current,
        }
    }

    fn picker(state: &State) -> &AppsPicker {
        match &state.mode {
            Mode::Apps(picker) => picker,
            other => panic!("not the picker: {other:?}"),
        }
    }

    #[test]
    fn a_switches_to_the_app_chosen_and_forgets_the_one_left() {
        let mut state = State::new(false);
        state.link = Link::Up;
        state.snapshot(SnapshotInfo {
            rev: 1,
            agents: vec![record(json!({"terminal":1}))],
            removed: Vec::new(),
            fresh: true,
        });
        state.counted_elsewhere(2);
        let generation = state.preview.generation;
        assert_eq!(press(&mut state, KeyCode::Char('A')), [Effect::ListApps]);
        assert_eq!(picker(&state).rows, None);
        state.apps_listed(Ok(vec![
            row("/a", true),
            row("/b", false),
            row("/c", false),
        ]));
        // The selection starts on the first app the screen is not on.
        assert_eq!(picker(&state).selected, 1);
        press(&mut state, KeyCode::Char('j'));
        press(&mut state, KeyCode::Char('j'));
        assert_eq!(picker(&state).selected, 2, "stops at the last");
        press(&mut state, KeyCode::Up);
        assert_eq!(press(&mut state, KeyCode::Enter), [Effect::SwitchApp(1)]);
        assert_eq!(state.mode, Mode::List);
        assert!(state.agents.is_empty() && state.rows.is_empty() && state.selected.is_none());
        assert_eq!(state.link, Link::Connecting);
        assert_eq!(state.asking_elsewhere, None, "counted anew for the new app");
        assert!(
            state.preview.generation > generation,
            "the preview left is stale"
        );
        assert!(state.flash.as_ref().is_some_and(|f| f.text.contains("/b")));
    }

    #[test]
    fn the_app_on_screen_esc_and_a_failed_listing_change_nothing() {
        let mut state = State::new(false);
        state.snapshot(SnapshotInfo {
            rev: 1,
            agents: vec![record(json!({"terminal":1}))],
            removed: Vec::new(),
            fresh: true,
        });
        press(&mut state, KeyCode::Char('A'));
        state.apps_listed(Ok(vec![row("/a", true)]));
        assert!(press(&mut state, KeyCode::Enter).is_empty());
        assert_eq!(state.mode, Mode::List);
        assert_eq!(state.agents.len(), 1);
        press(&mut state, KeyCode::Char('A'));
        assert!(press(&mut state, KeyCode::Esc).is_empty());
        assert_eq!(state.mode, Mode::List);
        // A listing that comes after the picker closed is dropped.
        state.apps_listed(Ok(vec![row("/a", true)]));
        assert_eq!(state.mode, Mode::List);
        press(&mut state, KeyCode::Char('A'));
        state.apps_listed(Err("cannot list".to_owned()));
        assert_eq!(state.mode, Mode::List);
        assert!(state.flash.as_ref().is_some_and(|f| f.error));
        assert_eq!(state.agents.len(), 1);
    }
}
