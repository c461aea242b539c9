//! The home screen's state and how events change it: the agents as the
//! stream told them, the rows the list shows, the selection, the preview, the
//! tabs, the dialogs. Changing it returns [`Effect`]s for the event loop to
//! carry out; nothing here does I/O.
//!
//! Must never import the terminal (crossterm's I/O, ratatui's `Terminal`),
//! the bus's client or threads: `draw` reads this state, `app` feeds it.

pub(crate) mod apps;
pub(crate) mod forms;
pub(crate) mod keys;
pub(crate) mod preview;
pub(crate) mod rows;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use krad_bus::protocol::{
    AgentRecord, AgentState, AskInfo, ChangesInfo, EnvironmentInfo, EnvironmentKind, PickedInfo,
    RemovedInfo, SampledInfo, ScoresInfo, SnapshotInfo,
};
use krad_bus::request::answer::Answer;
use krad_bus::request::budget::Budget;
use krad_bus::request::close::Close;
use krad_bus::request::pick_variant::PickVariant;
use krad_bus::request::rename::Rename;
use krad_bus::request::run_variants::RunVariants;
use krad_bus::request::send::Send;
use krad_bus::request::spawn::Spawn;

use forms::Form;
use preview::Preview;
use rows::RowKey;

/// What the event loop is asked to do after a change.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Effect {
    /// Make a call on the bus (on a thread of its own).
    Call(Action),
    /// Put the user's terminal on this terminal's real TUI until the detach key.
    Attach(u64),
    /// Follow this terminal's screen in the preview (`None`: none).
    Preview(Option<u64>),
    /// Ring the terminal's bell.
    Bell,
    /// Leave, every agent left running.
    Quit,
    /// List the apps running on this machine (`A`), for the picker.
    ListApps,
    /// Put the screen on the app of this row of the picker's listing.
    SwitchApp(usize),
}

/// A call on the bus, as the user asked for it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Action {
    /// Type into a terminal.
    Send(Send),
    /// Start an agent, in a new worktree first when one is named.
    Spawn {
        /// The worktree to create first (from main's HEAD).
        new_worktree: Option<String>,
        /// The agent.
        spawn: Spawn,
    },
    /// Close a terminal or an environment.
    Close(Close),
    /// Start variants.
    RunVariants(RunVariants),
    /// What picking a variant would do (`dry_run`), or picking it.
    Pick(PickVariant),
    /// Set a cost limit.
    Budget(Budget),
    /// Name a terminal.
    Rename(Rename),
    /// Answer an ask.
    Answer(Answer),
    /// An environment's changes, with the patch.
    Changes(String),
    /// A terminal's open asks.
    Asks(u64),
    /// The environments (for the header and the groups).
    Environments,
}

impl Action {
    /// What the call is called in messages.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Action::Send(_) => "send",
            Action::Spawn { .. } => "new agent",
            Action::Close(_) => "close",
            Action::RunVariants(_) => "variants",
            Action::Pick(p) if p.dry_run => "pick (dry run)",
            Action::Pick(_) => "pick",
            Action::Budget(_) => "budget",
            Action::Rename(_) => "rename",
            Action::Answer(_) => "answer",
            Action::Changes(_) => "changes",
            Action::Asks(_) => "asks",
            Action::Environments => "environments",
        }
    }
}

/// What a call came back with.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    /// Done; a sentence to show.
    Said(String),
    /// An environment's changes.
    Changes(ChangesInfo),
    /// A terminal's open asks.
    Asks(u64, Vec<AskInfo>),
    /// The environments.
    Environments(Vec<EnvironmentInfo>),
    /// What a pick would do.
    DryRun(PickVariant, Box<PickedInfo>),
    /// A pick by rule found no best: the group's scoreboard.
    NoBest(Box<ScoresInfo>),
}

/// Why a call did not do what was asked.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refusal {
    /// For a person.
    pub(crate) message: String,
    /// The app answered `conflict` (an environment with work: `force` may do it).
    pub(crate) conflict: bool,
}

/// Whether the stream of agents is up.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Link {
    /// Not yet heard from the app.
    Connecting,
    /// The stream runs.
    Up,
    /// The app is gone (or was never there); the UI tries again.
    Down(String),
}

/// The tab of the preview.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tab {
    /// The terminal's screen.
    Screen,
    /// The environment's changes.
    Diff,
    /// The agent's open asks.
    Asks,
}

