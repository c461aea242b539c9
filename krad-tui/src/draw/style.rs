//! The colours and attributes of each thing drawn, and the same without
//! colour when `NO_COLOR` is set (bold, dim and reverse only). Pure values.

use krad_bus::protocol::AgentState;
use ratatui::style::{Color, Modifier, Style};

/// The styles of one screen.
#[derive(Debug, Clone)]
pub(crate) struct Palette {
    pub(crate) color: bool,
    pub(crate) plain: Style,
    pub(crate) bold: Style,
    pub(crate) dim: Style,
    pub(crate) title: Style,
    pub(crate) key: Style,
    pub(crate) error: Style,
    pub(crate) alarm: Style,
    pub(crate) working: Style,
    pub(crate) selected: Style,
    pub(crate) alerted: Style,
    pub(crate) group: Style,
    pub(crate) added: Style,
    pub(crate) removed: Style,
    pub(crate) hunk: Style,
}

impl Palette {
    /// The palette, in colour or not.
    pub(crate) fn new(color: bool) -> Palette {
        let c = |style: Style, fg: Color| if color { style.fg(fg) } else { style };
        let bold = Style::new().add_modifier(Modifier::BOLD);
        let reversed = Style::new().add_modifier(Modifier::REVERSED);
        Palette {
            color,
            plain: Style::new(),
            bold,
            dim: Style::new().add_modifier(Modifier::DIM),
            title: if color {
                Style::new()
                    .fg(Color::Black)
                    .bg(Color::Cyan)
                    .add_modifier(Modifier::BOLD)
            } else {
                reversed.add_modifier(Modifier::BOLD)
            },
            key: c(bold, Color::Cyan),
            error: c(bold, Color::Red),
            alarm: if color {
                Style::new()
                    .fg(Color::White)
                    .bg(Color::Red)
                    .add_modifier(Modifier::BOLD)
            } else {
                reversed.add_modifier(Modifier::BOLD)
            },
            working: c(Style::new(), Color::Green),
            selected: reversed,
            alerted: if color {
                Style::new()
                    .bg(Color::Yellow)
                    .fg(Color::Black)
                    .add_modifier(Modifier::BOLD)
            } else {
                bold.add_modifier(Modifier::UNDERLINED)
            },
            group: c(bold, Color::Blue),
            added: c(Style::new(), Color::Green),
            removed: c(Style::new(), Color::Red),
            hunk: c(Style::new(), Color::Cyan),
        }
    }

    /// An agent's state.
    pub(crate) fn state(&self, state: AgentState) -> Style {
        let color = match state {
            AgentState::Asking => Color::Yellow,
            AgentState::Working => Color::Green,
            AgentState::Starting | AgentState::Queued => Color::Cyan,
            AgentState::Idle => Color::Blue,
            AgentState::Exited => Color::DarkGray,
            AgentState::Other => Color::Magenta,
        };
        let style = match state {
            AgentState::Asking => self.bold,
            AgentState::Exited => self.dim,
            _ => self.plain,
        };
        if self.color { style.fg(color) } else { style }
    }

    /// The header's asking count: loud when not zero.
    pub(crate) fn asking_count(&self, asking: usize) -> Style {
        if asking > 0 {
            self.state(AgentState::Asking)
        } else {
            self.plain
        }
    }
}
