//! The list: a header row, then group headers and agents, the selection
//! reversed and an agent that just started asking highlighted; columns
//! chosen to fit the width (MESSAGE takes what is left), a banner when the
//! app is gone or there is nothing to show.
//!
//! Pure drawing; must never import the bus's client or the terminal's I/O.

use std::time::SystemTime;

use krad_bus::protocol::{AgentRecord, AgentState};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use unicode_width::UnicodeWidthChar;

use super::Palette;
use crate::cells;
use crate::state::rows::{self, RowKey};
use crate::state::{Link, State};

/// A column: its header, width, and from which screen width it shows.
struct Column {
    header: &'static str,
    width: usize,
    from: u16,
    cell: fn(&AgentRecord, SystemTime) -> String,
}

const COLUMNS: &[Column] = &[
    Column {
        header: "ID",
        width: 4,
        from: 0,
        cell: |r, _| r.terminal.to_string(),
    },
    Column {
        header: "NAME",
        width: 12,
        from: 0,
        cell: |r, _| cells::name(r),
    },
    Column {
        header: "STATE",
        width: 8,
        from: 0,
        cell: |r, _| r.state.as_str().to_owned(),
    },
    Column {
        header: "SOURCE",
        width: 7,
        from: 60,
        cell: |r, _| r.state_source.as_str().to_owned(),
    },
    Column {
        header: "SINCE",
        width: 5,
        from: 50,
        cell: |r, now| cells::since(r, now),
    },
    Column {
        header: "ENV/GROUP",
        width: 12,
        from: 100,
        cell: |r, _| cells::place(r),
    },
    Column {
        header: "HOST",
        width: 8,
        from: 120,
        cell: |r, _| r.host.clone().unwrap_or_else(|| "-".into()),
    },
    Column {
        header: "CPU",
        width: 6,
        from: 70,
        cell: |r, _| cells::cpu(r),
    },
    Column {
        header: "MEM",
        width: 7,
        from: 76,
        cell: |r, _| cells::memory(r),
    },
    Column {
        header: "COST",
        width: 8,
        from: 88,
        cell: |r, _| cells::cost(r),
    },
];

/// Text cut or padded to exactly `width` columns of the screen, wide
/// characters counted as two (one cut in half becomes a space).
pub(crate) fn fit(text: &str, width: usize) -> String {
    let shown = || text.chars().filter(|c| !c.is_control());
    let total: usize = shown().map(|c| c.width().unwrap_or(0)).sum();
    let mut out = String::with_capacity(width + 3);
    let mut used = 0;
    if total <= width {
        out.extend(shown());
        used = total;
    } else if width > 0 {
        let room = width - 1;
        for c in shown() {
            let w = c.width().unwrap_or(0);
            if used + w > room {
                break;
            }
            out.push(c);
            used += w;
        }
        out.push('…');
        used += 1;
    }
    out.extend(std::iter::repeat_n(' ', width.saturating_sub(used)));
    out
}

/// Draws the list.
pub(crate) fn draw(frame: &mut Frame<'_>, area: Rect, state: &State, palette: &Palette) {
    if area.height == 0 || area.width == 0 {
        return;
    }
    let columns: Vec<&Column> = COLUMNS.iter().filter(|c| area.width >= c.from).collect();
    let fixed: usize = columns.iter().map(|c| c.width + 1).sum();
    let message = usize::from(area.width).saturating_sub(fixed);
    let mut lines = Vec::with_capacity(usize::from(area.height));
    let mut head = String::new();
    for column in &columns {
        head.push_str(&fit(column.header, column.width));
        head.push(' ');
    }
    head.push_str(&fit("MESSAGE", message));
    lines.push(Line::from(Span::styled(head, palette.dim)));
    let room = usize::from(area.height) - 1;
    let banner = match &state.link {
        Link::Down(why) => Some(format!(
            "The app is not reachable ({why}); reconnecting — the list shows what it last said."
        )),
        Link::Connecting if state.rows.is_empty() => Some("connecting to the app…".to_owned()),
        _ if state.agents.is_empty() => {
            Some("No agents yet: n starts one (or krad spawn).".to_owned())
        }
        _ if state.rows.is_empty() => Some(format!("No agent matches /{}", state.filter)),
        _ => None,
    };
    let mut room = room;
    if let Some(banner) = banner {
        let style = if matches!(state.link, Link::Down(_)) {
            palette.alarm
        } else {
            palette.dim
        };
        lines.push(Line::from(Span::styled(
            fit(&banner, usize::from(area.width)),
            style,
        )));
        room = room.saturating_sub(1);
    }
    let selected = state.selected_index();
    for (index, key) in state
        .rows
        .iter()
        .enumerate()
        .skip(state.list_offset)
        .take(room)
    {
        let chosen = selected == Some(index);
        let line = match key {
            RowKey::Group(group) => group_line(state, group, usize::from(area.width), palette),
            RowKey::Agent(id) => match state.agents.get(id) {
                Some(record) => agent_line(record, &columns, message, state, palette),
                None => Line::raw(""),
            },
        };
        let line = if chosen {
            line.patch_style(palette.selected)
        } else if matches!(key, RowKey::Agent(id) if state.alerted.contains(id)) {
            line.patch_style(palette.alerted)
        } else {
            line
        };
        lines.push(line);
    }
    frame.render_widget(Paragraph::new(lines), area);
}

fn group_line(state: &State, key: &str, width: usize, palette: &Palette) -> Line<'static> {
    let members: Vec<&AgentRecord> = state
        .agents
        .values()
        .filter(|a| rows::group_key(a) == key)
        .collect();
    let asking = members
        .iter()
        .filter(|a| a.state == AgentState::Asking)
        .count();
    let working = members
        .iter()
        .filter(|a| a.state == AgentState::Working)
        .count();
    let folded = state.collapsed.contains(key);
    let mut text = format!(
        "{} {}  {} agent{}",
        if folded { "▸" } else { "▾" },
        rows::group_title(key),
        members.len(),
        if members.len() == 1 { "" } else { "s" },
    );
    if asking > 0 {
        text.push_str(&format!(", {asking} asking"));
    }
    if working > 0 {
        text.push_str(&format!(", {working} working"));
    }
    if let Some(environment) = rows::environment_of_group(key)
        && let Some(info) = state.environments.iter().find(|e| e.name == environment)
        && let Some(branch) = &info.branch
    {
        text.push_str(&format!("  [{branch}]"));
    }
    Line::from(Span::styled(fit(&text, width), palette.group))
}

fn agent_line(
    record: &AgentRecord,
    columns: &[&Column],
    message: usize,
    state: &State,
    palette: &Palette,
) -> Line<'static> {
    let mut spans = Vec::with_capacity(columns.len() + 1);
    for column in columns {
        let text = fit(&(column.cell)(record, state.now), column.width) + " ";
        let style = if column.header == "STATE" {
            palette.state(record.state)
        } else {
            Style::new()
        };
        spans.push(Span::styled(text, style));
    }
    spans.push(Span::raw(fit(&cells::message(record), message)));
    Line::from(spans)
}

#[cfg(test)]
mod tests {
    use super::fit;

    #[test]
    fn fit_counts_screen_columns() {
        assert_eq!(fit("abc", 5), "abc  ");
        assert_eq!(fit("abcdef", 4), "abc…");
        assert_eq!(fit("日本語", 5), "日本…");
        assert_eq!(fit("日本語", 4), "日… ");
        assert_eq!(fit("x", 0), "");
        assert_eq!(fit("a\x1b[31mb", 6), "a[31mb");
    }
}