/// A dialog over the list, or none.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Mode {
    /// The list has the keys.
    List,
    /// Typing the filter.
    Filter,
    /// The keys, explained.
    Help,
    /// A form or a one-line prompt.
    Form(Form),
    /// A question with yes and no.
    Confirm(Confirm),
    /// An ask's options, each on a key.
    Choose(AskInfo),
    /// The apps running on this machine, to switch to one.
    Apps(apps::AppsPicker),
}

/// A yes/no question and the call a yes makes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Confirm {
    /// Its lines.
    pub(crate) lines: Vec<String>,
    /// The call on `y`.
    pub(crate) yes: Action,
}

/// The diff tab: an environment's changes.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct DiffView {
    /// The environment shown.
    pub(crate) environment: Option<String>,
    /// The changes, once read; the error otherwise.
    pub(crate) changes: Option<Result<ChangesInfo, String>>,
    /// The file the patch is shown from.
    pub(crate) file: usize,
    /// Lines scrolled down in the patch (from the file's start).
    pub(crate) scroll: usize,
}

/// The asks tab: a terminal's open asks.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct AsksView {
    /// The terminal they are of.
    pub(crate) terminal: Option<u64>,
    /// Its open asks, once read.
    pub(crate) asks: Option<Result<Vec<AskInfo>, String>>,
}

/// A line in the footer for a while.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Flash {
    /// The text.
    pub(crate) text: String,
    /// Whether it reports a failure.
    pub(crate) error: bool,
}

/// Everything the screen shows.
#[derive(Debug)]
pub(crate) struct State {
    /// The agents by terminal id, as the stream last said.
    pub(crate) agents: BTreeMap<u64, AgentRecord>,
    /// The stream's health.
    pub(crate) link: Link,
    /// The app's repository (main's path).
    pub(crate) repo: Option<String>,
    /// The environments, as last read.
    pub(crate) environments: Vec<EnvironmentInfo>,
    /// Groups folded shut, by key.
    pub(crate) collapsed: BTreeSet<String>,
    /// The filter (`/`); empty: all.
    pub(crate) filter: String,
    /// The rows the list shows, in order (kept current by [`State::relist`]).
    pub(crate) rows: Vec<RowKey>,
    /// The selected row.
    pub(crate) selected: Option<RowKey>,
    /// The first row the list shows (kept so the selection is in view).
    pub(crate) list_offset: usize,
    /// How many rows the list showed last (0: not drawn yet).
    pub(crate) list_room: usize,
    /// How many rows the preview showed last.
    pub(crate) preview_height: usize,
    /// The preview's tab.
    pub(crate) tab: Tab,
    /// The selected agent's screen.
    pub(crate) preview: Preview,
    /// The diff tab.
    pub(crate) diff: DiffView,
    /// The asks tab.
    pub(crate) asks: AsksView,
    /// The dialog.
    pub(crate) mode: Mode,
    /// The footer's message.
    pub(crate) flash: Option<Flash>,
    /// Agents that started asking since they were last selected: highlighted.
    pub(crate) alerted: BTreeSet<u64>,
    /// How many agents are asking in the other apps on this machine; none
    /// until counted for the app on screen.
    pub(crate) asking_elsewhere: Option<usize>,
    /// Whether to use colours (`NO_COLOR` unset).
    pub(crate) color: bool,
    /// The time the cells are drawn at (set by the loop before each draw, so
    /// drawing stays a function of the state).
    pub(crate) now: SystemTime,
    /// Set by `q`.
    pub(crate) quitting: bool,
}

impl State {
    /// An empty screen, waiting for the app.
    pub(crate) fn new(color: bool) -> State {
        State {
            agents: BTreeMap::new(),
            link: Link::Connecting,
            repo: None,
            environments: Vec::new(),
            collapsed: BTreeSet::new(),
            filter: String::new(),
            rows: Vec::new(),
            selected: None,
            list_offset: 0,
            list_room: 0,
            preview_height: 0,
            tab: Tab::Screen,
            preview: Preview::default(),
            diff: DiffView::default(),
            asks: AsksView::default(),
            mode: Mode::List,
            flash: None,
            alerted: BTreeSet::new(),
            asking_elsewhere: None,
            color,
            now: SystemTime::UNIX_EPOCH,
            quitting: false,
        }
    }

