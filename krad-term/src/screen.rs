//! The host-independent screen model: a terminal's parsed screen, cursor, title,
//! bracketed-paste mode and bounded scrollback, plus the signals (bell, OSC 9 /
//! OSC 777 notifications, title changes) seen in the bytes fed to it.
//!
//! [`Screen`] knows nothing about where the bytes come from (a pseudo-terminal, a
//! tmux pane...): a host feeds it every byte the program prints with
//! [`Screen::process`] and reads it back with [`Screen::snapshot`].
//!
//! Scrollback is kept here rather than in the vt100 parser: lines that scroll off
//! the top of the main screen (not the alternate screen) are stored as trimmed
//! text, at most `scrollback_lines` of them, so a snapshot costs only the lines it
//! asks for. Erasing the scrollback (`CSI 3 J`) clears them.

mod recorder;

use recorder::Recorder;

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
    parser: vt100::Parser<Recorder>,
    scan: Scan,
}

impl std::fmt::Debug for Screen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (cols, rows) = self.size();
        f.debug_struct("Screen")
            .field("cols", &cols)
            .field("rows", &rows)
            .field("title", &self.title())
            .field("scrollback", &self.scrollback_len())
            .finish_non_exhaustive()
    }
}

impl Screen {
    /// A blank screen of `cols` × `rows` (each at least 1) keeping at most
    /// `scrollback_lines` lines of scrollback.
    pub fn new(cols: u16, rows: u16, scrollback_lines: usize) -> Self {
        let recorder = Recorder {
            scrollback_cap: scrollback_lines,
            ..Recorder::default()
        };
        // The parser keeps no scrollback of its own: `Recorder::on_scroll` does.
        let parser = vt100::Parser::new_with_callbacks(nonzero(rows), nonzero(cols), 0, recorder);
        Self {
            parser,
            scan: Scan::Ground,
        }
    }

    /// Feeds bytes the program printed; returns what they signalled.
    pub fn process(&mut self, bytes: &[u8]) -> Signals {
        let title_before = self.parser.callbacks().title.clone();
        self.scan_and_feed(bytes);
        self.take_signals(&title_before)
    }

