//! The preview's screen: the selected terminal's screen as its Attach stream
//! redraws it (colours kept), with the scrollback Output gave before it, in a
//! `vt100` parser, and how far the user scrolled back.
//!
//! Pure state: the bytes arrive as events; must never import the terminal or
//! the bus's client.

use std::num::NonZeroU16;

/// How many lines of scrollback the preview keeps.
pub(crate) const SCROLLBACK: usize = 2_000;

/// The largest side of a screen the preview models (the app allows 1,000).
const MAX_SIDE: u16 = 1_000;

/// Where the preview is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Status {
    /// Nothing selected.
    Empty,
    /// Waiting for the first screen.
    Loading,
    /// Following the terminal live.
    Live,
    /// The stream ended: why.
    Ended(String),
}

/// The selected terminal's screen.
pub(crate) struct Preview {
    /// The terminal followed.
    pub(crate) target: Option<u64>,
    /// Bumped at each new target, so that late bytes of the last one are
    /// dropped.
    pub(crate) generation: u64,
    /// The screen, once its first message came.
    pub(crate) parser: Option<vt100::Parser>,
    /// Scrollback lines that came before the screen.
    pending: Vec<String>,
    /// Where it is.
    pub(crate) status: Status,
    /// Lines scrolled back from the live view (0: live).
    pub(crate) back: usize,
}

impl Default for Preview {
    fn default() -> Preview {
        Preview {
            target: None,
            generation: 0,
            parser: None,
            pending: Vec::new(),
            status: Status::Empty,
            back: 0,
        }
    }
}

impl std::fmt::Debug for Preview {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Preview")
            .field("target", &self.target)
            .field("generation", &self.generation)
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

impl PartialEq for Preview {
    fn eq(&self, other: &Preview) -> bool {
        self.target == other.target && self.generation == other.generation
    }
}

impl Preview {
    /// Follows `target` from now on.
    pub(crate) fn follow(&mut self, target: Option<u64>) {
        self.target = target;
        self.generation += 1;
        self.parser = None;
        self.pending.clear();
        self.back = 0;
        self.status = match target {
            Some(_) => Status::Loading,
            None => Status::Empty,
        };
    }

    /// Scrollback lines (Output's), oldest first, before the screen.
    pub(crate) fn scrollback(&mut self, generation: u64, lines: Vec<String>) {
        if generation == self.generation && self.parser.is_none() {
            self.pending = lines;
        }
    }

    /// The screen's first message: a terminal of `cols` × `rows` redrawn by `bytes`.
    pub(crate) fn screen(&mut self, generation: u64, cols: u16, rows: u16, bytes: &[u8]) {
        if generation != self.generation {
            return;
        }
        let side = |n: u16| NonZeroU16::new(n.clamp(1, MAX_SIDE)).unwrap_or(NonZeroU16::MIN);
        let mut parser = vt100::Parser::new(side(rows), side(cols), SCROLLBACK);
        // The scrollback first, pushed off the screen, then the screen.
        for line in self.pending.drain(..) {
            let clean: String = line.chars().filter(|c| !c.is_control()).collect();
            parser.process(clean.as_bytes());
            parser.process(b"\r\n");
        }
        for _ in 0..rows {
            parser.process(b"\r\n");
        }
        parser.process(bytes);
        self.parser = Some(parser);
        self.status = Status::Live;
    }

    /// What the program printed.
    pub(crate) fn output(&mut self, generation: u64, bytes: &[u8]) {
        if generation != self.generation {
            return;
        }
        if let Some(parser) = &mut self.parser {
            let back = parser.screen().scrollback();
            parser.process(bytes);
            // A user reading the scrollback stays where they were.
            if back > 0 {
                parser.screen_mut().set_scrollback(back);
            }
        }
    }

    /// The stream of this generation ended.
    pub(crate) fn ended(&mut self, generation: u64, why: String) {
        if generation == self.generation {
            self.status = Status::Ended(why);
        }
    }

