//! The dialogs drawn over the screen: the keys (`?`), a form, a yes/no
//! question, an ask's options, the apps to switch to (`A`). Each fits the screen, however small.
//!
//! Pure drawing; must never import the bus's client or the terminal's I/O.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Wrap};

use super::Palette;
use crate::cells::{counted, one_line};
use crate::state::apps::AppsPicker;
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
    ("A", "switch to another repository's app on this machine"),
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
        Mode::Apps(picker) => ("apps on this machine".to_owned(), apps(picker, palette)),
    };
    let width = area.width.saturating_sub(4).clamp(area.width.min(20), 90);
    let block = Block::bordered().title(Span::styled(format!(" {title} "), palette.bold));
    let paragraph = Paragraph::new(lines)
        .block(block)
        .wrap(Wrap { trim: false });
    // As tall as its lines once wrapped inside the borders (a long line takes
    // more than one row: counting lines would cut the last ones, the keys).
    let rows = paragraph.line_count(width.saturating_sub(2));
    let height = u16::try_from(rows).unwrap_or(u16::MAX).min(area.height);
    let x = area.x + (area.width - width) / 2;
    let y = area.y + (area.height - height) / 2;
    let dialog = Rect::new(x, y, width, height);
    frame.render_widget(Clear, dialog);
    frame.render_widget(paragraph, dialog);
}

/// The picker's lines: an app a line, the selected one marked, the screen's
/// own said.
fn apps(picker: &AppsPicker, palette: &Palette) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    match &picker.rows {
        None => lines.push(Line::styled(
            "looking for the apps running on this machine…",
            palette.dim,
        )),
        Some(rows) if rows.is_empty() => lines.push(Line::raw(
            "no app is running on this machine (`krad serve` in a repository starts one)",
        )),
        Some(rows) => {
            for (i, row) in rows.iter().enumerate() {
                let selected = i == picker.selected;
                let agents = match row.agents {
                    Some((agents, 0)) => counted(agents, "agent"),
                    Some((agents, asking)) => {
                        format!("{}, {asking} asking", counted(agents, "agent"))
                    }
                    None => "did not answer".to_owned(),
                };
                let mut spans = vec![
                    Span::styled(if selected { "▸ " } else { "  " }, palette.key),
                    Span::styled(
                        one_line(&row.root),
                        if selected {
                            palette.bold
                        } else {
                            palette.plain
                        },
                    ),
                    Span::styled(format!("  {agents}"), palette.dim),
                ];
                if row.current {
                    spans.push(Span::styled("  (this screen)", palette.dim));
                }
                lines.push(Line::from(spans));
            }
        }
    }
    lines.push(Line::raw(""));
    lines.push(Line::styled(
        "⏎ switch to it  ↑ ↓ move  esc cancel",
        palette.dim,
    ));
    lines
}
