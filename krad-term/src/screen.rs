//! The host-independent screen model: a terminal's parsed screen, cursor, title,
//! bracketed-paste mode and bounded scrollback, plus the signals (bell, OSC 9 /
//! OSC 777 notifications, title changes) seen in the bytes fed to it.
//!
//! [`Screen`] knows nothing about where the bytes come from (a pseudo-terminal, a
//! tmux pane...): a host feeds it every byte the program prints with
//! [`Screen::process`] and reads it back with [`Screen::snapshot`].
//!
//! The parser is Alacritty's (`alacritty_terminal`, its grid and vte's ANSI
//! processor): it parsed the same output 2–3× as fast as vt100 did (see
//! docs/PERFORMANCE.md, "Terminal output"). Scrollback is kept here rather than
//! in the parser, whose cells take ~24 bytes each: after each call the lines that
//! scrolled off the top of the main screen (not the alternate screen) are taken
//! out of the parser's history as trimmed text, at most `scrollback_lines` of
//! them, so a terminal with a full scrollback costs about its text, and a
//! snapshot only the lines it asks for. Erasing the scrollback (`CSI 3 J`)
//! clears them.
//!
//! Long runs of plain lines (see [`plain`]) mostly pass by the parser: only the
//! last screenful of them, and the colours they leave, are parsed.

mod grid;
mod plain;
mod recorder;
mod scan;

use std::collections::VecDeque;

use alacritty_terminal::Term;
use alacritty_terminal::grid::Dimensions;
use alacritty_terminal::index::Line;
use alacritty_terminal::term::{Config, TermMode};
use alacritty_terminal::vte::ansi::Processor;

use recorder::Recorder;
use scan::{BEL, CAN, ESC, SUB, Scan, after_escape_byte};

use crate::{Snapshot, TerminalEvent};

/// The longest OSC sequence body kept, in bytes. The rest of a longer one is
/// dropped (the parser would otherwise buffer an unterminated OSC without bound).
pub const MAX_OSC_BYTES: usize = 64 * 1024;

/// A desktop notification asked for with OSC 9 or OSC 777.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    /// OSC 777's title; `None` for OSC 9.
    pub title: Option<String>,
    /// The notification's text.
    pub body: String,
}

/// What some output signalled besides changing the screen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Signals {
    /// How many times the bell rang (BEL outside an OSC sequence).
    pub bells: usize,
    /// The desktop notifications asked for, in order.
    pub notifications: Vec<Notification>,
    /// The new window title, when it changed (the last one if it changed often).
    pub title: Option<String>,
    /// The states the program announced with `OSC 7501 ; state=… ST`, in order
    /// (what follows `state=`).
    pub agent_states: Vec<String>,
}

impl Signals {
    /// Whether nothing was signalled.
    pub fn is_empty(&self) -> bool {
        self.bells == 0
            && self.notifications.is_empty()
            && self.title.is_none()
            && self.agent_states.is_empty()
    }

    /// Adds `later`'s signals, seen after these, to these.
    pub fn merge(&mut self, later: Signals) {
        self.bells = self.bells.saturating_add(later.bells);
        self.notifications.extend(later.notifications);
        self.agent_states.extend(later.agent_states);
        if later.title.is_some() {
            self.title = later.title;
        }
    }

    /// The events for these signals: at most one [`TerminalEvent::Bell`] (bells are
    /// coalesced), then each notification, then each announced state, then the
    /// title.
    pub fn into_events(self) -> Vec<TerminalEvent> {
        let mut events = Vec::with_capacity(self.notifications.len() + self.agent_states.len() + 2);
        if self.bells > 0 {
            events.push(TerminalEvent::Bell);
        }
        events.extend(
            self.notifications
                .into_iter()
                .map(|n| TerminalEvent::Notification {
                    title: n.title,
                    body: n.body,
                }),
        );
        events.extend(self.agent_states.into_iter().map(TerminalEvent::AgentState));
        if let Some(title) = self.title {
            events.push(TerminalEvent::Title(title));
        }
        events
    }
}

