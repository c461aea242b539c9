//! What each key does, mode by mode: the list's keys (move, fold, filter,
//! tabs, the actions), a form's, a confirmation's, an ask's options.
//!
//! Pure: a key and the state in, the state changed and [`Effect`]s out. Uses
//! crossterm's key *types* only; must never import the terminal's I/O or the
//! bus's client.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use krad_bus::protocol::{AgentState, AskAnswer};
use krad_bus::request::answer::Answer;
use krad_bus::request::close::Close;
use krad_bus::request::pick_variant::PickVariant;

use super::forms::Form;
use super::rows::{self, RowKey};
use super::{Action, Confirm, Effect, Flash, Mode, State, Tab};

/// How many lines PgUp and PgDn scroll the preview.
const PAGE: isize = 10;

impl State {
    /// A key was pressed.
    pub(crate) fn key(&mut self, key: KeyEvent) -> Vec<Effect> {
        if key.kind == KeyEventKind::Release {
            return Vec::new();
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && key.code == KeyCode::Char('c') {
            self.quitting = true;
            return vec![Effect::Quit];
        }
        match std::mem::replace(&mut self.mode, Mode::List) {
            Mode::List => self.list_key(key),
            Mode::Help => Vec::new(),
            Mode::Filter => self.filter_key(key),
            Mode::Form(form) => self.form_key(form, key),
            Mode::Confirm(confirm) => self.confirm_key(confirm, key),
            Mode::Choose(ask) => self.choose_key(ask, key),
            Mode::Apps(picker) => self.apps_key(picker, key),
        }
    }

    fn list_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        self.flash = None;
        match key.code {
            KeyCode::Char('q') => {
                self.quitting = true;
                vec![Effect::Quit]
            }
            KeyCode::Down | KeyCode::Char('j') => self.move_selection(1),
            KeyCode::Up | KeyCode::Char('k') => self.move_selection(-1),
            KeyCode::Home | KeyCode::Char('g') => self.move_selection(isize::MIN / 2),
            KeyCode::End | KeyCode::Char('G') => self.move_selection(isize::MAX / 2),
            KeyCode::PageUp => self.scroll_preview(PAGE),
            KeyCode::PageDown => self.scroll_preview(-PAGE),
            KeyCode::Enter => match self.selected.clone() {
                Some(RowKey::Agent(id)) => vec![Effect::Attach(id)],
                Some(RowKey::Group(key)) => self.fold(&key, None),
                None => Vec::new(),
            },
            KeyCode::Char(' ') => match self.selected.clone() {
                Some(RowKey::Group(key)) => self.fold(&key, None),
                _ => Vec::new(),
            },
            KeyCode::Left if self.tab == Tab::Diff => self.move_file(-1),
            KeyCode::Right if self.tab == Tab::Diff => self.move_file(1),
            KeyCode::Left => match self.selected.clone() {
                Some(RowKey::Group(key)) => self.fold(&key, Some(true)),
                Some(RowKey::Agent(id)) => match self.agents.get(&id).map(rows::group_key) {
                    Some(key) => {
                        let effects = self.fold(&key, Some(true));
                        self.selected = Some(RowKey::Group(key));
                        effects
                    }
                    None => Vec::new(),
                },
                None => Vec::new(),
            },
            KeyCode::Right => match self.selected.clone() {
                Some(RowKey::Group(key)) => self.fold(&key, Some(false)),
                _ => Vec::new(),
            },
            KeyCode::Tab => self.switch_tab(1),
            KeyCode::BackTab => self.switch_tab(-1),
            KeyCode::Char('/') => {
                self.mode = Mode::Filter;
                Vec::new()
            }
            KeyCode::Esc => {
                if !self.filter.is_empty() {
                    self.filter.clear();
                    return self.relist();
                }
                Vec::new()
            }
            KeyCode::Char('?') => {
                self.mode = Mode::Help;
                Vec::new()
            }
            KeyCode::Char('R') => self.refresh(),
            KeyCode::Char('n') => {
                let environment = self.selected_environment().unwrap_or_else(|| "main".into());
                self.mode = Mode::Form(Form::spawn(&environment));
                Vec::new()
            }
            KeyCode::Char('v') => {
                self.mode = Mode::Form(Form::variants());
                Vec::new()
            }
            KeyCode::Char('s') => {
                self.with_agent(|_, agent| Mode::Form(Form::send(agent.terminal)))
            }
            KeyCode::Char('r') => self.with_agent(|_, agent| {
                Mode::Form(Form::rename(agent.terminal, agent.name.as_deref()))
            }),
            KeyCode::Char('b') => self.budget(),
            KeyCode::Char('x') => self.close(),
            KeyCode::Char('p') => self.pick(),
            KeyCode::Char('P') => self.pick_best(),
            KeyCode::Char('a') => self.answer(),
            KeyCode::Char('A') => self.pick_app(),
            _ => Vec::new(),
        }
    }