    /// A screen in color whose link is up and whose list shows `agents` (the
    /// benchmark's frames, the drawing's tests).
    pub(crate) fn showing(agents: Vec<AgentRecord>) -> State {
        let mut state = State::new(true);
        state.link = Link::Up;
        state.snapshot(SnapshotInfo {
            rev: 1,
            agents,
            removed: Vec::new(),
            fresh: true,
        });
        state
    }

    /// Scrolls the list so that the selection shows in a list `height` rows
    /// high (its column header and a possible banner take two).
    pub(crate) fn keep_in_view(&mut self, height: usize, preview_height: usize) {
        self.preview_height = preview_height;
        let room = height.saturating_sub(2).max(1);
        self.list_room = room;
        let at = self.selected_index().unwrap_or(0);
        if at < self.list_offset {
            self.list_offset = at;
        } else if at >= self.list_offset + room {
            self.list_offset = at + 1 - room;
        }
        self.list_offset = self.list_offset.min(self.rows.len().saturating_sub(1));
    }

    /// The selected agent's record.
    pub(crate) fn selected_agent(&self) -> Option<&AgentRecord> {
        match &self.selected {
            Some(RowKey::Agent(id)) => self.agents.get(id),
            _ => None,
        }
    }

    /// The index of the selected row.
    pub(crate) fn selected_index(&self) -> Option<usize> {
        let selected = self.selected.as_ref()?;
        self.rows.iter().position(|row| row == selected)
    }

    /// The stream is up again: the app's environments are read.
    pub(crate) fn linked(&mut self) -> Vec<Effect> {
        self.link = Link::Up;
        let mut effects = vec![Effect::Call(Action::Environments)];
        // A preview the app's stop ended follows the terminal again.
        if let Some(target) = self.preview.target
            && matches!(self.preview.status, preview::Status::Ended(_))
        {
            self.preview.follow(Some(target));
            effects.push(Effect::Preview(Some(target)));
        }
        effects
    }

    /// The stream broke or could not be opened.
    pub(crate) fn unlinked(&mut self, why: String) -> Vec<Effect> {
        let was_up = self.link == Link::Up;
        self.link = Link::Down(why);
        if was_up {
            self.preview.end("the app stopped");
        }
        Vec::new()
    }

    /// The stream's first message.
    pub(crate) fn snapshot(&mut self, snapshot: SnapshotInfo) -> Vec<Effect> {
        if snapshot.fresh {
            self.agents.clear();
        }
        for removed in &snapshot.removed {
            self.agents.remove(&removed.terminal);
        }
        for agent in snapshot.agents {
            self.agents.insert(agent.terminal, agent);
        }
        self.alerted.retain(|id| {
            self.agents
                .get(id)
                .is_some_and(|a| a.state == AgentState::Asking)
        });
        self.relist()
    }

    /// CPU, memory and tokens sampled anew (no change of the agents: their
    /// revs, states and places in the list stay); the cells show them.
    pub(crate) fn sampled(&mut self, sampled: SampledInfo) {
        for one in sampled.agents {
            if let Some(agent) = self.agents.get_mut(&one.terminal) {
                agent.usage = one.usage;
                agent.tokens = one.tokens;
            }
        }
    }

    /// The agents asking in the other apps, counted anew. More than before
    /// rings the bell, as an agent of this app that starts asking does; the
    /// first count for the app on screen rings nothing.
    pub(crate) fn counted_elsewhere(&mut self, asking: usize) -> Vec<Effect> {
        let before = self.asking_elsewhere.replace(asking);
        match before {
            Some(before) if asking > before => vec![Effect::Bell],
            _ => Vec::new(),
        }
    }

    /// An agent after a change. One that starts asking rings the bell and is
    /// highlighted until it is selected or stops asking.
    pub(crate) fn agent(&mut self, record: AgentRecord) -> Vec<Effect> {
        let mut effects = Vec::new();
        let id = record.terminal;
        let was_asking = self
            .agents
            .get(&id)
            .is_some_and(|a| a.state == AgentState::Asking);
        let asking = record.state == AgentState::Asking;
        if asking && !was_asking {
            effects.push(Effect::Bell);
            if self.selected != Some(RowKey::Agent(id)) {
                self.alerted.insert(id);
            }
        }
        if !asking {
            self.alerted.remove(&id);
        }
        let refresh_asks = self.tab == Tab::Asks && self.asks.terminal == Some(id);
        self.agents.insert(id, record);
        effects.extend(self.relist());
        if refresh_asks {
            effects.push(Effect::Call(Action::Asks(id)));
        }
        effects
    }