/// A terminal's parsed screen.
pub struct Screen {
    term: Term<Recorder>,
    processor: Processor,
    /// What the parser signalled (bell, title) and the OSC bodies said.
    recorder: Recorder,
    scan: Scan,
    /// The body of the OSC sequence being read, up to [`MAX_OSC_BYTES`].
    osc: Vec<u8>,
    /// Lines that scrolled off the main screen, oldest first.
    scrollback: VecDeque<String>,
    scrollback_cap: usize,
    cols: u16,
    rows: u16,
    /// Before this index of the bytes being processed, the plain-lines path
    /// was tried and is not tried again (see [`Screen::plain_lines`]).
    plain_tried_until: usize,
    /// Whether plain lines may skip the parser (off only to compare in tests).
    plain_path: bool,
    /// Plain lines (and the start of one) not parsed yet: they change nothing
    /// but the screen and scrollback, so they wait for more, to pass by the
    /// parser together (see [`Screen::process_deferred`]).
    pending: Vec<u8>,
    /// Where the unfinished line of `pending` starts.
    pending_line: usize,
    /// Buffers the plain-lines path reuses: the lines found, a row's text.
    plain_spans: Vec<plain::Span>,
    plain_text: Vec<u8>,
    /// How many times plain lines skipped the parser (for the tests).
    #[cfg(test)]
    plain_skips: usize,
}

impl std::fmt::Debug for Screen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Screen")
            .field("cols", &self.cols)
            .field("rows", &self.rows)
            .field("scrollback", &self.scrollback_len())
            .finish_non_exhaustive()
    }
}

/// The parser's size.
struct Size {
    cols: u16,
    rows: u16,
}

impl Dimensions for Size {
    fn total_lines(&self) -> usize {
        self.rows.into()
    }
    fn screen_lines(&self) -> usize {
        self.rows.into()
    }
    fn columns(&self) -> usize {
        self.cols.into()
    }
}

/// The fewest columns the parser takes (Alacritty's minimum).
const MIN_COLS: u16 = 2;

impl Screen {
    /// A blank screen of `cols` × `rows` (each at least 1; the parser works
    /// on at least 2 columns) keeping at most `scrollback_lines` lines of
    /// scrollback.
    pub fn new(cols: u16, rows: u16, scrollback_lines: usize) -> Self {
        let (cols, rows) = (cols.max(1), rows.max(1));
        let recorder = Recorder::default();
        let config = Config {
            // Lines scrolled off in one call, at most: they are taken out after it.
            scrolling_history: scrollback_lines,
            ..Config::default()
        };
        let size = Size {
            cols: cols.max(MIN_COLS),
            rows,
        };
        Self {
            term: Term::new(config, &size, recorder.clone()),
            processor: Processor::new(),
            recorder,
            scan: Scan::Ground,
            osc: Vec::new(),
            scrollback: VecDeque::new(),
            scrollback_cap: scrollback_lines,
            cols,
            rows,
            plain_tried_until: 0,
            plain_path: true,
            pending: Vec::new(),
            pending_line: 0,
            plain_spans: Vec::new(),
            plain_text: Vec::new(),
            #[cfg(test)]
            plain_skips: 0,
        }
    }

    /// Feeds bytes the program printed; returns what they signalled.
    pub fn process(&mut self, bytes: &[u8]) -> Signals {
        let title_before = self.recorder.lock().title.clone();
        self.scan_and_feed(bytes);
        // A synchronized update (`CSI ? 2026 h`) is shown as it stands: the
        // screen is read between calls, and nothing would end it later.
        if self.processor.sync_bytes_count() > 0 {
            self.processor.stop_sync(&mut self.term);
        }
        self.take_scrolled();
        self.take_signals(&title_before)
    }

