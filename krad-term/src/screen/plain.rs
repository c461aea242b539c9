//! Plain lines: the shape of most of what a build or a test run prints, read
//! without the parser.
//!
//! A *plain line* is printable ASCII and complete SGR sequences (`ESC [ 1;32 m`:
//! colours and attributes) ended by CR LF. When a call to the screen brings many
//! of them while the cursor stands on the bottom row of a full-screen scrolling
//! region, every one but the last screenful only passes through the screen on its
//! way to the scrollback: its rows can be cut from the text directly (each row
//! `cols` characters, trailing blanks trimmed, as the parser's rows are read),
//! and only the SGR sequences since the last reset need to reach the parser,
//! for the attributes the next lines are drawn with. See `Screen::plain_lines`.

/// A plain line found in the bytes: where it starts, where it ends (just after
/// its LF), and how many characters it shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Span {
    pub start: usize,
    pub next: usize,
    pub visible: usize,
}

impl Span {
    /// How many screen rows it fills on a screen `cols` wide (an empty line
    /// fills one).
    pub(super) fn rows(&self, cols: usize) -> usize {
        self.visible.div_ceil(cols.max(1)).max(1)
    }
}

/// Why no plain line starts where one was looked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NotPlain {
    /// No CR follows (the line is not ended in these bytes).
    NoCr,
    /// Something else than a plain line stands before the CR at this index.
    Before(usize),
}

/// The plain line starting at `start`. `sgr_reset` is set to the start of each
/// SGR sequence in it that resets the attributes (its first parameter empty or 0).
#[inline]
pub(super) fn line(
    bytes: &[u8],
    start: usize,
    sgr_reset: &mut Option<usize>,
) -> Result<Span, NotPlain> {
    let cr = start + memchr::memchr(b'\r', &bytes[start..]).ok_or(NotPlain::NoCr)?;
    match bytes.get(cr + 1) {
        Some(b'\n') => {}
        Some(_) => return Err(NotPlain::Before(cr)),
        None => return Err(NotPlain::NoCr),
    }
    let mut visible = 0;
    let mut i = start;
    loop {
        let piece = memchr::memchr(0x1b, &bytes[i..cr]).map_or(cr, |p| i + p);
        if !printable(&bytes[i..piece]) {
            return Err(NotPlain::Before(cr));
        }
        visible += piece - i;
        if piece == cr {
            return Ok(Span {
                start,
                next: cr + 2,
                visible,
            });
        }
        let (end, resets) = sgr(bytes, piece).ok_or(NotPlain::Before(cr))?;
        if resets {
            *sgr_reset = Some(piece);
        }
        i = end;
    }
}

/// Where the unfinished line of `bytes` starts, when `bytes[from..]` is plain
/// lines and then the start of one (printable ASCII and SGR sequences, the last
/// perhaps cut short, perhaps a final CR); `None` when it is not.
pub(super) fn lines_through(bytes: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    loop {
        match line(bytes, at, &mut None) {
            Ok(span) => at = span.next,
            Err(NotPlain::Before(_)) => return None,
            Err(NotPlain::NoCr) => break,
        }
    }
    // The unfinished line: no CR in it, or a CR as its last byte.
    let rest = bytes[at..].strip_suffix(b"\r").unwrap_or(&bytes[at..]);
    let mut i = 0;
    while i < rest.len() {
        let piece = memchr::memchr(0x1b, &rest[i..]).map_or(rest.len(), |p| i + p);
        if !printable(&rest[i..piece]) {
            return None;
        }
        if piece == rest.len() {
            break;
        }
        match sgr(rest, piece) {
            Some((end, _)) => i = end,
            // Cut short at the end: `ESC`, `ESC [`, then digits and `;`.
            None => {
                let tail = &rest[piece + 1..];
                let cut = tail.first().is_none_or(|&b| b == b'[')
                    && tail
                        .iter()
                        .skip(1)
                        .all(|&b| b.is_ascii_digit() || b == b';');
                return cut.then_some(at);
            }
        }
    }
    Some(at)
}

/// Whether every byte is printable ASCII (no early exit: it vectorizes).
#[inline]
fn printable(bytes: &[u8]) -> bool {
    bytes
        .iter()
        .fold(true, |ok, &b| ok & (b.wrapping_sub(0x20) < 0x5f))
}

/// The end of the SGR sequence at `at` (`ESC [ digits and ; m`) and whether it
/// resets the attributes first; `None` if it is not one.
#[inline]
fn sgr(bytes: &[u8], at: usize) -> Option<(usize, bool)> {
    if *bytes.get(at + 1)? != b'[' {
        return None;
    }
    let mut i = at + 2;
    let mut first_is_zero = true;
    let mut in_first = true;
    loop {
        match *bytes.get(i)? {
            b'0' => {}
            b'1'..=b'9' => first_is_zero &= !in_first,
            b';' => in_first = false,
            b'm' => return Some((i + 1, first_is_zero)),
            _ => return None,
        }
        i += 1;
    }
}

