//! The event loop: the only owner of the state. It draws, waits for the next
//! event (no timeout but the next change of a drawn time: an idle screen
//! takes no CPU), applies every event waiting, and carries out the effects —
//! calls, the preview's stream, the bell, attaching. Must never decide what a
//! key means (that is `state`) nor how things look (that is `draw`).

use std::collections::VecDeque;
use std::io::Stdout;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::SystemTime;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::layout::Rect;

use crate::attach::{self, Ending};
use crate::bus::{Bus, Connect};
use crate::draw;
use crate::elsewhere;
use crate::event::{BusEvent, Event, PreviewEvent};
use crate::input::Input;
use crate::signals;
use crate::state::apps::AppRow;
use crate::state::{Effect, Mode, State};
use crate::terminal::{TerminalGuard, write_out};
use crate::{Error, ListApps, ListedApp, Options};

/// Runs the UI.
pub(crate) fn run(connect: Connect, options: Options) -> Result<(), Error> {
    let (tx, rx) = channel();
    signals::start(tx.clone())?;
    let result = (|| {
        let _guard = TerminalGuard::enter()?;
        let input = Input::start(tx.clone())?;
        let tx_apps = tx.clone();
        let bus = Bus::start(connect, tx.clone())?;
        if let Some(count) = options.asking_elsewhere {
            elsewhere::start(count, bus.here(), tx)?;
        }
        let mut terminal = Terminal::new(CrosstermBackend::new(std::io::stdout()))?;
        terminal.clear()?;
        let mut ui = Ui {
            state: State::new(options.color),
            bus,
            input,
            kept: VecDeque::new(),
            detach_key: options.detach_key,
            list_apps: options.list_apps,
            listed: Vec::new(),
            events: tx_apps,
            panic_key: panic_key(),
        };
        ui.run(&mut terminal, &rx)
    })();
    signals::stop();
    match result {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.map_err(Error::from),
    }
}

struct Ui {
    state: State,
    bus: Bus,
    input: Input,
    /// Events that came while attached, applied next.
    kept: VecDeque<Event>,
    detach_key: u8,
    /// Lists the apps for `A`.
    list_apps: Option<ListApps>,
    /// The apps as last listed, in the picker's order: a switch names one
    /// by its index.
    listed: Vec<ListedApp>,
    /// Where the listing's thread says what it found.
    events: Sender<Event>,
    /// Tests only: the key that panics ([`panic_key`]).
    panic_key: Option<TestPanic>,
}

/// The variable only the tests set, to see the terminal given back on a
/// panic: `KRAD_TUI_TEST_PANIC_KEY=!` makes `!` panic the UI's own loop,
/// `KRAD_TUI_TEST_PANIC_KEY=thread:!` a thread of its own. Unset
/// (everywhere but in those tests), nothing panics.
const PANIC_KEY: &str = "KRAD_TUI_TEST_PANIC_KEY";

/// The tests' panic: on which key, and where.
#[derive(Clone, Copy)]
struct TestPanic {
    key: char,
    on_a_thread: bool,
}

fn panic_key() -> Option<TestPanic> {
    let value = std::env::var(PANIC_KEY).ok()?;
    let (key, on_a_thread) = match value.strip_prefix("thread:") {
        Some(key) => (key, true),
        None => (value.as_str(), false),
    };
    Some(TestPanic {
        key: key.chars().next()?,
        on_a_thread,
    })
}

#[allow(
    clippy::panic,
    reason = "the tests' panic, behind a variable only they set"
)]
fn test_panic(key: char) {
    panic!("{PANIC_KEY}: {key} pressed");
}

fn panic_now(test: TestPanic) {
    if test.on_a_thread {
        let _ = std::thread::Builder::new()
            .name("krad-tui-test-panic".into())
            .spawn(move || test_panic(test.key));
    } else {
        test_panic(test.key);
    }
}

type Term = Terminal<CrosstermBackend<Stdout>>;

impl Ui {
    fn run(&mut self, terminal: &mut Term, events: &Receiver<Event>) -> std::io::Result<()> {
        loop {
            redraw(terminal, &mut self.state)?;
            if self.state.quitting {
                return Ok(());
            }
            let first = match self.kept.pop_front() {
                Some(event) => event,
                None => match self.state.next_tick(SystemTime::now()) {
                    Some(tick) => match events.recv_timeout(tick) {
                        Ok(event) => event,
                        Err(RecvTimeoutError::Timeout) => continue,
                        Err(RecvTimeoutError::Disconnected) => return Ok(()),
                    },
                    None => match events.recv() {
                        Ok(event) => event,
                        Err(_) => return Ok(()),
                    },
                },
            };
            let mut effects = self.apply(first);
            // Everything already waiting is applied before the next frame.
            while !self.state.quitting {
                let Some(event) = self.kept.pop_front().or_else(|| events.try_recv().ok()) else {
                    break;
                };
                effects.extend(self.apply(event));
            }
            for effect in effects {
                self.carry_out(effect, terminal, events)?;
            }
        }
    }