    /// The stream ended, whatever its generation.
    pub(crate) fn end(&mut self, why: &str) {
        if self.target.is_some() {
            self.status = Status::Ended(why.to_owned());
        }
    }

    /// Scrolls back (`delta` > 0) or forward, in a view `height` rows high:
    /// first through the screen's rows above the view, then through the
    /// scrollback.
    pub(crate) fn scroll_by(&mut self, delta: isize, height: usize) {
        let Some(parser) = &mut self.parser else {
            return;
        };
        let above = live_start(parser.screen(), height);
        parser.screen_mut().set_scrollback(usize::MAX);
        let most = above + parser.screen().scrollback();
        self.back = (self.back as isize + delta).clamp(0, most as isize) as usize;
        parser
            .screen_mut()
            .set_scrollback(self.back.saturating_sub(above));
    }

    /// How far back the view is (0: the live view).
    pub(crate) fn scrolled(&self) -> usize {
        self.back
    }

    /// The first screen row the view shows, `height` rows high.
    pub(crate) fn first_row(&self, height: usize) -> u16 {
        let Some(parser) = &self.parser else {
            return 0;
        };
        let screen = parser.screen();
        if screen.scrollback() > 0 {
            return 0;
        }
        let above = live_start(screen, height);
        u16::try_from(above.saturating_sub(self.back)).unwrap_or(0)
    }
}

/// The first row of the live view: the rows down to the cursor or the last
/// text, the bottom ones when they do not all fit.
fn live_start(screen: &vt100::Screen, height: usize) -> usize {
    let (rows, cols) = screen.size();
    let last = (0..rows.get())
        .rev()
        .find(|&row| {
            (0..cols.get()).any(|col| screen.cell(row, col).is_some_and(|c| c.has_contents()))
        })
        .unwrap_or(0)
        .max(screen.cursor_position().0);
    (usize::from(last) + 1).saturating_sub(height)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrolling_goes_through_the_rows_above_the_view_then_the_scrollback() {
        let mut preview = Preview::default();
        preview.follow(Some(1));
        let generation = preview.generation;
        preview.scrollback(generation, vec!["older".into()]);
        let lines: String = (1..=30).map(|i| format!("line {i}\r\n")).collect();
        preview.screen(
            generation,
            20,
            40,
            format!("\x1b[H\x1b[2J{lines}").as_bytes(),
        );
        // 30 lines and the cursor under them: a view of 10 shows rows 21–30.
        assert_eq!(preview.first_row(10), 21);
        preview.scroll_by(5, 10);
        assert_eq!(preview.first_row(10), 16);
        preview.scroll_by(100, 10);
        let parser = preview.parser.as_ref().unwrap();
        assert!(parser.screen().scrollback() > 0);
        assert_eq!(preview.first_row(10), 0);
        preview.scroll_by(-1000, 10);
        assert_eq!((preview.scrolled(), preview.first_row(10)), (0, 21));
    }

    #[test]
    fn scrollback_then_screen_then_output() {
        let mut preview = Preview::default();
        preview.follow(Some(4));
        let generation = preview.generation;
        preview.scrollback(generation, vec!["old line".into()]);
        preview.screen(generation, 20, 3, b"\x1b[H\x1b[2Jhello");
        preview.output(generation, b"\x1b[31m world");
        let parser = preview.parser.as_ref().unwrap();
        assert!(parser.screen().contents().starts_with("hello world"));
        preview.scroll_by(100, 2);
        assert!(preview.scrolled() > 0);
        let parser = preview.parser.as_ref().unwrap();
        assert!(parser.screen().contents().contains("old line"));
        // Bytes of an earlier target are dropped.
        preview.follow(Some(5));
        preview.output(generation, b"late");
        assert!(preview.parser.is_none());
        // A zero size is no panic.
        let generation = preview.generation;
        preview.screen(generation, 0, 0, b"x");
        assert_eq!(preview.status, Status::Live);
    }
}
