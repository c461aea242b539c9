//! Reading the parser's grid back: a row as text (for snapshots and for the
//! scrollback), and the escape sequences that redraw the whole screen, with its
//! colours and attributes, cursor and input modes (for attachers).

use std::fmt::Write as _;

use alacritty_terminal::grid::{Dimensions as _, Row};
use alacritty_terminal::index::{Column, Line};
use alacritty_terminal::term::cell::{Cell, Flags};
use alacritty_terminal::term::{Term, TermMode};
use alacritty_terminal::vte::ansi::{Color, NamedColor};

/// Appends row `row`'s text to `out`, trailing blanks trimmed: each character
/// once (the spacer after a wide one is skipped) with its combining marks.
pub(super) fn row_text(row: &Row<Cell>, out: &mut String) {
    let start = out.len();
    for cell in &row[..] {
        if cell
            .flags
            .intersects(Flags::WIDE_CHAR_SPACER | Flags::LEADING_WIDE_CHAR_SPACER)
        {
            continue;
        }
        out.push(cell.c);
        if let Some(marks) = cell.zerowidth() {
            out.extend(marks);
        }
    }
    let kept = out[start..].trim_end().len();
    out.truncate(start + kept);
}

/// The visible screen's rows as text, trailing blank rows dropped.
pub(super) fn screen_text<T>(term: &Term<T>) -> String {
    let grid = term.grid();
    let mut lines = Vec::with_capacity(grid.screen_lines());
    for line in 0..grid.screen_lines() {
        let mut text = String::new();
        row_text(&grid[Line(line as i32)], &mut text);
        lines.push(text);
    }
    while lines.last().is_some_and(String::is_empty) {
        lines.pop();
    }
    lines.join("\n")
}

/// Escape sequences that redraw `term`'s screen on a terminal of its size:
/// reset and clear, every row's cells with their attributes, the input modes
/// the program set, the attributes it prints with now and the cursor.
pub(super) fn redraw<T>(term: &Term<T>) -> Vec<u8> {
    let grid = term.grid();
    let mut out = String::from("\x1b[m\x1b[H\x1b[2J");
    let mut pen = Pen::default();
    for line in 0..grid.screen_lines() {
        let row = &grid[Line(line as i32)];
        // Only up to the last cell that shows something.
        let end = (0..grid.columns())
            .rev()
            .find(|&c| !blank(&row[Column(c)]))
            .map_or(0, |c| c + 1);
        if end == 0 {
            continue;
        }
        let _ = write!(out, "\x1b[{};1H", line + 1);
        for cell in &row[..Column(end)] {
            if cell
                .flags
                .intersects(Flags::WIDE_CHAR_SPACER | Flags::LEADING_WIDE_CHAR_SPACER)
            {
                continue;
            }
            pen.change_to(Pen::of(cell), &mut out);
            out.push(cell.c);
            if let Some(marks) = cell.zerowidth() {
                out.extend(marks);
            }
        }
    }
    modes(*term.mode(), &mut out);
    pen.change_to(Pen::of(&grid.cursor.template), &mut out);
    let point = grid.cursor.point;
    let _ = write!(out, "\x1b[{};{}H", point.line.0 + 1, point.column.0 + 1);
    if !term.mode().contains(TermMode::SHOW_CURSOR) {
        out.push_str("\x1b[?25l");
    }
    out.into_bytes()
}

/// A cell that shows nothing: a space with the default background and no
/// attribute that draws on a blank.
fn blank(cell: &Cell) -> bool {
    cell.c == ' '
        && cell.bg == Color::Named(NamedColor::Background)
        && !cell
            .flags
            .intersects(Flags::INVERSE | Flags::ALL_UNDERLINES | Flags::STRIKEOUT)
}

/// The private modes a program set that change what the keyboard and mouse send.
fn modes(mode: TermMode, out: &mut String) {
    let set: [(TermMode, &str); 7] = [
        (TermMode::APP_CURSOR, "\x1b[?1h"),
        (TermMode::APP_KEYPAD, "\x1b="),
        (TermMode::BRACKETED_PASTE, "\x1b[?2004h"),
        (TermMode::MOUSE_REPORT_CLICK, "\x1b[?1000h"),
        (TermMode::MOUSE_DRAG, "\x1b[?1002h"),
        (TermMode::MOUSE_MOTION, "\x1b[?1003h"),
        (TermMode::SGR_MOUSE, "\x1b[?1006h"),
    ];
    for (flag, sequence) in set {
        if mode.contains(flag) {
            out.push_str(sequence);
        }
    }
}

/// The attributes a cell is drawn with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pen {
    fg: Color,
    bg: Color,
    flags: Flags,
}

impl Default for Pen {
    fn default() -> Self {
        Self {
            fg: Color::Named(NamedColor::Foreground),
            bg: Color::Named(NamedColor::Background),
            flags: Flags::empty(),
        }
    }
}

/// The flags that are attributes (not layout).
const ATTRIBUTES: Flags = Flags::BOLD
    .union(Flags::DIM)
    .union(Flags::ITALIC)
    .union(Flags::UNDERLINE)
    .union(Flags::DOUBLE_UNDERLINE)
    .union(Flags::UNDERCURL)
    .union(Flags::DOTTED_UNDERLINE)
    .union(Flags::DASHED_UNDERLINE)
    .union(Flags::INVERSE)
    .union(Flags::HIDDEN)
    .union(Flags::STRIKEOUT);

impl Pen {
    fn of(cell: &Cell) -> Self {
        Self {
            fg: cell.fg,
            bg: cell.bg,
            flags: cell.flags & ATTRIBUTES,
        }
    }

    /// Writes the SGR sequence that goes from this pen to `to` (a reset, then
    /// what `to` has), if they differ.
    fn change_to(&mut self, to: Pen, out: &mut String) {
        if *self == to {
            return;
        }
        out.push_str("\x1b[0");
        let sgr: [(Flags, &str); 11] = [
            (Flags::BOLD, ";1"),
            (Flags::DIM, ";2"),
            (Flags::ITALIC, ";3"),
            (Flags::UNDERLINE, ";4"),
            (Flags::DOUBLE_UNDERLINE, ";21"),
            (Flags::UNDERCURL, ";4:3"),
            (Flags::DOTTED_UNDERLINE, ";4:4"),
            (Flags::DASHED_UNDERLINE, ";4:5"),
            (Flags::INVERSE, ";7"),
            (Flags::HIDDEN, ";8"),
            (Flags::STRIKEOUT, ";9"),
        ];
        for (flag, code) in sgr {
            if to.flags.contains(flag) {
                out.push_str(code);
            }
        }
        colour(to.fg, 30, out);
        colour(to.bg, 40, out);
        out.push('m');
        *self = to;
    }
}

/// The SGR parameters of a foreground (`base` 30) or background (40) colour;
/// nothing for the default one.
fn colour(color: Color, base: u16, out: &mut String) {
    match color {
        Color::Named(named) => {
            let n = named as usize;
            let index = match n {
                0..=15 => n,
                // The dim variants of the eight colours.
                259..=266 => n - 259,
                _ => return,
            };
            let _ = if index < 8 {
                write!(out, ";{}", base as usize + index)
            } else {
                write!(out, ";{}", base as usize + 60 + index - 8)
            };
        }
        Color::Indexed(index) => {
            let _ = write!(out, ";{};5;{index}", base + 8);
        }
        Color::Spec(rgb) => {
            let _ = write!(out, ";{};2;{};{};{}", base + 8, rgb.r, rgb.g, rgb.b);
        }
    }
}
