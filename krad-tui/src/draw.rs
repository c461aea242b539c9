//! Drawing: the whole screen as a pure function of the [`State`] — header,
//! list, preview tabs, footer and any dialog over them. Fits any size (a
//! zero-sized area draws nothing); every text is clipped by ratatui, wide
//! characters included.
//!
//! Must never import the bus's client, threads or the terminal's I/O; reads
//! the state, never changes it.

mod list;
mod overlay;
mod preview;
mod style;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::state::{Link, Mode, State};
pub(crate) use style::Palette;

/// Where each part goes on a screen of `area`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Areas {
    pub(crate) header: Rect,
    pub(crate) list: Rect,
    pub(crate) tabs: Rect,
    pub(crate) preview: Rect,
    pub(crate) footer: Rect,
}

/// The layout: the list over the preview, which gets a little more room on
/// tall screens.
pub(crate) fn areas(area: Rect) -> Areas {
    let body = area.height.saturating_sub(3);
    let list = (body * 2 / 5).max(body.min(3));
    let [header, list, tabs, preview, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(list),
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(area);
    Areas {
        header,
        list,
        tabs,
        preview,
        footer,
    }
}

/// Draws the state.
pub(crate) fn draw(frame: &mut Frame<'_>, state: &State) {
    let area = frame.area();
    if area.width == 0 || area.height == 0 {
        return;
    }
    let palette = Palette::new(state.color);
    let areas = areas(area);
    header(frame, areas.header, state, &palette);
    list::draw(frame, areas.list, state, &palette);
    preview::tabs(frame, areas.tabs, state, &palette);
    preview::draw(frame, areas.preview, state, &palette);
    footer(frame, areas.footer, state, &palette);
    overlay::draw(frame, area, state, &palette);
}

fn header(frame: &mut Frame<'_>, area: Rect, state: &State, palette: &Palette) {
    let totals = state.totals();
    let mut spans = vec![
        Span::styled(" krad ", palette.title),
        Span::raw(" "),
        Span::styled(
            crate::cells::counted(totals.agents, "agent"),
            palette.plain.patch(palette.bold),
        ),
        Span::raw(" · "),
        Span::styled(
            format!("{} asking", totals.asking),
            palette.asking_count(totals.asking),
        ),
    ];
    if let Some(elsewhere) = state.asking_elsewhere.filter(|n| *n > 0) {
        spans.push(Span::raw(" · "));
        spans.push(Span::styled(
            format!("{elsewhere} asking in other apps (A)"),
            palette.asking_count(elsewhere),
        ));
    }
    spans.extend([
        Span::raw(" · "),
        Span::styled(format!("{} working", totals.working), palette.working),
        Span::raw(" · "),
        Span::raw(format!("${:.2}", totals.cost_usd)),
        Span::raw("  "),
    ]);
    match &state.link {
        Link::Up => {}
        Link::Connecting => spans.push(Span::styled("connecting… ", palette.dim)),
        Link::Down(_) => spans.push(Span::styled(" app stopped: reconnecting ", palette.alarm)),
    }
    if let Some(repo) = &state.repo {
        spans.push(Span::styled(repo.clone(), palette.dim));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// The keys the footer lists, most useful first (a narrow screen shows the first).
pub(crate) const FOOTER_KEYS: &[(&str, &str)] = &[
    ("⏎", "attach"),
    ("n", "new"),
    ("s", "send"),
    ("a", "answer"),
    ("x", "close"),
    ("/", "filter"),
    ("⇥", "tab"),
    ("v", "variants"),
    ("p", "pick"),
    ("b", "budget"),
    ("r", "rename"),
    ("A", "apps"),
    ("?", "help"),
    ("q", "quit"),
];

fn footer(frame: &mut Frame<'_>, area: Rect, state: &State, palette: &Palette) {
    let line = if state.mode == Mode::Filter {
        Line::from(vec![
            Span::styled("/", palette.key),
            Span::raw(state.filter.clone()),
            Span::styled("▏", palette.key),
            Span::styled("  ⏎ keep  esc clear", palette.dim),
        ])
    } else if let Some(flash) = &state.flash {
        let style = if flash.error {
            palette.error
        } else {
            palette.plain
        };
        Line::from(Span::styled(flash.text.clone(), style))
    } else {
        let mut spans = Vec::new();
        if !state.filter.is_empty() {
            spans.push(Span::styled(format!("/{} ", state.filter), palette.key));
        }
        // `?` and `q` always show: at the end when there is room, first otherwise.
        let mut keys: Vec<(&str, &str)> = FOOTER_KEYS.to_vec();
        let width: usize = keys
            .iter()
            .map(|(k, w)| k.chars().count() + w.len() + 2)
            .sum();
        if width > usize::from(area.width) {
            keys.rotate_right(2);
        }
        for (key, what) in keys {
            spans.push(Span::styled(key, palette.key));
            spans.push(Span::styled(format!(" {what}  "), palette.dim));
        }
        Line::from(spans)
    };
    frame.render_widget(Paragraph::new(line), area);
}

#[cfg(test)]
mod tests;