    /// As [`Screen::process`], but plain lines may wait, unparsed, for the
    /// bytes that follow (up to [`PENDING_BYTES`]): call [`Screen::flush`]
    /// before reading the screen. They signal nothing, so nothing signalled
    /// waits.
    pub fn process_deferred(&mut self, bytes: &[u8]) -> Signals {
        let may_wait = self.plain_path && matches!(self.scan, Scan::Ground);
        if self.pending.is_empty() {
            // Nothing waits: other output goes to the parser without a copy.
            let line = (may_wait && bytes.len() <= PENDING_BYTES)
                .then(|| plain::lines_through(bytes, 0))
                .flatten();
            let Some(line) = line else {
                return self.process(bytes);
            };
            self.pending.extend_from_slice(bytes);
            self.pending_line = line;
            return Signals::default();
        }
        let from = self.pending_line;
        self.pending.extend_from_slice(bytes);
        if may_wait
            && self.pending.len() <= PENDING_BYTES
            && let Some(line) = plain::lines_through(&self.pending, from)
        {
            self.pending_line = line;
            return Signals::default();
        }
        let pending = std::mem::take(&mut self.pending);
        self.pending_line = 0;
        let signals = self.process(&pending);
        // The buffer, for the next plain lines.
        self.pending = pending;
        self.pending.clear();
        signals
    }

    /// Parses the plain lines that wait (see [`Screen::process_deferred`]).
    pub fn flush(&mut self) {
        if !self.pending.is_empty() {
            let pending = std::mem::take(&mut self.pending);
            self.pending_line = 0;
            let _nothing_signalled = self.process(&pending);
            self.pending = pending;
            self.pending.clear();
        }
    }

    fn parse(&mut self, bytes: &[u8]) {
        self.processor.advance(&mut self.term, bytes);
    }

    /// Moves the lines that scrolled into the parser's history to the
    /// scrollback, as text.
    fn take_scrolled(&mut self) {
        let grid = self.term.grid_mut();
        let scrolled = grid.history_size();
        if scrolled == 0 {
            return;
        }
        for back in (1..=scrolled).rev() {
            // Once full, the oldest line's buffer takes the new one.
            let mut line = if self.scrollback.len() >= self.scrollback_cap {
                self.scrollback.pop_front().unwrap_or_default()
            } else {
                String::new()
            };
            line.clear();
            grid::row_text(&grid[Line(-(back as i32))], &mut line);
            self.scrollback.push_back(line);
        }
        grid.clear_history();
    }

    /// Feeds `bytes` to the parser, following the escape sequences on the way
    /// (see [`Scan`]) to erase the scrollback at a `CSI 3 J`, to bound OSC
    /// sequences to [`MAX_OSC_BYTES`] and to read the OSC bodies.
    fn scan_and_feed(&mut self, bytes: &[u8]) {
        // `fed`: the bytes before it were fed to the parser or dropped.
        let mut fed = 0;
        let mut i = 0;
        self.plain_tried_until = 0;
        while i < bytes.len() {
            match &mut self.scan {
                Scan::Ground
                    if bytes.len() - i >= PLAIN_MIN_BYTES && i >= self.plain_tried_until =>
                {
                    i = self.plain_lines(bytes, &mut fed, i);
                }
                Scan::Ground => match bytes[i..].iter().position(|&b| b == ESC) {
                    Some(p) => {
                        i += p + 1;
                        self.scan = Scan::escape();
                    }
                    None => i = bytes.len(),
                },
                Scan::Escape { intermediate } => {
                    let b = bytes[i];
                    i += 1;
                    if let Some(next) = after_escape_byte(b, *intermediate) {
                        if matches!(next, Scan::Osc { .. }) {
                            self.osc.clear();
                        }
                        self.scan = next;
                    }
                }
                Scan::Csi(csi) => {
                    let b = bytes[i];
                    i += 1;
                    if let Some(next) = csi.byte(b) {
                        let (screen, scrollback) = (csi.erases_screen(), csi.erases_scrollback());
                        if b == b'J' && (screen || scrollback) {
                            self.erase_at(bytes, &mut fed, i - 1, scrollback);
                        } else if b == b'h' && csi.private_mode() {
                            // It may switch to the alternate screen: the lines
                            // that scrolled off the main one are taken first
                            // (only the active screen's history can be read).
                            self.parse(&bytes[fed..i - 1]);
                            fed = i - 1;
                            self.take_scrolled();
                        }
                        self.scan = next;
                    }
                }
                Scan::Osc { len } => {
                    let len = *len;
                    i = self.scan_osc(bytes, i, len, &mut fed);
                }
            }
        }
        if fed < bytes.len() {
            self.parse(&bytes[fed..]);
        }
    }