    /// Feeds `bytes` to the parser, following the escape sequences on the way
    /// (see [`Scan`]) to erase the scrollback at a `CSI 3 J` and to bound OSC
    /// sequences to [`MAX_OSC_BYTES`].
    fn scan_and_feed(&mut self, bytes: &[u8]) {
        // `fed`: the bytes before it were fed to the parser or dropped.
        let mut fed = 0;
        let mut i = 0;
        while i < bytes.len() {
            match &mut self.scan {
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
                        self.scan = next;
                    }
                }
                Scan::Csi(csi) => {
                    let b = bytes[i];
                    i += 1;
                    if let Some(next) = csi.byte(b) {
                        if b == b'J' && csi.erases_scrollback() {
                            // Erase the scrollback exactly here: lines that
                            // scrolled off before go, later ones stay.
                            self.parser.process(&bytes[fed..i]);
                            fed = i;
                            self.parser.callbacks_mut().scrollback.clear();
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
            self.parser.process(&bytes[fed..]);
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
        if run > room {
            // Keep the first bytes up to the limit, drop the rest.
            self.parser.process(&bytes[*fed..i + room]);
            *fed = end;
        }
        self.scan = match bytes.get(end) {
            None => Scan::Osc {
                len: len.saturating_add(run),
            },
            Some(&ESC) => Scan::escape(),
            Some(_) => Scan::Ground,
        };
        end + usize::from(end < bytes.len())
    }

    /// What the parser recorded since the last call: bells, notifications,
    /// announced states, and the title if it is no longer `title_before`.
    fn take_signals(&mut self, title_before: &str) -> Signals {
        let recorder = self.parser.callbacks_mut();
        let title = (recorder.title != title_before).then(|| recorder.title.clone());
        Signals {
            bells: std::mem::take(&mut recorder.bells),
            notifications: std::mem::take(&mut recorder.notifications),
            title,
            agent_states: std::mem::take(&mut recorder.agent_states),
        }
    }

    /// Resizes the screen to `cols` × `rows` (each at least 1). Rows pushed off the
    /// top go to the scrollback.
    pub fn resize(&mut self, cols: u16, rows: u16) {
        self.parser.set_size(nonzero(rows), nonzero(cols));
    }

    /// Columns and rows.
    pub fn size(&self) -> (u16, u16) {
        let (rows, cols) = self.parser.screen().size();
        (cols.get(), rows.get())
    }

    /// The window title (empty when never set).
    pub fn title(&self) -> &str {
        &self.parser.callbacks().title
    }

    /// Whether the program turned bracketed paste on.
    pub fn bracketed_paste(&self) -> bool {
        self.parser.screen().bracketed_paste()
    }

    /// How many lines of scrollback are kept now.
    pub fn scrollback_len(&self) -> usize {
        self.parser.callbacks().scrollback.len()
    }

    /// Escape sequences that redraw the screen on a terminal of its size: a clear,
    /// every cell with its attributes, the cursor, and the input modes the program
    /// set (application cursor keys and keypad, bracketed paste, mouse). For
    /// attachers (see [`crate::Attachment`]).
    pub fn redraw(&self) -> Vec<u8> {
        self.parser.screen().state_formatted().into_bytes()
    }

    /// The screen now, with the last `scrollback_lines` lines of scrollback at most.
    pub fn snapshot(&self, scrollback_lines: usize) -> Snapshot {
        let screen = self.parser.screen();
        let (cols, rows) = self.size();
        let mut lines: Vec<String> = screen
            .rows(0, cols)
            .map(|mut row| {
                row.truncate(row.trim_end().len());
                row
            })
            .collect();
        while lines.last().is_some_and(String::is_empty) {
            lines.pop();
        }
        let kept = &self.parser.callbacks().scrollback;
        let returned = scrollback_lines.min(kept.len());
        Snapshot {
            screen: lines.join("\n"),
            cursor: screen.cursor_position(),
            scrollback: kept.iter().skip(kept.len() - returned).cloned().collect(),
            truncated: kept.len() > returned,
            title: self.title().to_owned(),
            size: (cols, rows),
            bracketed_paste: screen.bracketed_paste(),
            application_cursor: screen.application_cursor(),
        }
    }
}

const BEL: u8 = 0x07;
const CAN: u8 = 0x18;
const SUB: u8 = 0x1a;
const ESC: u8 = 0x1b;

fn nonzero(n: u16) -> std::num::NonZeroU16 {
    std::num::NonZeroU16::new(n).unwrap_or(std::num::NonZeroU16::MIN)
}

/// Where the output stands in escape sequences, as far as the screen needs to know
/// beyond the parser: to bound OSC sequences and to see `CSI 3 J`. It follows the
/// same state changes as the parser (vte) for these.
#[derive(Debug, Clone, Copy)]
enum Scan {
    Ground,
    Escape { intermediate: bool },
    Csi(CsiScan),
    Osc { len: usize },
}

impl Scan {
    fn escape() -> Self {
        Scan::Escape {
            intermediate: false,
        }
    }
}

/// The state after byte `b` of an escape sequence (`intermediate`: whether one
/// was seen), or `None` when it stays the same.
#[inline]
fn after_escape_byte(b: u8, intermediate: bool) -> Option<Scan> {
    Some(match b {
        ESC => Scan::escape(),
        CAN | SUB => Scan::Ground,
        0x20..=0x2f => Scan::Escape { intermediate: true },
        b'[' if !intermediate => Scan::Csi(CsiScan::default()),
        b']' if !intermediate => Scan::Osc { len: 0 },
        // Other controls are executed without leaving the sequence.
        0x00..=0x1f | 0x7f => return None,
        _ => Scan::Ground,
    })
}

/// A CSI sequence being read: enough to tell `CSI 3 J` / `CSI ? 3 J` apart.
#[derive(Debug, Clone, Copy, Default)]
struct CsiScan {
    /// The first parameter's value.
    first: u32,
    /// Whether the first parameter ended (`;` or `:` seen).
    past_first: bool,
    /// A private marker (`<`, `=`, `>`, `?`) at the start.
    private: Option<u8>,
    /// Whether any parameter byte was seen.
    any: bool,
    /// Whether an intermediate byte was seen.
    intermediate: bool,
    /// Whether the parser will ignore the sequence.
    invalid: bool,
}

impl CsiScan {
    /// Reads byte `b` of the sequence; returns the state after it when the
    /// sequence ended (final byte) or was cut off (ESC, CAN, SUB).
    #[inline]
    fn byte(&mut self, b: u8) -> Option<Scan> {
        match b {
            ESC => return Some(Scan::escape()),
            CAN | SUB => return Some(Scan::Ground),
            0x00..=0x1f | 0x7f => {}
            0x30..=0x3f => self.param_byte(b),
            0x20..=0x2f => self.intermediate = true,
            0x40..=0x7e => return Some(Scan::Ground),
            _ => {}
        }
        None
    }

    fn param_byte(&mut self, b: u8) {
        if self.intermediate {
            self.invalid = true;
        }
        match b {
            b'0'..=b'9' if !self.past_first => {
                self.first = self
                    .first
                    .saturating_mul(10)
                    .saturating_add(u32::from(b - b'0'));
            }
            b';' | b':' => self.past_first = true,
            0x3c..=0x3f if !self.any => self.private = Some(b),
            0x3c..=0x3f => self.invalid = true,
            _ => {}
        }
        self.any = true;
    }

    fn erases_scrollback(&self) -> bool {
        !self.invalid
            && !self.intermediate
            && matches!(self.private, None | Some(b'?'))
            && self.first == 3
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn screen() -> Screen {
        Screen::new(20, 5, 100)
    }

    #[test]
    fn text_and_cursor() {
        let mut s = screen();
        let signals = s.process(b"hello   \r\nworld");
        assert!(signals.is_empty());
        let snap = s.snapshot(10);
        assert_eq!(snap.screen, "hello\nworld");
        assert_eq!(snap.cursor, (1, 5));
        assert_eq!(snap.size, (20, 5));
        assert!(snap.scrollback.is_empty());
        assert!(!snap.truncated);
        assert_eq!(snap.title, "");
        assert!(!snap.bracketed_paste);
    }

    #[test]
    fn blank_rows_inside_are_kept_trailing_ones_trimmed() {
        let mut s = screen();
        s.process(b"a\r\n\r\nb\r\n\r\n");
        assert_eq!(s.snapshot(0).screen, "a\n\nb");
        let mut empty = screen();
        empty.process(b"\x1b[2J");
        assert_eq!(empty.snapshot(0).screen, "");
    }

    #[test]
    fn escape_sequences_are_applied() {
        let mut s = screen();
        s.process(b"\x1b[31mred\x1b[0m\x1b[3;4Hxy\x1b[1;1Habc\x1b[K");
        let snap = s.snapshot(0);
        assert_eq!(snap.screen, "abc\n\n   xy");
        assert_eq!(snap.cursor, (0, 3));
    }

    #[test]
    fn scrollback_oldest_first_and_bounded() {
        let mut s = Screen::new(20, 3, 4);
        for i in 0..10 {
            s.process(format!("line {i}\r\n").as_bytes());
        }
        // Rows 8, 9 and the empty one are on the screen; 0..=7 scrolled off.
        let snap = s.snapshot(100);
        assert_eq!(snap.screen, "line 8\nline 9");
        assert_eq!(snap.scrollback, ["line 4", "line 5", "line 6", "line 7"]);
        assert!(!snap.truncated);
        assert_eq!(s.scrollback_len(), 4);

        let snap = s.snapshot(2);
        assert_eq!(snap.scrollback, ["line 6", "line 7"]);
        assert!(snap.truncated);

        let snap = s.snapshot(0);
        assert!(snap.scrollback.is_empty());
        assert!(snap.truncated);
    }

    #[test]
    fn no_scrollback_when_none_asked() {
        let mut s = Screen::new(20, 2, 0);
        s.process(b"a\r\nb\r\nc\r\nd");
        let snap = s.snapshot(10);
        assert_eq!(snap.screen, "c\nd");
        assert!(snap.scrollback.is_empty());
        assert!(!snap.truncated);
    }

    #[test]
    fn wrapped_lines_scroll_row_by_row() {
        let mut s = Screen::new(4, 2, 10);
        s.process(b"abcdefghij");
        let snap = s.snapshot(10);
        assert_eq!(snap.scrollback, ["abcd"]);
        assert_eq!(snap.screen, "efgh\nij");
    }

    #[test]
    fn alternate_screen_rows_stay_out_of_scrollback() {
        let mut s = Screen::new(20, 2, 10);
        s.process(b"main1\r\nmain2\r\nmain3");
        s.process(b"\x1b[?1049halt1\r\nalt2\r\nalt3\r\nalt4");
        let snap = s.snapshot(10);
        assert_eq!(snap.screen, "alt3\nalt4");
        assert_eq!(snap.scrollback, ["main1"]);
        s.process(b"\x1b[?1049l");
        assert_eq!(s.snapshot(10).screen, "main2\nmain3");
    }

    #[test]
    fn csi_3_j_erases_scrollback_where_it_stands() {
        let mut s = Screen::new(20, 2, 10);
        s.process(b"a\r\nb\r\nc\r\n\x1b[3Jd\r\ne\r\n");
        // a and b scrolled off before the erase, c and d after it.
        assert_eq!(s.snapshot(10).scrollback, ["c", "d"]);
        s.process(b"\x1b[?3J");
        assert!(s.snapshot(10).scrollback.is_empty());
        // Split across calls, with other CSI J forms that must not erase.
        s.process(b"f\r\ng\r\n\x1b[2J\x1b[J\x1b[>3J\x1b[");
        assert_eq!(s.snapshot(10).scrollback, ["e", "f"]);
        s.process(b"3");
        s.process(b"J");
        assert!(s.snapshot(10).scrollback.is_empty());
    }

    #[test]
    fn resize_changes_size_and_pushes_rows_to_scrollback() {
        let mut s = Screen::new(10, 4, 10);
        s.process(b"1\r\n2\r\n3\r\n4");
        s.resize(30, 2);
        let snap = s.snapshot(10);
        assert_eq!(snap.size, (30, 2));
        assert_eq!(snap.screen, "3\n4");
        assert_eq!(snap.scrollback, ["1", "2"]);
        // Zero is taken as one.
        s.resize(0, 0);
        assert_eq!(s.size(), (1, 1));
    }

    #[test]
    fn title_from_osc_0_and_2() {
        let mut s = screen();
        let signals = s.process(b"\x1b]0;first\x07");
        assert_eq!(signals.title.as_deref(), Some("first"));
        assert_eq!(signals.bells, 0);
        assert_eq!(s.snapshot(0).title, "first");

        let signals = s.process(b"\x1b]2;second\x1b\\");
        assert_eq!(signals.title.as_deref(), Some("second"));
        assert_eq!(s.title(), "second");

        // Setting the same title again is no change; OSC 1 (icon) is not the title.
        let signals = s.process(b"\x1b]2;second\x07\x1b]1;icon\x07");
        assert!(signals.is_empty(), "{signals:?}");
        assert_eq!(s.title(), "second");
    }

    #[test]
    fn title_split_across_calls() {
        let mut s = screen();
        assert!(s.process(b"\x1b]2;hel").is_empty());
        let signals = s.process(b"lo\x07");
        assert_eq!(signals.title.as_deref(), Some("hello"));
    }

    #[test]
    fn bell_outside_osc_only() {
        let mut s = screen();
        let signals = s.process(b"a\x07b\x07");
        assert_eq!(signals.bells, 2);
        assert_eq!(s.snapshot(0).screen, "ab");

        let signals = s.process(b"\x1b]2;t\x07\x1b]9;hi\x07\x1b]777;notify;x;y\x07");
        assert_eq!(signals.bells, 0);
        assert_eq!(signals.notifications.len(), 2);
        assert_eq!(signals.title.as_deref(), Some("t"));
    }

    #[test]
    fn osc_9_notifications() {
        let mut s = screen();
        let signals = s.process(b"\x1b]9;Build done\x07");
        assert_eq!(
            signals.notifications,
            [Notification {
                title: None,
                body: "Build done".into()
            }]
        );
        let signals = s.process(b"\x1b]9;with ST; and ; semicolons\x1b\\");
        assert_eq!(
            signals.notifications,
            [Notification {
                title: None,
                body: "with ST; and ; semicolons".into()
            }]
        );
        // ConEmu progress reports are not notifications.
        let signals = s.process(b"\x1b]9;4;1;50\x07\x1b]9;4;0\x1b\\");
        assert!(signals.is_empty(), "{signals:?}");
        // Nothing of it reaches the screen.
        assert_eq!(s.snapshot(0).screen, "");
    }

    #[test]
    fn osc_777_notifications() {
        let mut s = screen();
        let signals = s.process(b"\x1b]777;notify;Claude;Needs input\x07");
        assert_eq!(
            signals.notifications,
            [Notification {
                title: Some("Claude".into()),
                body: "Needs input".into()
            }]
        );
        let signals = s.process(b"\x1b]777;notify;T;a;b\x1b\\\x1b]777;other;x\x07");
        assert_eq!(
            signals.notifications,
            [Notification {
                title: Some("T".into()),
                body: "a;b".into()
            }]
        );
        let events = signals.into_events();
        assert_eq!(
            events,
            [TerminalEvent::Notification {
                title: Some("T".into()),
                body: "a;b".into()
            }]
        );
    }

    #[test]
    fn osc_7501_agent_states() {
        let mut s = screen();
        let signals = s.process(
            b"\x1b]7501;state=working\x07x\x1b]7501;state=blocked:exec:kind=permission\x1b\\\x1b]7501;other\x07",
        );
        assert_eq!(
            signals.agent_states,
            ["working", "blocked:exec:kind=permission"]
        );
        assert_eq!(
            signals.into_events(),
            [
                TerminalEvent::AgentState("working".into()),
                TerminalEvent::AgentState("blocked:exec:kind=permission".into())
            ]
        );
        assert_eq!(s.snapshot(0).screen, "x");
    }

    #[test]
    fn signals_into_events_and_merge() {
        let mut a = Signals {
            bells: 2,
            notifications: vec![Notification {
                title: None,
                body: "n1".into(),
            }],
            title: Some("t1".into()),
            agent_states: Vec::new(),
        };
        a.merge(Signals {
            bells: 1,
            notifications: vec![Notification {
                title: None,
                body: "n2".into(),
            }],
            title: None,
            agent_states: Vec::new(),
        });
        assert_eq!(a.bells, 3);
        assert_eq!(
            a.into_events(),
            [
                TerminalEvent::Bell,
                TerminalEvent::Notification {
                    title: None,
                    body: "n1".into()
                },
                TerminalEvent::Notification {
                    title: None,
                    body: "n2".into()
                },
                TerminalEvent::Title("t1".into()),
            ]
        );
    }

    #[test]
    fn bracketed_paste_on_and_off() {
        let mut s = screen();
        assert!(!s.bracketed_paste());
        s.process(b"\x1b[?2004h");
        assert!(s.bracketed_paste());
        assert!(s.snapshot(0).bracketed_paste);
        s.process(b"\x1b[?2004l");
        assert!(!s.bracketed_paste());
    }

    #[test]
    fn unterminated_osc_is_bounded() {
        let mut s = screen();
        s.process(b"\x1b]9;");
        let chunk = vec![b'a'; 10_000];
        for _ in 0..50 {
            assert!(s.process(&chunk).is_empty());
        }
        let signals = s.process(b"\x07after");
        assert_eq!(signals.notifications.len(), 1);
        let body = &signals.notifications[0].body;
        // "9;" counts towards the limit.
        assert_eq!(body.len(), MAX_OSC_BYTES - 2);
        assert!(body.bytes().all(|b| b == b'a'));
        assert_eq!(s.snapshot(0).screen, "after");
    }

    #[test]
    fn can_aborts_sequences() {
        let mut s = screen();
        s.process(b"\x1b[3\x18J\x1b]2;x\x18y");
        // The CAN ended the CSI (so `J` is text) and the OSC.
        assert_eq!(s.snapshot(0).screen, "Jy");
    }

    #[test]
    fn invalid_utf8_does_not_panic() {
        let mut s = screen();
        s.process(b"\xff\xfe\x1b]2;\xff\x07\x9b3J");
        assert_eq!(s.title(), "\u{fffd}");
    }
}