/// Calls `row` with the text of each screen row the plain line `span` of
/// `bytes` fills on a screen `cols` wide: its printable characters, SGR
/// sequences left out, `cols` to a row (an empty line fills one row), each row's
/// trailing blanks trimmed. `text` is a buffer to reuse.
pub(super) fn rows(
    bytes: &[u8],
    span: Span,
    cols: usize,
    text: &mut Vec<u8>,
    mut row: impl FnMut(&str),
) {
    let line = &bytes[span.start..span.next - 2];
    text.clear();
    let mut i = 0;
    while i < line.len() {
        let piece = memchr::memchr(0x1b, &line[i..]).map_or(line.len(), |p| i + p);
        text.extend_from_slice(&line[i..piece]);
        i = if piece < line.len() {
            sgr(line, piece).map_or(line.len(), |(end, _)| end)
        } else {
            piece
        };
    }
    if text.is_empty() {
        row("");
        return;
    }
    for chunk in text.chunks(cols.max(1)) {
        let kept = chunk.iter().rposition(|&b| b != b' ').map_or(0, |p| p + 1);
        // Printable ASCII: always UTF-8.
        row(std::str::from_utf8(&chunk[..kept]).unwrap_or_default());
    }
}

/// The SGR sequences in `bytes` (plain lines), in order, for the parser.
pub(super) fn sgr_sequences(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(p) = memchr::memchr(0x1b, &bytes[i..]) {
        let at = i + p;
        match sgr(bytes, at) {
            Some((end, _)) => {
                out.extend_from_slice(&bytes[at..end]);
                i = end;
            }
            None => i = at + 1,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_lines_are_printable_ascii_and_sgr_ended_by_cr_lf() {
        let text = b"ab \x1b[1;32mc\x1b[0m\r\nnext";
        let mut reset = None;
        let span = line(text, 0, &mut reset).unwrap();
        assert_eq!(
            span,
            Span {
                start: 0,
                next: 17,
                visible: 4
            }
        );
        assert_eq!(reset, Some(11));
        assert_eq!(line(text, 17, &mut reset), Err(NotPlain::NoCr));
        for not_plain in [
            &b"a\tb\r\n"[..],
            b"a\nb\r\n",
            b"a\x1b[2Jb\r\n",
            b"\x1b]0;t\x07\r\n",
            b"\xc3\xa9\r\n",
            b"a\rb\r\n",
            b"a\x1b[1:2m\r\n",
            b"a\x7f\r\n",
        ] {
            assert!(
                matches!(line(not_plain, 0, &mut reset), Err(NotPlain::Before(_))),
                "{not_plain:?}"
            );
        }
    }

    #[test]
    fn plain_lines_and_the_start_of_one_can_wait() {
        assert_eq!(lines_through(b"ab\r\ncd\x1b[1m\r\nef", 0), Some(12));
        assert_eq!(lines_through(b"ab\r\n", 0), Some(4));
        assert_eq!(lines_through(b"", 0), Some(0));
        for cut in [
            &b"ab\r\nc\x1b"[..],
            b"ab\r\nc\x1b[",
            b"ab\r\nc\x1b[1;3",
            b"ab\r\nc\r",
        ] {
            assert_eq!(lines_through(cut, 0), Some(4), "{cut:?}");
        }
        for not in [&b"ab\r\nc\x1b]"[..], b"ab\nc", b"a\x07", b"a\x1b[1Jb"] {
            assert_eq!(lines_through(not, 0), None, "{not:?}");
        }
    }

    #[test]
    fn resets_are_sgrs_whose_first_parameter_is_empty_or_zero() {
        for (seq, resets) in [
            ("\x1b[m", true),
            ("\x1b[0m", true),
            ("\x1b[00;1m", true),
            ("\x1b[;1m", true),
            ("\x1b[1;0m", false),
            ("\x1b[10m", false),
            ("\x1b[01m", false),
        ] {
            assert_eq!(sgr(seq.as_bytes(), 0), Some((seq.len(), resets)), "{seq:?}");
        }
    }

    #[test]
    fn rows_are_cut_at_the_width_and_trimmed() {
        let cut = |text: &[u8], cols| {
            let mut reset = None;
            let span = line(text, 0, &mut reset).unwrap();
            let mut got = Vec::new();
            rows(text, span, cols, &mut Vec::new(), |r| {
                got.push(r.to_owned())
            });
            assert_eq!(got.len(), span.rows(cols));
            got
        };
        assert_eq!(
            cut(b"\x1b[31mabcd  \x1b[0mef  gh\r\n", 4),
            ["abcd", "  ef", "  gh"]
        );
        assert_eq!(cut(b"\x1b[0m\r\n", 4), [""]);
        assert_eq!(cut(b"abcd\r\n", 4), ["abcd"]);
    }
}
