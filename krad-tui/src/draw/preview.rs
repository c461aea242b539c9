//! The preview under the list: its tab bar, and the tab shown — the
//! selected terminal's screen (colours kept, its scrollback on PgUp), its
//! environment's changes (a file list and that file's coloured patch), or
//! its open asks with their options on keys.
//!
//! Pure drawing; must never import the bus's client or the terminal's I/O.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::Palette;
use super::list::fit;
use crate::cells::one_line;
use crate::state::preview::Status;
use crate::state::{State, Tab};

/// The tab bar: which tab, and of what.
pub(crate) fn tabs(frame: &mut Frame<'_>, area: Rect, state: &State, palette: &Palette) {
    let mut spans = Vec::new();
    for (tab, name) in [
        (Tab::Screen, "Screen"),
        (Tab::Diff, "Diff"),
        (Tab::Asks, "Asks"),
    ] {
        let style = if tab == state.tab {
            palette.title
        } else {
            palette.dim
        };
        spans.push(Span::styled(format!(" {name} "), style));
        spans.push(Span::raw(" "));
    }
    let what = match state.tab {
        Tab::Screen => state.preview.target.map(|t| {
            let back = state.preview.scrolled();
            let status = match &state.preview.status {
                Status::Ended(why) => format!(" ({why})"),
                Status::Loading => " (loading)".to_owned(),
                _ if back > 0 => {
                    let lines = if back == 1 { "line" } else { "lines" };
                    format!(" ({back} {lines} back; PgDn returns)")
                }
                _ => String::new(),
            };
            format!("terminal {t}{status}")
        }),
        Tab::Diff => state
            .diff
            .environment
            .as_ref()
            .map(|e| format!("environment {e}")),
        Tab::Asks => state.asks.terminal.map(|t| format!("asks of terminal {t}")),
    };
    if let Some(what) = what {
        spans.push(Span::styled(what, palette.dim));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// The tab's body.
pub(crate) fn draw(frame: &mut Frame<'_>, area: Rect, state: &State, palette: &Palette) {
    if area.height == 0 || area.width == 0 {
        return;
    }
    match state.tab {
        Tab::Screen => screen(frame, area, state, palette),
        Tab::Diff => diff(frame, area, state, palette),
        Tab::Asks => asks(frame, area, state, palette),
    }
}

fn note(frame: &mut Frame<'_>, area: Rect, text: &str, palette: &Palette) {
    frame.render_widget(
        Paragraph::new(Line::from(Span::styled(text.to_owned(), palette.dim))),
        area,
    );
}

fn screen(frame: &mut Frame<'_>, area: Rect, state: &State, palette: &Palette) {
    let Some(parser) = &state.preview.parser else {
        let text = match (&state.preview.status, state.preview.target) {
            (_, None) => "Select an agent to see its screen.".to_owned(),
            (Status::Ended(why), _) => format!("No screen: {why}"),
            _ => "loading…".to_owned(),
        };
        return note(frame, area, &text, palette);
    };
    let screen = parser.screen();
    let (rows, cols) = screen.size();
    let (rows, cols) = (rows.get(), cols.get());
    let start = state.preview.first_row(usize::from(area.height));
    let mut lines = Vec::with_capacity(usize::from(area.height));
    for row in start..rows.min(start.saturating_add(area.height)) {
        let mut spans: Vec<Span<'static>> = Vec::new();
        let mut text = String::new();
        let mut style = Style::new();
        for col in 0..cols.min(area.width) {
            let Some(cell) = screen.cell(row, col) else {
                break;
            };
            if cell.is_wide_continuation() {
                continue;
            }
            let cell_style = cell_style(cell, palette.color);
            if cell_style != style && !text.is_empty() {
                spans.push(Span::styled(std::mem::take(&mut text), style));
            }
            style = cell_style;
            let contents = cell.contents();
            if contents.is_empty() || contents.chars().any(char::is_control) {
                text.push(' ');
            } else {
                text.push_str(contents);
            }
        }
        if !text.is_empty() {
            spans.push(Span::styled(text, style));
        }
        lines.push(Line::from(spans));
    }
    frame.render_widget(Paragraph::new(lines), area);
}

fn cell_style(cell: &vt100::Cell, color: bool) -> Style {
    let mut style = Style::new();
    if color {
        if let Some(fg) = to_color(cell.fgcolor()) {
            style = style.fg(fg);
        }
        if let Some(bg) = to_color(cell.bgcolor()) {
            style = style.bg(bg);
        }
    }
    if cell.bold() {
        style = style.add_modifier(Modifier::BOLD);
    }
    if cell.italic() {
        style = style.add_modifier(Modifier::ITALIC);
    }
    if cell.underline() {
        style = style.add_modifier(Modifier::UNDERLINED);
    }
    if cell.inverse() {
        style = style.add_modifier(Modifier::REVERSED);
    }
    style
}

fn to_color(color: vt100::Color) -> Option<Color> {
    match color {
        vt100::Color::Default => None,
        vt100::Color::Idx(i) => Some(Color::Indexed(i)),
        vt100::Color::Rgb(r, g, b) => Some(Color::Rgb(r, g, b)),
    }
}

fn diff(frame: &mut Frame<'_>, area: Rect, state: &State, palette: &Palette) {
    let changes = match (&state.diff.environment, &state.diff.changes) {
        (None, _) => return note(frame, area, "Select an agent or an environment.", palette),
        (Some(_), None) => return note(frame, area, "reading the changes…", palette),
        (Some(_), Some(Err(why))) => {
            return note(frame, area, &format!("No changes: {why}"), palette);
        }
        (Some(_), Some(Ok(changes))) => changes,
    };
    if changes.files.is_empty() {
        return note(
            frame,
            area,
            &format!(
                "No changes in {} since {}.",
                changes.environment,
                crate::cells::short_commit(&changes.base)
            ),
            palette,
        );
    }
    let list_width = (area.width / 3).clamp(12.min(area.width), 40);
    let [files_area, patch_area] =
        Layout::horizontal([Constraint::Length(list_width), Constraint::Fill(1)]).areas(area);
    let width = usize::from(files_area.width.saturating_sub(1));
    let chosen = state.diff.file.min(changes.files.len() - 1);
    let skip = chosen.saturating_sub(usize::from(files_area.height).saturating_sub(1));
    let files: Vec<Line<'static>> = changes
        .files
        .iter()
        .enumerate()
        .skip(skip)
        .take(usize::from(files_area.height))
        .map(|(i, f)| {
            let mark = match f.status {
                krad_bus::protocol::FileStatus::Added => "A",
                krad_bus::protocol::FileStatus::Deleted => "D",
                krad_bus::protocol::FileStatus::Renamed => "R",
                _ => "M",
            };
            let counts = format!(" +{} -{}", f.added, f.removed);
            let name_width = width.saturating_sub(counts.len() + 2);
            let line = Line::from(vec![
                Span::raw(format!("{mark} ")),
                Span::raw(fit(&f.path, name_width)),
                Span::styled(counts, palette.dim),
            ]);
            if i == chosen {
                line.patch_style(palette.selected)
            } else {
                line
            }
        })
        .collect();
    frame.render_widget(Paragraph::new(files), files_area);
    let path = &changes.files[chosen].path;
    let patch = changes.patch.as_deref().unwrap_or("");
    let section = file_section(patch, path);
    let mut lines: Vec<Line<'static>> = section
        .iter()
        .skip(state.diff.scroll)
        .take(usize::from(patch_area.height))
        .map(|line| {
            let style = match line.as_bytes().first() {
                Some(b'+') if !line.starts_with("+++") => palette.added,
                Some(b'-') if !line.starts_with("---") => palette.removed,
                Some(b'@') => palette.hunk,
                _ if line.starts_with("diff ") || line.starts_with("index ") => palette.bold,
                _ => palette.plain,
            };
            Line::from(Span::styled(clean(line), style))
        })
        .collect();
    if section.is_empty() {
        lines.push(Line::from(Span::styled(
            if changes.truncated {
                "(the patch was cut: too long)"
            } else {
                "(no patch for this file)"
            },
            palette.dim,
        )));
    }
    frame.render_widget(Paragraph::new(lines), patch_area);
}

/// The lines of the patch that are about `path`.
fn file_section<'p>(patch: &'p str, path: &str) -> Vec<&'p str> {
    let mut section = Vec::new();
    let mut inside = false;
    let b_side = format!(" b/{path}");
    for line in patch.lines() {
        if line.starts_with("diff --git ") {
            inside = line.ends_with(&b_side);
        }
        if inside {
            section.push(line);
        }
    }
    section
}

