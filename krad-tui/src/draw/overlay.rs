//! The dialogs drawn over the screen: the keys (`?`), a form, a yes/no
//! question, an ask's options. Each fits the screen, however small.
//!
//! Pure drawing; must never import the bus's client or the terminal's I/O.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Wrap};

use super::Palette;
use crate::cells::one_line;
use crate::state::{Mode, State};

/// Every key, for `?`.
pub(crate) const HELP: &[(&str, &str)] = &[
    ("↑ ↓  j k", "move; Home/End (g G) first and last"),
    (
        "⏎",
        "attach to its real TUI (Ctrl-\\ comes back); on a group: fold",
    ),
    ("space ← →", "fold and unfold a group"),
    ("/", "filter by text (⏎ keeps it, esc clears it)"),
    ("⇥ ⇤", "preview tabs: screen, diff, asks"),
    ("PgUp PgDn", "scroll the screen's scrollback or the patch"),
    ("← →", "in the diff tab: the previous and next file"),
    (
        "n",
        "new agent: profile, env or new worktree, name, prompt, sandbox",
    ),
    (
        "s",
        "send text (⏎ submits); --key C-c --key Escape sends keys",
    ),
    ("a", "answer the agent's first open ask (options on 1–9)"),
    (
        "x",
        "close the terminal, or the selected environment (asks first)",
    ),
    ("v", "run variants of a task"),
    (
        "p P",
        "pick a variant (P: the group's best): dry run, then y",
    ),
    ("b", "set the cost limit of an agent or a variant group"),
    ("r", "rename the agent"),
    ("R", "read the diff and the asks again"),
    ("q", "quit; every agent goes on running"),
];

/// Draws the dialog of the mode, if any.
pub(crate) fn draw(frame: &mut Frame<'_>, area: Rect, state: &State, palette: &Palette) {
    let (title, lines) = match &state.mode {
        Mode::List | Mode::Filter => return,
        Mode::Help => {
            let lines = HELP
                .iter()
                .map(|(key, what)| {
                    Line::from(vec![
                        Span::styled(format!("{key:>10}  "), palette.key),
                        Span::raw(*what),
                    ])
                })
                // No blank line before it: at 80×24 every line counts.
                .chain([Line::styled("any key closes this", palette.dim)])
                .collect();
            ("keys".to_owned(), lines)
        }
        Mode::Form(form) => {
            let mut lines: Vec<Line<'static>> = form
                .fields
                .iter()
                .enumerate()
                .map(|(i, field)| {
                    let focused = i == form.focus;
                    let label = if field.label.is_empty() {
                        field.hint.as_str()
                    } else {
                        field.label
                    };
                    let mut spans = vec![Span::styled(
                        format!("{:>13}: ", one_line(label)),
                        if focused { palette.key } else { palette.dim },
                    )];
                    if field.value.is_empty() && !focused {
                        if !field.label.is_empty() {
                            spans.push(Span::styled(field.hint.clone(), palette.dim));
                        }
                    } else {
                        spans.push(Span::raw(field.value.replace(char::is_control, " ")));
                    }
                    if focused {
                        spans.push(Span::styled("▏", palette.key));
                    }
                    Line::from(spans)
                })
                .collect();
            if let [only] = &form.fields[..]
                && !only.label.is_empty()
            {
                lines.push(Line::styled(only.hint.clone(), palette.dim));
            }
            lines.push(Line::raw(""));
            if let Some(error) = &form.error {
                lines.push(Line::styled(error.clone(), palette.error));
            }
            lines.push(Line::styled(
                "⏎ submit  ⇥ next field  esc cancel",
                palette.dim,
            ));
            (form.title.clone(), lines)
        }
        Mode::Confirm(confirm) => {
            let mut lines: Vec<Line<'static>> = confirm
                .lines
                .iter()
                .map(|l| {
                    if l.starts_with("CONFLICTS") {
                        Line::styled(l.clone(), palette.error)
                    } else {
                        Line::raw(l.clone())
                    }
                })
                .collect();
            lines.push(Line::raw(""));
            lines.push(Line::from(vec![
                Span::styled("y", palette.key),
                Span::raw(" yes   "),
                Span::styled("n", palette.key),
                Span::raw(" no"),
            ]));
            ("confirm".to_owned(), lines)
        }
        Mode::Choose(ask) => {
            let mut lines = vec![Line::styled(one_line(&ask.title), palette.bold)];
            if let Some(tool) = &ask.tool {
                lines.push(Line::raw(format!(
                    "{}: {}",
                    tool.name,
                    one_line(&tool.input.to_string())
                )));
            }
            lines.push(Line::raw(""));
            for (n, option) in ask.options.iter().enumerate().take(9) {
                lines.push(Line::from(vec![
                    Span::styled(format!("  {}  ", n + 1), palette.key),
                    Span::raw(one_line(&option.label)),
                ]));
            }
            lines.push(Line::raw(""));
            lines.push(Line::styled("a number answers, esc cancels", palette.dim));
            (format!("answer {}", ask.ask), lines)
        }
    };
    let width = area.width.saturating_sub(4).clamp(area.width.min(20), 90);
    let height = (lines.len() as u16 + 2).min(area.height);
    let x = area.x + (area.width - width) / 2;
    let y = area.y + (area.height - height) / 2;
    let dialog = Rect::new(x, y, width, height);
    frame.render_widget(Clear, dialog);
    let block = Block::bordered().title(Span::styled(format!(" {title} "), palette.bold));
    frame.render_widget(
        Paragraph::new(lines)
            .block(block)
            .wrap(Wrap { trim: false }),
        dialog,
    );
}