    /// The fast path for plain lines (see [`plain`]), tried at `i` in the
    /// ground state with the parser fed up to `fed`; returns where the scan
    /// goes on (in the ground state), with the parser fed up to `fed` again.
    ///
    /// It feeds the parser line by line until a line feed is seen to scroll the
    /// whole screen into the history (the cursor on the bottom row of a
    /// full-screen region, on the main screen, with wrapping on and ASCII
    /// character sets). Then of the plain lines that follow, all but the last
    /// `rows` go straight to the scrollback, after the rows above the cursor;
    /// the parser gets their SGR sequences since the last reset, then the last
    /// `rows` lines, which scroll those rows (already kept) into its history.
    fn plain_lines(&mut self, bytes: &[u8], fed: &mut usize, i: usize) -> usize {
        let rows = usize::from(self.rows);
        let mut at = i;
        let mut probes = 0;
        let mut reset = None;
        loop {
            let span = match plain::line(bytes, at, &mut reset) {
                Ok(span) => span,
                Err(not) => {
                    // No plain line starts before the CR it stopped at.
                    self.plain_tried_until = match not {
                        plain::NotPlain::NoCr => bytes.len(),
                        plain::NotPlain::Before(cr) => cr + 1,
                    };
                    return at;
                }
            };
            // All but the line feed, then the line feed alone: did it scroll
            // the screen into the history?
            self.parse(&bytes[*fed..span.next - 1]);
            self.take_scrolled();
            self.parse(&bytes[span.next - 1..span.next]);
            *fed = span.next;
            at = span.next;
            let scrolled = self.term.grid().history_size() == 1;
            self.take_scrolled();
            if scrolled && self.plain_state() {
                break;
            }
            probes += 1;
            if probes > rows {
                // Not the state it needs (another region, the alternate
                // screen...): not again in this call.
                self.plain_tried_until = bytes.len();
                return at;
            }
        }
        // The plain lines that follow, and the last SGR reset among them.
        let mut spans = std::mem::take(&mut self.plain_spans);
        spans.clear();
        let mut last_reset = None;
        let mut end = at;
        loop {
            let mut reset = None;
            let Ok(span) = plain::line(bytes, end, &mut reset) else {
                break;
            };
            if let Some(reset) = reset {
                last_reset = Some((spans.len(), reset));
            }
            spans.push(span);
            end = span.next;
        }
        self.plain_tried_until = end;
        let skipped = self.plain_skip(bytes, at, &spans, last_reset);
        self.plain_spans = spans;
        match skipped {
            Some(end) => {
                *fed = end;
                end
            }
            None => at,
        }
    }

    /// Of `spans` (the plain lines from `at` on, the parser fed up to `at`),
    /// sends all but the last `rows` to the scrollback and feeds the parser
    /// their SGRs since `last_reset` (a line's index, the reset's start), then
    /// the last `rows`; returns where they end, or `None` when there are too
    /// few to be worth it.
    fn plain_skip(
        &mut self,
        bytes: &[u8],
        at: usize,
        spans: &[plain::Span],
        last_reset: Option<(usize, usize)>,
    ) -> Option<usize> {
        let rows = usize::from(self.rows);
        let cols = usize::from(self.cols.max(MIN_COLS));
        let skipped = spans.len().checked_sub(rows).filter(|&n| n > 0)?;
        let (kept_from_parser, fed) = spans.split_at(skipped);
        let skipped_end = fed.first()?.start;
        let end = fed.last()?.next;
        // The parser's history must hold every row the last lines scroll off.
        let scrolls: usize = fed.iter().map(|span| span.rows(cols)).sum();
        if skipped_end - at < PLAIN_MIN_SKIP || scrolls > self.scrollback_cap {
            return None;
        }
        #[cfg(test)]
        {
            self.plain_skips += 1;
        }
        // The rows above the cursor scroll off first, then the skipped lines'.
        let mut text = String::new();
        for line in 0..rows.saturating_sub(1) {
            text.clear();
            grid::row_text(&self.term.grid()[Line(line as i32)], &mut text);
            self.push_scrollback(&text);
        }
        let mut buffer = std::mem::take(&mut self.plain_text);
        for &span in kept_from_parser {
            plain::rows(bytes, span, cols, &mut buffer, |row| {
                self.push_scrollback(row)
            });
        }
        self.plain_text = buffer;
        // The attributes the skipped lines leave: their SGRs since the last reset.
        let sgr_from = match last_reset {
            Some((line, reset)) if line < skipped => reset,
            _ => at,
        };
        let sgrs = plain::sgr_sequences(&bytes[sgr_from..skipped_end]);
        self.parse(&sgrs);
        // The last `rows` lines scroll the rows kept above out of the screen.
        self.parse(&bytes[skipped_end..end]);
        self.take_scrolled_after(rows.saturating_sub(1));
        Some(end)
    }