    /// A terminal was closed and is gone.
    pub(crate) fn removed(&mut self, removed: &RemovedInfo) -> Vec<Effect> {
        self.agents.remove(&removed.terminal);
        self.alerted.remove(&removed.terminal);
        self.relist()
    }

    /// Computes the rows again and keeps the selection on the same row, or on
    /// the row now where it was; a new selection changes the preview.
    pub(crate) fn relist(&mut self) -> Vec<Effect> {
        let before = self.selected_index();
        let previous = self.selected.clone();
        self.rows = rows::visible_rows(&self.agents, &self.collapsed, &self.filter);
        let keep = previous.as_ref().is_some_and(|key| self.rows.contains(key));
        if !keep {
            self.selected = match before {
                Some(index) if !self.rows.is_empty() => {
                    Some(self.rows[index.min(self.rows.len() - 1)].clone())
                }
                // At first, the first agent rather than its group's header.
                _ => self
                    .rows
                    .iter()
                    .find(|row| matches!(row, RowKey::Agent(_)))
                    .or(self.rows.first())
                    .cloned(),
            };
        }
        self.selection_changed(previous)
    }

    /// Moves the selection by `delta` rows.
    pub(crate) fn move_selection(&mut self, delta: isize) -> Vec<Effect> {
        if self.rows.is_empty() {
            return Vec::new();
        }
        let previous = self.selected.clone();
        let at = self.selected_index().unwrap_or(0) as isize;
        let last = self.rows.len() as isize - 1;
        let to = (at + delta).clamp(0, last) as usize;
        self.selected = Some(self.rows[to].clone());
        self.selection_changed(previous)
    }

    /// What follows from the selection having been `previous`: the preview
    /// follows the selected agent, and the tabs read what they show.
    fn selection_changed(&mut self, previous: Option<RowKey>) -> Vec<Effect> {
        if previous == self.selected {
            return Vec::new();
        }
        let mut effects = Vec::new();
        let target = self.selected_agent().map(|a| a.terminal);
        if let Some(id) = target {
            self.alerted.remove(&id);
        }
        if target != self.preview.target {
            self.preview.follow(target);
            effects.push(Effect::Preview(target));
        }
        effects.extend(self.tab_needs());
        effects
    }

    /// The calls the tab needs to show the selection.
    pub(crate) fn tab_needs(&mut self) -> Vec<Effect> {
        match self.tab {
            Tab::Screen => Vec::new(),
            Tab::Diff => {
                let environment = self.selected_environment();
                if environment == self.diff.environment && self.diff.changes.is_some() {
                    return Vec::new();
                }
                self.diff = DiffView {
                    environment: environment.clone(),
                    ..DiffView::default()
                };
                environment
                    .map(|e| vec![Effect::Call(Action::Changes(e))])
                    .unwrap_or_default()
            }
            Tab::Asks => {
                let terminal = self.selected_agent().map(|a| a.terminal);
                if terminal == self.asks.terminal && self.asks.asks.is_some() {
                    return Vec::new();
                }
                self.asks = AsksView {
                    terminal,
                    asks: None,
                };
                terminal
                    .map(|t| vec![Effect::Call(Action::Asks(t))])
                    .unwrap_or_default()
            }
        }
    }

    /// The environment of the selection: the agent's, or a group row's when
    /// the group is an environment.
    pub(crate) fn selected_environment(&self) -> Option<String> {
        match &self.selected {
            Some(RowKey::Agent(id)) => self.agents.get(id).map(|a| a.environment.clone()),
            Some(RowKey::Group(key)) => rows::environment_of_group(key).map(str::to_owned),
            None => None,
        }
    }

    /// Whether `name` is the main environment.
    pub(crate) fn is_main(&self, name: &str) -> bool {
        match self.environments.iter().find(|e| e.name == name) {
            Some(environment) => environment.kind == EnvironmentKind::Main,
            None => name == "main",
        }
    }

