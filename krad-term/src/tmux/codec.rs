//! tmux's control-mode encodings: quoting bytes for its command language,
//! decoding `%output`'s octal escapes, and what of tmux's lines may be logged.

/// A tmux command-language string: double-quoted, every byte but plain ASCII
/// letters, digits and a few safe marks written as an octal escape (so that no
/// `$`, `~`, `#`, quote or newline means anything to tmux).
pub(super) fn quote(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 2);
    out.push('"');
    for &b in bytes {
        if b.is_ascii_alphanumeric() || b"-_./:=,+%@^ ".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("\\{b:03o}"));
        }
    }
    out.push('"');
    out
}

/// The bytes of an `%output` value: `\ooo` octal escapes, everything else as is.
pub(super) fn unescape(value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len());
    let mut i = 0;
    while i < value.len() {
        if value[i] == b'\\'
            && let Some(digits) = value.get(i + 1..i + 4)
            && digits.iter().all(|d| (b'0'..=b'7').contains(d))
        {
            let byte = digits.iter().fold(0u32, |n, d| n * 8 + u32::from(d - b'0'));
            out.push(byte as u8);
            i += 4;
        } else {
            out.push(value[i]);
            i += 1;
        }
    }
    out
}

/// An answer's lines, as text, for an error message.
pub(super) fn lossy_lines(lines: &[Vec<u8>]) -> String {
    lines
        .iter()
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect::<Vec<_>>()
        .join("; ")
}

/// The pane and payload size of an `%output` line (`%output %3 bytes…`).
pub(super) fn output_size(line: &[u8]) -> Option<(&str, usize)> {
    let rest = line.strip_prefix(b"%output ")?;
    let space = rest.iter().position(|&b| b == b' ').unwrap_or(rest.len());
    let pane = std::str::from_utf8(&rest[..space]).ok()?;
    Some((pane, rest.len().saturating_sub(space + 1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_values_unescape() {
        assert_eq!(unescape(b"a\\015\\012b\\134c"), b"a\r\nb\\c");
        assert_eq!(unescape(b"\\033[31mred"), b"\x1b[31mred");
        // Not an escape: kept as it is.
        assert_eq!(unescape(b"x\\9y\\"), b"x\\9y\\");
        assert_eq!(unescape("é".as_bytes()), "é".as_bytes());
    }

    #[test]
    fn quoting_leaves_tmux_nothing_to_expand() {
        assert_eq!(quote(b"A=b c"), "\"A=b c\"");
        assert_eq!(
            quote(b"$HOME ~ #{x} \"'\n"),
            "\"\\044HOME \\176 \\043\\173x\\175 \\042\\047\\012\""
        );
        assert_eq!(quote("é".as_bytes()), "\"\\303\\251\"");
    }

    #[test]
    fn output_lines_are_logged_by_size_only() {
        assert_eq!(output_size(b"%output %3 secret\\015"), Some(("%3", 10)));
        assert_eq!(output_size(b"%output %12"), Some(("%12", 0)));
        assert_eq!(output_size(b"%begin 1 2 0"), None);
    }
}