    /// Whether the parser is in the state the plain-lines path assumes, beyond
    /// the full-screen scroll seen: cursor at the start of the bottom row, main
    /// screen, wrapping on, every character set ASCII, no synchronized update.
    fn plain_state(&self) -> bool {
        use alacritty_terminal::vte::ansi::{CharsetIndex, StandardCharset};
        let cursor = &self.term.grid().cursor;
        let mode = self.term.mode();
        let ascii = [
            CharsetIndex::G0,
            CharsetIndex::G1,
            CharsetIndex::G2,
            CharsetIndex::G3,
        ]
        .into_iter()
        .all(|g| cursor.charsets[g] == StandardCharset::Ascii);
        self.plain_path
            && cursor.point.line.0 == i32::from(self.rows) - 1
            && cursor.point.column.0 == 0
            && !cursor.input_needs_wrap
            && mode.contains(TermMode::LINE_WRAP)
            && !mode.contains(TermMode::ALT_SCREEN)
            && ascii
            && self.processor.sync_bytes_count() == 0
    }

    /// Adds a line to the scrollback (in the oldest line's buffer, once the
    /// scrollback is full).
    fn push_scrollback(&mut self, text: &str) {
        if self.scrollback_cap == 0 {
            return;
        }
        let mut line = if self.scrollback.len() >= self.scrollback_cap {
            self.scrollback.pop_front().unwrap_or_default()
        } else {
            String::new()
        };
        line.clear();
        line.push_str(text);
        self.scrollback.push_back(line);
    }

    /// As [`Screen::take_scrolled`], the first `stale` lines of the history
    /// dropped (rows already kept).
    fn take_scrolled_after(&mut self, stale: usize) {
        let scrolled = self.term.grid().history_size();
        let mut text = String::new();
        for back in (1..=scrolled.saturating_sub(stale)).rev() {
            text.clear();
            grid::row_text(&self.term.grid()[Line(-(back as i32))], &mut text);
            self.push_scrollback(&text);
        }
        self.term.grid_mut().clear_history();
    }

    /// Feeds the bytes up to the `J` at `j` that ends a `CSI 2 J` or `CSI 3 J`,
    /// takes the lines scrolled off before it, then feeds the `J`. Lines the
    /// parser pushes into its history when it erases the screen are dropped (the
    /// screen is erased, not scrolled); `CSI 3 J` erases the scrollback exactly
    /// here: lines that scrolled off before go, later ones stay.
    fn erase_at(&mut self, bytes: &[u8], fed: &mut usize, j: usize, scrollback: bool) {
        if *fed < j {
            self.parse(&bytes[*fed..j]);
        }
        self.take_scrolled();
        self.parse(&bytes[j..=j]);
        *fed = j + 1;
        self.term.grid_mut().clear_history();
        if scrollback {
            self.scrollback.clear();
        }
    }