    /// Opens a dialog about the selected agent, or says there is none.
    fn with_agent(
        &mut self,
        dialog: impl FnOnce(&State, &krad_bus::protocol::AgentRecord) -> Mode,
    ) -> Vec<Effect> {
        match self.selected_agent() {
            Some(agent) => {
                let mode = dialog(self, agent);
                self.mode = mode;
            }
            None => self.nothing_selected(),
        }
        Vec::new()
    }

    fn nothing_selected(&mut self) {
        self.flash = Some(Flash {
            text: "select an agent first".to_owned(),
            error: true,
        });
    }

    /// Folds a group shut (`Some(true)`), open, or the other way.
    fn fold(&mut self, key: &str, shut: Option<bool>) -> Vec<Effect> {
        let shut = shut.unwrap_or(!self.collapsed.contains(key));
        if shut {
            self.collapsed.insert(key.to_owned());
        } else {
            self.collapsed.remove(key);
        }
        self.relist()
    }

    fn scroll_preview(&mut self, delta: isize) -> Vec<Effect> {
        match self.tab {
            Tab::Screen => self.preview.scroll_by(delta, self.preview_height),
            Tab::Diff => {
                self.diff.scroll = (self.diff.scroll as isize - delta).max(0) as usize;
            }
            Tab::Asks => {}
        }
        Vec::new()
    }

    fn move_file(&mut self, delta: isize) -> Vec<Effect> {
        let files = match &self.diff.changes {
            Some(Ok(changes)) => changes.files.len(),
            _ => 0,
        };
        if files > 0 {
            let to = (self.diff.file as isize + delta).clamp(0, files as isize - 1);
            self.diff.file = to as usize;
            self.diff.scroll = 0;
        }
        Vec::new()
    }

    fn switch_tab(&mut self, delta: isize) -> Vec<Effect> {
        const TABS: [Tab; 3] = [Tab::Screen, Tab::Diff, Tab::Asks];
        let at = TABS.iter().position(|t| *t == self.tab).unwrap_or(0) as isize;
        self.tab = TABS[(at + delta).rem_euclid(TABS.len() as isize) as usize];
        self.tab_needs()
    }

    /// Reads what the tab shows again.
    fn refresh(&mut self) -> Vec<Effect> {
        self.diff.changes = None;
        self.asks.asks = None;
        self.say("refreshing".to_owned());
        self.tab_needs()
    }