fn clean(line: &str) -> String {
    line.chars()
        .map(|c| if c == '\t' { ' ' } else { c })
        .filter(|c| !c.is_control())
        .collect()
}

fn asks(frame: &mut Frame<'_>, area: Rect, state: &State, palette: &Palette) {
    let asks = match (&state.asks.terminal, &state.asks.asks) {
        (None, _) => return note(frame, area, "Select an agent to see its asks.", palette),
        (Some(_), None) => return note(frame, area, "reading the asks…", palette),
        (Some(_), Some(Err(why))) => return note(frame, area, &format!("No asks: {why}"), palette),
        (Some(_), Some(Ok(asks))) => asks,
    };
    if asks.is_empty() {
        let asking = state
            .selected_agent()
            .is_some_and(|a| a.state == krad_bus::protocol::AgentState::Asking);
        let text = if asking {
            "No open ask here: it asks in its own terminal (⏎ attaches to answer it there)."
        } else {
            "No open ask."
        };
        return note(frame, area, text, palette);
    }
    let mut lines = Vec::new();
    for (i, ask) in asks.iter().enumerate() {
        let mut head = vec![
            Span::styled(format!("{} ", ask.ask), palette.dim),
            Span::styled(one_line(&ask.title), palette.bold),
        ];
        if let Some(tool) = &ask.tool {
            head.push(Span::styled(format!("  [{}]", tool.name), palette.dim));
        }
        lines.push(Line::from(head));
        if let Some(tool) = &ask.tool {
            let input = one_line(&tool.input.to_string());
            lines.push(Line::from(Span::raw(format!("  {input}"))));
        }
        if i == 0 {
            let mut options = vec![Span::styled("  a then ", palette.dim)];
            for (n, option) in ask.options.iter().enumerate().take(9) {
                options.push(Span::styled(format!("{}", n + 1), palette.key));
                options.push(Span::raw(format!(" {}  ", one_line(&option.label))));
            }
            if ask.options.is_empty() {
                options.push(Span::raw("type the answer"));
            }
            lines.push(Line::from(options));
        }
    }
    frame.render_widget(Paragraph::new(lines), area);
}
