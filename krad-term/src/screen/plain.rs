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

/// Where the plain line starting at `start` ends (just after its LF), or `None`
/// when `bytes[start..]` does not start with one (or ends before its CR LF).
/// `sgr_reset`, when given, is told the start of each SGR sequence that resets
/// the attributes (its first parameter empty or 0).
#[inline]
pub(super) fn line_end(
    bytes: &[u8],
    start: usize,
    mut sgr_reset: Option<&mut usize>,
) -> Option<usize> {
    let mut i = start;
    loop {
        match *bytes.get(i)? {
            0x20..=0x7e => i += 1,
            b'\r' => return (*bytes.get(i + 1)? == b'\n').then_some(i + 2),
            0x1b => {
                let (end, resets) = sgr(bytes, i)?;
                if resets && let Some(at) = sgr_reset.as_deref_mut() {
                    *at = i;
                }
                i = end;
            }
            _ => return None,
        }
    }
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

/// Calls `row` with the text of each screen row the plain line `line` (without
/// its CR LF) fills on a screen `cols` wide: its printable characters, SGR
/// sequences left out, `cols` to a row (an empty line fills one row), each row's
/// trailing blanks trimmed.
pub(super) fn rows(line: &[u8], cols: usize, mut row: impl FnMut(&[u8])) {
    let mut text = Vec::with_capacity(line.len());
    let mut i = 0;
    while i < line.len() {
        if line[i] == 0x1b {
            i = sgr(line, i).map_or(line.len(), |(end, _)| end);
        } else {
            text.push(line[i]);
            i += 1;
        }
    }
    if text.is_empty() {
        row(&[]);
        return;
    }
    for chunk in text.chunks(cols.max(1)) {
        let kept = chunk.iter().rposition(|&b| b != b' ').map_or(0, |p| p + 1);
        row(&chunk[..kept]);
    }
}

/// How many screen rows the plain line `line` (without its CR LF) fills on a
/// screen `cols` wide (see [`rows`]).
pub(super) fn row_count(line: &[u8], cols: usize) -> usize {
    let mut visible: usize = 0;
    let mut i = 0;
    while i < line.len() {
        if line[i] == 0x1b {
            i = sgr(line, i).map_or(line.len(), |(end, _)| end);
        } else {
            visible += 1;
            i += 1;
        }
    }
    visible.div_ceil(cols.max(1)).max(1)
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
        let mut reset = usize::MAX;
        assert_eq!(line_end(text, 0, Some(&mut reset)), Some(17));
        assert_eq!(reset, 11);
        assert_eq!(line_end(text, 17, None), None, "no CR LF yet");
        for not_plain in [
            &b"a\tb\r\n"[..],
            b"a\nb\r\n",
            b"a\x1b[2Jb\r\n",
            b"\x1b]0;t\x07\r\n",
            b"\xc3\xa9\r\n",
            b"a\rb\r\n",
            b"a\x1b[1:2m\r\n",
        ] {
            assert_eq!(line_end(not_plain, 0, None), None, "{not_plain:?}");
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
        let mut got = Vec::new();
        rows(b"\x1b[31mabcd  \x1b[0mef  gh", 4, |r| {
            got.push(String::from_utf8_lossy(r).into_owned())
        });
        assert_eq!(got, ["abcd", "  ef", "  gh"]);
        got.clear();
        rows(b"\x1b[0m", 4, |r| {
            got.push(String::from_utf8_lossy(r).into_owned())
        });
        assert_eq!(got, [""]);
        assert_eq!(row_count(b"\x1b[31mabcd  \x1b[0mef  gh", 4), 3);
        assert_eq!(row_count(b"abcd", 4), 1);
        assert_eq!(row_count(b"\x1b[0m", 4), 1);
    }
}