    fn apply(&mut self, event: Event) -> Vec<Effect> {
        let state = &mut self.state;
        match event {
            Event::Key(key) => {
                if let (Some(test), KeyCode::Char(pressed)) = (self.panic_key, key.code)
                    && test.key == pressed
                {
                    panic_now(test);
                }
                state.key(key)
            }
            // Pasted text goes into a field; on the list it would be keys.
            Event::Paste(text) if matches!(state.mode, Mode::Filter | Mode::Form(_)) => text
                .chars()
                .filter(|c| !c.is_control())
                .flat_map(|c| state.key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)))
                .collect(),
            Event::Paste(_) => Vec::new(),
            Event::Resize => Vec::new(),
            Event::InputClosed | Event::Stop(_) => {
                state.quitting = true;
                Vec::new()
            }
            // The stream of an app the screen left.
            Event::Bus(app, _) if app != self.bus.generation() => Vec::new(),
            Event::Bus(_, BusEvent::Up) => state.linked(),
            Event::Bus(_, BusEvent::Snapshot(snapshot)) => state.snapshot(snapshot),
            Event::Bus(_, BusEvent::Agent(agent)) => state.agent(*agent),
            Event::Bus(_, BusEvent::Removed(removed)) => state.removed(&removed),
            Event::Bus(_, BusEvent::Sampled(sampled)) => {
                state.sampled(sampled);
                Vec::new()
            }
            Event::Bus(_, BusEvent::Down(why)) => state.unlinked(why),
            Event::AppsListed(mut apps) => {
                apps.sort_by(|a, b| a.root.cmp(&b.root));
                let here = self.bus.client().map(|c| c.endpoint().to_string());
                let rows = apps
                    .iter()
                    .map(|app| AppRow {
                        root: app.root.display().to_string(),
                        agents: app.agents,
                        current: here.as_deref() == Some(app.endpoint.as_str()),
                    })
                    .collect();
                self.listed = apps;
                state.apps_listed(Ok(rows));
                Vec::new()
            }
            // Counted for an app the screen left.
            Event::AskingElsewhere { app, .. } if app != self.bus.generation() => Vec::new(),
            Event::AskingElsewhere { asking, .. } => state.counted_elsewhere(asking),
            Event::Preview(generation, event) => {
                let preview = &mut state.preview;
                match event {
                    PreviewEvent::Scrollback(lines) => preview.scrollback(generation, lines),
                    PreviewEvent::Screen(cols, rows, bytes) => {
                        preview.screen(generation, cols, rows, &bytes)
                    }
                    PreviewEvent::Output(bytes) => preview.output(generation, &bytes),
                    PreviewEvent::Ended(why) => preview.ended(generation, why),
                }
                Vec::new()
            }
            // An answer of an app the screen left.
            Event::Done(done) if done.app != self.bus.generation() => Vec::new(),
            Event::Done(done) => state.done(&done.action, done.result),
        }
    }

    fn carry_out(
        &mut self,
        effect: Effect,
        terminal: &mut Term,
        events: &Receiver<Event>,
    ) -> std::io::Result<()> {
        match effect {
            Effect::Call(action) => self.bus.call(action),
            Effect::Preview(target) => self.bus.preview(target, self.state.preview.generation),
            Effect::Bell => write_out(b"\x07"),
            Effect::Quit => self.state.quitting = true,
            Effect::Attach(target) => self.attach(target, terminal, events)?,
            Effect::ListApps => self.list_apps(),
            Effect::SwitchApp(index) => {
                if let Some(app) = self.listed.get(index) {
                    self.bus.switch(app.connect.clone());
                }
            }
        }
        Ok(())
    }

    /// Lists the apps on a thread of its own (each is asked for its agents);
    /// what it found comes as an event.
    fn list_apps(&mut self) {
        let Some(list) = self.list_apps.clone() else {
            self.state.apps_listed(Err(
                "this screen cannot list the apps on this machine".to_owned()
            ));
            return;
        };
        let events = self.events.clone();
        let spawned = std::thread::Builder::new()
            .name("krad-tui-apps".into())
            .spawn(move || {
                let _ = events.send(Event::AppsListed(list()));
            });
        if let Err(e) = spawned {
            self.state
                .apps_listed(Err(format!("cannot start a thread: {e}")));
        }
    }

    /// Puts the terminal on `target`'s TUI until it ends, then redraws all.
    fn attach(
        &mut self,
        target: u64,
        terminal: &mut Term,
        events: &Receiver<Event>,
    ) -> std::io::Result<()> {
        let Some(client) = self.bus.client() else {
            self.state.say("the app is not reachable".to_owned());
            return Ok(());
        };
        // The preview would only repeat what the attachment shows.
        self.bus.preview(None, self.state.preview.generation);
        self.input.pause();
        let mut kept = Vec::new();
        let ending = attach::attach(&client, target, self.detach_key, events, &mut kept);
        write_out(crate::terminal::RESET_KEEP_SCREEN);
        write_out(b"\x1b[?2004h");
        self.input.resume();
        self.kept.extend(kept);
        terminal.clear()?;
        terminal.hide_cursor()?;
        let text = match ending {
            Ok(Ending::Detached) => format!("detached from terminal {target}"),
            Ok(Ending::Exited(how)) => format!("the program of terminal {target} {how}"),
            Ok(Ending::AppGone) => "the app went away".to_owned(),
            Ok(Ending::Stop(_)) | Ok(Ending::InputClosed) => {
                self.state.quitting = true;
                return Ok(());
            }
            Err(why) => format!("cannot attach to terminal {target}: {why}"),
        };
        self.state.say(text);
        let target = self.state.preview.target;
        self.state.preview.follow(target);
        self.bus.preview(target, self.state.preview.generation);
        Ok(())
    }
}

/// Draws a frame of the state as it is now.
fn redraw(terminal: &mut Term, state: &mut State) -> std::io::Result<()> {
    state.now = SystemTime::now();
    let size = terminal.size()?;
    let areas = draw::areas(Rect::new(0, 0, size.width, size.height));
    state.keep_in_view(
        usize::from(areas.list.height),
        usize::from(areas.preview.height),
    );
    terminal.draw(|frame| draw::draw(frame, state))?;
    Ok(())
}