    fn filter_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        match key.code {
            KeyCode::Enter => return Vec::new(),
            KeyCode::Esc => self.filter.clear(),
            KeyCode::Backspace => {
                self.filter.pop();
            }
            KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => {
                self.filter.push(c)
            }
            _ => {}
        }
        if key.code != KeyCode::Esc {
            self.mode = Mode::Filter;
        }
        self.relist()
    }

    fn form_key(&mut self, mut form: Form, key: KeyEvent) -> Vec<Effect> {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Esc => return Vec::new(),
            KeyCode::Enter => match form.submit() {
                Ok(action) => {
                    self.say(format!("{}…", action.label()));
                    return vec![Effect::Call(action)];
                }
                Err(why) => form.error = Some(why),
            },
            KeyCode::Tab | KeyCode::Down => form.focus_by(1),
            KeyCode::BackTab | KeyCode::Up => form.focus_by(-1),
            KeyCode::Backspace => form.backspace(),
            KeyCode::Char('u') if ctrl => form.clear(),
            KeyCode::Char(c) if !ctrl => form.type_char(c),
            _ => {}
        }
        self.mode = Mode::Form(form);
        Vec::new()
    }

    fn confirm_key(&mut self, confirm: Confirm, key: KeyEvent) -> Vec<Effect> {
        match key.code {
            KeyCode::Char('y' | 'Y') | KeyCode::Enter => {
                self.say(format!("{}…", confirm.yes.label()));
                vec![Effect::Call(confirm.yes)]
            }
            KeyCode::Char('n' | 'N' | 'q') | KeyCode::Esc => Vec::new(),
            _ => {
                self.mode = Mode::Confirm(confirm);
                Vec::new()
            }
        }
    }

    fn choose_key(&mut self, ask: krad_bus::protocol::AskInfo, key: KeyEvent) -> Vec<Effect> {
        let chosen = match key.code {
            KeyCode::Char(c @ '1'..='9') => {
                let index = c as usize - '1' as usize;
                ask.options.get(index).map(|o| o.id.clone())
            }
            KeyCode::Esc | KeyCode::Char('q') => return Vec::new(),
            _ => None,
        };
        match chosen {
            Some(option) => {
                self.say(format!("answering {}…", ask.ask));
                vec![Effect::Call(Action::Answer(Answer {
                    ask: ask.ask.clone(),
                    answer: AskAnswer::Option(option),
                }))]
            }
            None => {
                self.mode = Mode::Choose(ask);
                Vec::new()
            }
        }
    }

    fn budget(&mut self) -> Vec<Effect> {
        match self.selected.clone() {
            Some(RowKey::Agent(id)) => {
                let now = self.agents.get(&id).and_then(|a| a.max_cost_usd);
                self.mode = Mode::Form(Form::budget(Some(id), None, now));
            }
            Some(RowKey::Group(key)) => match rows::variant_group_of(&key) {
                Some(group) => self.mode = Mode::Form(Form::budget(None, Some(group.into()), None)),
                None => self.nothing_selected(),
            },
            None => self.nothing_selected(),
        }
        Vec::new()
    }

    /// `x`: asks first, as the CLI's Close would do it: a terminal, or an
    /// environment (never main) with its worktree and branch.
    fn close(&mut self) -> Vec<Effect> {
        match self.selected.clone() {
            Some(RowKey::Agent(id)) => {
                let who = self
                    .agents
                    .get(&id)
                    .and_then(|a| a.name.clone())
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default();
                self.mode = Mode::Confirm(Confirm {
                    lines: vec![
                        format!("Close terminal {id}{who}?"),
                        "Its program gets SIGHUP, then SIGKILL after 5 s.".to_owned(),
                    ],
                    yes: Action::Close(Close {
                        target: Some(id),
                        ..Close::default()
                    }),
                });
            }
            Some(RowKey::Group(key)) => match rows::environment_of_group(&key) {
                Some(environment) if self.is_main(environment) => {
                    self.flash = Some(Flash {
                        text: "main cannot be closed: close its terminals one by one".to_owned(),
                        error: true,
                    });
                }
                Some(environment) => {
                    let running: Vec<String> = self
                        .agents
                        .values()
                        .filter(|a| a.environment == environment && a.state.is_running())
                        .map(|a| match &a.name {
                            Some(name) => {
                                format!("{} ({})", a.terminal, crate::cells::one_line(name))
                            }
                            None => a.terminal.to_string(),
                        })
                        .collect();
                    let mut lines = vec![format!("Close environment {environment}?")];
                    if !running.is_empty() {
                        lines.push(format!(
                            "It ends {}: {}.",
                            crate::cells::counted(running.len(), "running agent"),
                            running.join(", ")
                        ));
                    }
                    lines.push(
                        "Its terminals, then its worktree and branch (the tip is kept \
                         under refs/krad/archive/). Uncommitted or unmerged work refuses."
                            .to_owned(),
                    );
                    self.mode = Mode::Confirm(Confirm {
                        lines,
                        yes: Action::Close(Close {
                            environment: Some(environment.to_owned()),
                            ..Close::default()
                        }),
                    });
                }
                None => {
                    self.flash = Some(Flash {
                        text: "a variant group closes by picking one (p)".to_owned(),
                        error: true,
                    });
                }
            },
            None => self.nothing_selected(),
        }
        Vec::new()
    }

    /// `p`: the dry run of picking the selected variant; its answer asks.
    fn pick(&mut self) -> Vec<Effect> {
        let Some(agent) = self.selected_agent() else {
            self.nothing_selected();
            return Vec::new();
        };
        match (&agent.group, agent.variant) {
            (Some(group), Some(variant)) => {
                let pick = PickVariant {
                    group: group.clone(),
                    variant,
                    dry_run: true,
                    ..PickVariant::default()
                };
                self.say("pick: the dry run…".to_owned());
                vec![Effect::Call(Action::Pick(pick))]
            }
            _ => {
                self.flash = Some(Flash {
                    text: "not a variant: select an agent of a variant group".to_owned(),
                    error: true,
                });
                Vec::new()
            }
        }
    }

    /// `P`: a pick by rule in the selected variant's group — the scoreboard,
    /// the ranking and the best one's dry run; its answer asks.
    fn pick_best(&mut self) -> Vec<Effect> {
        let Some(agent) = self.selected_agent() else {
            self.nothing_selected();
            return Vec::new();
        };
        match &agent.group {
            Some(group) => {
                let pick = PickVariant {
                    group: group.clone(),
                    best: true,
                    dry_run: true,
                    ..PickVariant::default()
                };
                self.say("pick the best: the ranking and the dry run…".to_owned());
                vec![Effect::Call(Action::Pick(pick))]
            }
            None => {
                self.flash = Some(Flash {
                    text: "not a variant: select an agent of a variant group".to_owned(),
                    error: true,
                });
                Vec::new()
            }
        }
    }

    /// `a`: the selected agent's first open ask — its options on keys, or a
    /// form for text.
    fn answer(&mut self) -> Vec<Effect> {
        let Some(agent) = self.selected_agent() else {
            self.nothing_selected();
            return Vec::new();
        };
        let id = agent.terminal;
        let asking = agent.state == AgentState::Asking;
        let read = match &self.asks.asks {
            Some(Ok(asks)) if self.asks.terminal == Some(id) => Some(asks.first().cloned()),
            _ => None,
        };
        match read {
            Some(Some(ask)) => {
                self.mode = match Form::answer(&ask) {
                    Some(form) => Mode::Form(form),
                    None => Mode::Choose(ask),
                };
                Vec::new()
            }
            // Read, and none open: an agent asking asks in its own dialog
            // (read again all the same, in case an ask opened since).
            Some(None) => {
                self.tab = Tab::Asks;
                if asking {
                    self.say(
                        "no open ask here: it asks in its own terminal — ⏎ attaches to answer there"
                            .to_owned(),
                    );
                    vec![Effect::Call(Action::Asks(id))]
                } else {
                    self.say("no open ask for this agent".to_owned());
                    Vec::new()
                }
            }
            None => {
                // Show the asks tab; once read, `a` again answers.
                self.tab = Tab::Asks;
                self.asks.asks = None;
                self.say(if asking {
                    "reading its asks: press a again".to_owned()
                } else {
                    "no open ask read yet for this agent".to_owned()
                });
                self.tab_needs()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::record;
    use krad_bus::protocol::SnapshotInfo;
    use serde_json::json;

    fn press(state: &mut State, code: KeyCode) -> Vec<Effect> {
        state.key(KeyEvent::new(code, KeyModifiers::NONE))
    }

    fn listed() -> State {
        let mut state = State::new(true);
        state.snapshot(SnapshotInfo {
            rev: 1,
            agents: vec![
                record(json!({"terminal":1,"state":"idle"})),
                record(json!({"terminal":2,"environment":"g-1","group":"g","variant":1})),
            ],
            removed: Vec::new(),
            fresh: true,
        });
        state
    }

    #[test]
    fn enter_attaches_and_folds() {
        let mut state = listed();
        press(&mut state, KeyCode::Home);
        assert_eq!(press(&mut state, KeyCode::Enter), Vec::new());
        assert_eq!(state.rows.len(), 3, "main folded: {:?}", state.rows);
        press(&mut state, KeyCode::Enter);
        press(&mut state, KeyCode::Down);
        assert_eq!(press(&mut state, KeyCode::Enter), [Effect::Attach(1)]);
        assert_eq!(press(&mut state, KeyCode::Char('q')), [Effect::Quit]);
    }

    #[test]
    fn an_agent_asking_in_its_own_dialog_is_said_so() {
        let mut state = State::new(true);
        state.snapshot(SnapshotInfo {
            rev: 1,
            agents: vec![record(json!({"terminal":1,"state":"asking"}))],
            removed: Vec::new(),
            fresh: true,
        });
        let effects = press(&mut state, KeyCode::Char('a'));
        assert_eq!(effects, [Effect::Call(Action::Asks(1))]);
        state.done(
            &Action::Asks(1),
            Ok(super::super::Outcome::Asks(1, Vec::new())),
        );
        // Read and none open: `a` says where to answer (and reads them again).
        assert_eq!(
            press(&mut state, KeyCode::Char('a')),
            [Effect::Call(Action::Asks(1))]
        );
        let said = state
            .flash
            .as_ref()
            .map(|f| f.text.clone())
            .unwrap_or_default();
        assert!(said.contains("its own terminal"), "{said}");
        assert_eq!(state.mode, Mode::List);
    }

    #[test]
    fn close_asks_first_and_main_is_refused() {
        let mut state = listed();
        press(&mut state, KeyCode::Home);
        press(&mut state, KeyCode::Char('x'));
        assert!(state.flash.as_ref().is_some_and(|f| f.error));
        press(&mut state, KeyCode::Down);
        press(&mut state, KeyCode::Char('x'));
        assert!(matches!(state.mode, Mode::Confirm(_)));
        let effects = press(&mut state, KeyCode::Char('y'));
        assert!(matches!(&effects[..], [Effect::Call(Action::Close(c))] if c.target == Some(1)));
    }

    #[test]
    fn pick_starts_with_a_dry_run() {
        let mut state = listed();
        press(&mut state, KeyCode::End);
        let effects = press(&mut state, KeyCode::Char('p'));
        assert!(
            matches!(&effects[..], [Effect::Call(Action::Pick(p))] if p.dry_run && p.variant == 1),
            "{effects:?}"
        );
    }

    #[test]
    fn the_filter_narrows_the_list_and_esc_clears_it() {
        let mut state = listed();
        press(&mut state, KeyCode::Char('/'));
        for c in "g-1".chars() {
            press(&mut state, KeyCode::Char(c));
        }
        assert_eq!(state.rows.len(), 2);
        press(&mut state, KeyCode::Enter);
        assert_eq!(state.mode, Mode::List);
        press(&mut state, KeyCode::Esc);
        assert_eq!(state.rows.len(), 4);
    }
}