    /// A call came back.
    pub(crate) fn done(
        &mut self,
        action: &Action,
        result: Result<Outcome, Refusal>,
    ) -> Vec<Effect> {
        match result {
            Ok(Outcome::Said(text)) => {
                self.say(text);
                return self.after(action);
            }
            Ok(Outcome::Changes(changes)) => {
                if self.diff.environment.as_deref() == Some(changes.environment.as_str()) {
                    self.diff.changes = Some(Ok(changes));
                    self.diff.file = self.diff.file.min(
                        self.diff
                            .changes
                            .as_ref()
                            .and_then(|c| c.as_ref().ok())
                            .map_or(0, |c| c.files.len().saturating_sub(1)),
                    );
                }
            }
            Ok(Outcome::Asks(terminal, asks)) => {
                if self.asks.terminal == Some(terminal) {
                    self.asks.asks = Some(Ok(asks));
                }
            }
            Ok(Outcome::Environments(environments)) => {
                self.repo = environments
                    .iter()
                    .find(|e| e.kind == EnvironmentKind::Main)
                    .map(|e| e.path.clone());
                self.environments = environments;
            }
            Ok(Outcome::DryRun(pick, picked)) => {
                self.mode = Mode::Confirm(forms::pick_confirmation(pick, &picked));
            }
            Ok(Outcome::NoBest(scores)) => match forms::no_best(&scores) {
                Some(confirm) => self.mode = Mode::Confirm(confirm),
                None => {
                    self.flash = Some(Flash {
                        text: format!("pick: no variant left in group {}", scores.group),
                        error: true,
                    });
                }
            },
            Err(refusal) => return self.refused(action, refusal),
        }
        Vec::new()
    }

    /// What a done call makes stale: the asks after an answer, the
    /// environments after a change of them.
    fn after(&mut self, action: &Action) -> Vec<Effect> {
        match action {
            Action::Answer(_) => match self.asks.terminal {
                Some(terminal) => vec![Effect::Call(Action::Asks(terminal))],
                None => Vec::new(),
            },
            Action::Spawn { .. } | Action::Close(_) | Action::RunVariants(_) | Action::Pick(_) => {
                vec![Effect::Call(Action::Environments)]
            }
            _ => Vec::new(),
        }
    }

    fn refused(&mut self, action: &Action, refusal: Refusal) -> Vec<Effect> {
        match action {
            Action::Changes(environment) if self.diff.environment.as_ref() == Some(environment) => {
                self.diff.changes = Some(Err(refusal.message));
            }
            Action::Asks(terminal) if self.asks.terminal == Some(*terminal) => {
                self.asks.asks = Some(Err(refusal.message));
            }
            Action::Close(close)
                if refusal.conflict && close.environment.is_some() && close.force.is_none() =>
            {
                let mut force = close.clone();
                force.force = Some(true);
                self.mode = Mode::Confirm(Confirm {
                    lines: vec![
                        refusal.message,
                        String::new(),
                        "Close it anyway (force)? Its tip is kept under refs/krad/archive/."
                            .to_owned(),
                    ],
                    yes: Action::Close(force),
                });
            }
            _ => {
                self.flash = Some(Flash {
                    text: format!("{}: {}", action.label(), refusal.message),
                    error: true,
                });
            }
        }
        Vec::new()
    }

    /// Shows `text` in the footer.
    pub(crate) fn say(&mut self, text: String) {
        self.flash = Some(Flash { text, error: false });
    }

    /// How long until a drawn cell changes by time alone (the time in state
    /// of an agent in view); `None` while no agent is in view.
    pub(crate) fn next_tick(&self, now: SystemTime) -> Option<Duration> {
        self.rows
            .iter()
            .skip(self.list_offset)
            .take(self.list_room.max(1))
            .filter_map(|row| match row {
                RowKey::Agent(id) => self.agents.get(id),
                RowKey::Group(_) => None,
            })
            .filter_map(|a| cells_age(a, now))
            .map(crate::cells::next_change)
            .min()
    }

    /// The header's counts: agents, asking, working, and the cost of those
    /// with one.
    pub(crate) fn totals(&self) -> Totals {
        let mut totals = Totals::default();
        for agent in self.agents.values() {
            totals.agents += 1;
            match agent.state {
                AgentState::Asking => totals.asking += 1,
                AgentState::Working => totals.working += 1,
                _ => {}
            }
            if let Some(cost) = agent.tokens.as_ref().and_then(|t| t.cost_usd) {
                totals.cost_usd += cost.value();
            }
        }
        totals
    }
}

fn cells_age(agent: &AgentRecord, now: SystemTime) -> Option<Duration> {
    crate::cells::elapsed(&agent.state_since, now)
}

/// The header's counts.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Totals {
    pub(crate) agents: usize,
    pub(crate) asking: usize,
    pub(crate) working: usize,
    pub(crate) cost_usd: f64,
}

#[cfg(test)]
mod tests;
