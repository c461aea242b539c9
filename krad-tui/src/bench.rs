//! What `krad-bench tui` measures in-process: the work of one frame after an
//! agent's state changed, and after a key, for a list of N agents, drawn into
//! a buffer of the given size (the terminal's bytes written to a sink).
//! Not an API for anything else.

use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use krad_bus::protocol::{AgentRecord, AgentState};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::layout::Rect;

use crate::draw;
use crate::state::State;

/// A screen of `cols` × `rows` showing `agents`, drawn once.
pub struct Screen {
    state: State,
    terminal: Terminal<CrosstermBackend<std::io::Sink>>,
    size: Rect,
}

impl Screen {
    /// The list of `agents` on a screen of `cols` × `rows`.
    pub fn new(agents: Vec<AgentRecord>, cols: u16, rows: u16) -> std::io::Result<Screen> {
        let state = State::showing(agents);
        let size = Rect::new(0, 0, cols, rows);
        let backend = CrosstermBackend::new(std::io::sink());
        let terminal = Terminal::with_options(
            backend,
            ratatui::TerminalOptions {
                viewport: ratatui::Viewport::Fixed(size),
            },
        )?;
        let mut screen = Screen {
            state,
            terminal,
            size,
        };
        screen.frame()?;
        Ok(screen)
    }

    fn frame(&mut self) -> std::io::Result<()> {
        self.state.now = std::time::SystemTime::now();
        let areas = draw::areas(self.size);
        self.state.keep_in_view(
            usize::from(areas.list.height),
            usize::from(areas.preview.height),
        );
        let state = &self.state;
        self.terminal.draw(|frame| draw::draw(frame, state))?;
        Ok(())
    }

    /// One agent's record changes (its state flips, its rev grows), then a
    /// frame: how long the two took.
    pub fn state_change(&mut self, terminal: u64) -> std::io::Result<Duration> {
        let mut record = match self.state.agents.get(&terminal) {
            Some(record) => record.clone(),
            None => return Ok(Duration::ZERO),
        };
        record.state = match record.state {
            AgentState::Working => AgentState::Idle,
            _ => AgentState::Working,
        };
        record.rev += 1;
        let start = Instant::now();
        self.state.agent(record);
        self.frame()?;
        Ok(start.elapsed())
    }

    /// A key (down, or up at the end), then a frame: how long the two took.
    pub fn key_press(&mut self) -> std::io::Result<Duration> {
        let at_end = self.state.selected_index().map(|i| i + 1) == Some(self.state.rows.len());
        let code = if at_end { KeyCode::Home } else { KeyCode::Down };
        let start = Instant::now();
        self.state.key(KeyEvent::new(code, KeyModifiers::NONE));
        self.frame()?;
        Ok(start.elapsed())
    }
}