    /// Reads an OSC sequence's body from `bytes[i..]`, `len` bytes of it already
    /// read, up to its end or the end of `bytes`; returns where it stopped.
    #[inline]
    fn scan_osc(&mut self, bytes: &[u8], i: usize, len: usize, fed: &mut usize) -> usize {
        let end = bytes[i..]
            .iter()
            .position(|&b| matches!(b, BEL | CAN | SUB | ESC))
            .map_or(bytes.len(), |p| i + p);
        let run = end - i;
        let room = MAX_OSC_BYTES.saturating_sub(len);
        self.osc.extend_from_slice(&bytes[i..i + run.min(room)]);
        if run > room {
            // Keep the first bytes up to the limit, drop the rest.
            self.parse(&bytes[*fed..i + room]);
            *fed = end;
        }
        self.scan = match bytes.get(end) {
            None => Scan::Osc {
                len: len.saturating_add(run),
            },
            Some(&ESC) => Scan::escape(),
            Some(_) => Scan::Ground,
        };
        // BEL or ESC (the start of ST) ends the sequence; CAN and SUB cancel it.
        if matches!(bytes.get(end), Some(&BEL | &ESC)) {
            self.recorder.lock().osc(&self.osc);
            self.osc.clear();
            self.osc.shrink_to(OSC_KEPT);
        }
        end + usize::from(end < bytes.len())
    }

    /// What was recorded since the last call: bells, notifications, announced
    /// states, and the title if it is no longer `title_before`.
    fn take_signals(&mut self, title_before: &str) -> Signals {
        let mut recorded = self.recorder.lock();
        let title = (recorded.title != title_before).then(|| recorded.title.clone());
        Signals {
            bells: std::mem::take(&mut recorded.bells),
            notifications: std::mem::take(&mut recorded.notifications),
            title,
            agent_states: std::mem::take(&mut recorded.agent_states),
        }
    }

    /// Resizes the screen to `cols` × `rows` (each at least 1). Rows pushed off the
    /// top go to the scrollback.
    pub fn resize(&mut self, cols: u16, rows: u16) {
        let (cols, rows) = (cols.max(1), rows.max(1));
        self.term.resize(Size {
            cols: cols.max(MIN_COLS),
            rows,
        });
        self.take_scrolled();
        (self.cols, self.rows) = (cols, rows);
    }

    /// Columns and rows.
    pub fn size(&self) -> (u16, u16) {
        (self.cols, self.rows)
    }

    /// The window title (empty when never set).
    pub fn title(&self) -> String {
        self.recorder.lock().title.clone()
    }

    /// Whether the program turned bracketed paste on.
    pub fn bracketed_paste(&self) -> bool {
        self.term.mode().contains(TermMode::BRACKETED_PASTE)
    }

    /// How many lines of scrollback are kept now.
    pub fn scrollback_len(&self) -> usize {
        self.scrollback.len()
    }

    /// Escape sequences that redraw the screen on a terminal of its size: a clear,
    /// every cell with its attributes, the cursor, and the input modes the program
    /// set (application cursor keys and keypad, bracketed paste, mouse). For
    /// attachers (see [`crate::Attachment`]).
    pub fn redraw(&self) -> Vec<u8> {
        grid::redraw(&self.term)
    }

    /// The screen now, with the last `scrollback_lines` lines of scrollback at most.
    pub fn snapshot(&self, scrollback_lines: usize) -> Snapshot {
        let kept = &self.scrollback;
        let returned = scrollback_lines.min(kept.len());
        let point = self.term.grid().cursor.point;
        let cursor_col = u16::try_from(point.column.0).unwrap_or(u16::MAX);
        Snapshot {
            screen: grid::screen_text(&self.term),
            cursor: (
                u16::try_from(point.line.0).unwrap_or(0),
                cursor_col.min(self.cols.saturating_sub(1)),
            ),
            scrollback: kept.iter().skip(kept.len() - returned).cloned().collect(),
            truncated: kept.len() > returned,
            title: self.title(),
            size: (self.cols, self.rows),
            bracketed_paste: self.bracketed_paste(),
            application_cursor: self.term.mode().contains(TermMode::APP_CURSOR),
        }
    }
}

/// The fewest bytes left in a call for the plain-lines path to be tried.
const PLAIN_MIN_BYTES: usize = 4096;

/// The most bytes of plain lines that wait for more before they are parsed.
const PENDING_BYTES: usize = 128 * 1024;

/// The fewest bytes of plain lines worth keeping from the parser.
const PLAIN_MIN_SKIP: usize = 1024;

/// The OSC buffer's capacity kept after a sequence (a longer one's is freed).
const OSC_KEPT: usize = 1024;

#[cfg(test)]
mod tests;
