//! Named keys, as `Send`'s `keys` carries them: tmux's key names (`Enter`,
//! `Escape`, `Up`, `C-c`, `M-x`, `F5`, a single character) and the bytes a real
//! terminal sends for each.
//!
//! Keys are written unbracketed, one at a time, so that a program's dialog takes
//! them as keystrokes (a paste of `1` is text, the key `1` picks option 1).

/// The longest key name accepted.
const MAX_NAME: usize = 16;

/// The names a Send accepts besides single characters and chords, for errors
/// and help.
pub const KEY_NAMES: &str = "Enter, Escape, Tab, BTab, Space, BSpace, Up, Down, Left, Right, \
Home, End, PageUp, PageDown, Insert, Delete, F1–F12; C-<key> (Ctrl), M-<key> (Alt), \
or one character";

/// A key, parsed from its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    base: Base,
    ctrl: bool,
    meta: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Base {
    Char(char),
    Enter,
    Escape,
    Tab,
    BackTab,
    Backspace,
    Arrow(u8),
    Home,
    End,
    PageUp,
    PageDown,
    Insert,
    Delete,
    F(u8),
}

impl Key {
    /// Parses a key name; the error says what is accepted.
    pub fn parse(name: &str) -> Result<Key, String> {
        if name.is_empty() || name.len() > MAX_NAME {
            return Err(format!("{name:?} is not a key (keys: {KEY_NAMES})"));
        }
        let mut rest = name;
        let (mut ctrl, mut meta) = (false, false);
        // `C-` and `M-` prefixes, unless what follows is empty (`C-` alone is no key,
        // `-` alone is the character).
        loop {
            if let Some(after) = rest.strip_prefix("C-").filter(|a| !a.is_empty()) {
                ctrl = true;
                rest = after;
            } else if let Some(after) = rest.strip_prefix("M-").filter(|a| !a.is_empty()) {
                meta = true;
                rest = after;
            } else {
                break;
            }
        }
        let base = match rest {
            "Enter" | "Return" => Base::Enter,
            "Escape" | "Esc" => Base::Escape,
            "Tab" => Base::Tab,
            "BTab" => Base::BackTab,
            "Space" => Base::Char(' '),
            "BSpace" | "Backspace" => Base::Backspace,
            "Up" => Base::Arrow(b'A'),
            "Down" => Base::Arrow(b'B'),
            "Right" => Base::Arrow(b'C'),
            "Left" => Base::Arrow(b'D'),
            "Home" => Base::Home,
            "End" => Base::End,
            "PageUp" | "PgUp" | "PPage" => Base::PageUp,
            "PageDown" | "PgDn" | "NPage" => Base::PageDown,
            "Insert" | "IC" => Base::Insert,
            "Delete" | "DC" => Base::Delete,
            other => {
                let mut chars = other.chars();
                match (chars.next(), chars.next()) {
                    (Some(c), None) if !c.is_control() => Base::Char(c),
                    _ => match other.strip_prefix('F').and_then(|n| n.parse::<u8>().ok()) {
                        Some(n @ 1..=12) => Base::F(n),
                        _ => return Err(format!("{name:?} is not a key (keys: {KEY_NAMES})")),
                    },
                }
            }
        };
        if ctrl
            && !matches!(base, Base::Char(c) if c.is_ascii_alphabetic() || "@[\\]^_ ?".contains(c))
        {
            return Err(format!(
                "{name:?}: Ctrl goes with a letter or one of @[\\]^_ and space"
            ));
        }
        Ok(Key { base, ctrl, meta })
    }

    /// The bytes a terminal sends for the key; `application_cursor`: the program
    /// turned application cursor keys on (`CSI ? 1 h`).
    pub fn bytes(&self, application_cursor: bool) -> Vec<u8> {
        let mut out = Vec::with_capacity(8);
        if self.meta {
            out.push(0x1b);
        }
        match &self.base {
            Base::Char(c) if self.ctrl => out.push(match c {
                '?' => 0x7f,
                ' ' | '@' => 0,
                c => (c.to_ascii_uppercase() as u8) & 0x1f,
            }),
            Base::Char(c) => {
                let mut buf = [0; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
            Base::Enter => out.push(b'\r'),
            Base::Escape => out.push(0x1b),
            Base::Tab => out.push(b'\t'),
            Base::BackTab => out.extend_from_slice(b"\x1b[Z"),
            Base::Backspace => out.push(0x7f),
            Base::Arrow(letter) => {
                out.extend_from_slice(if application_cursor {
                    b"\x1bO"
                } else {
                    b"\x1b["
                });
                out.push(*letter);
            }
            Base::Home => out.extend_from_slice(if application_cursor {
                b"\x1bOH"
            } else {
                b"\x1b[H"
            }),
            Base::End => out.extend_from_slice(if application_cursor {
                b"\x1bOF"
            } else {
                b"\x1b[F"
            }),
            Base::PageUp => out.extend_from_slice(b"\x1b[5~"),
            Base::PageDown => out.extend_from_slice(b"\x1b[6~"),
            Base::Insert => out.extend_from_slice(b"\x1b[2~"),
            Base::Delete => out.extend_from_slice(b"\x1b[3~"),
            Base::F(n @ 1..=4) => {
                out.extend_from_slice(b"\x1bO");
                out.push(b'P' + (n - 1));
            }
            Base::F(n) => {
                let code = match n {
                    5 => 15,
                    6 => 17,
                    7 => 18,
                    8 => 19,
                    9 => 20,
                    10 => 21,
                    11 => 23,
                    _ => 24,
                };
                out.extend_from_slice(format!("\x1b[{code}~").as_bytes());
            }
        }
        out
    }

    /// Whether the key submits or dismisses what is on screen (Enter, Escape,
    /// Ctrl-C): keys like these can answer a dialog.
    pub fn ends_a_dialog(&self) -> bool {
        !self.meta
            && (matches!(self.base, Base::Enter | Base::Escape)
                || (self.ctrl && self.base == Base::Char('c')))
    }

    /// Whether the key is a plain character (a dialog's numbered choice or `y`).
    pub fn is_char(&self) -> bool {
        !self.ctrl && !self.meta && matches!(self.base, Base::Char(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(name: &str) -> Vec<u8> {
        Key::parse(name).unwrap().bytes(false)
    }

    #[test]
    fn names_map_to_what_a_terminal_sends() {
        assert_eq!(bytes("Enter"), b"\r");
        assert_eq!(bytes("Escape"), b"\x1b");
        assert_eq!(bytes("Down"), b"\x1b[B");
        assert_eq!(Key::parse("Down").unwrap().bytes(true), b"\x1bOB");
        assert_eq!(bytes("C-c"), [3]);
        assert_eq!(bytes("C-C"), [3]);
        assert_eq!(bytes("M-x"), b"\x1bx");
        assert_eq!(bytes("1"), b"1");
        assert_eq!(bytes("é"), "é".as_bytes());
        assert_eq!(bytes("-"), b"-");
        assert_eq!(bytes("BTab"), b"\x1b[Z");
        assert_eq!(bytes("F1"), b"\x1bOP");
        assert_eq!(bytes("F5"), b"\x1b[15~");
        assert_eq!(bytes("F12"), b"\x1b[24~");
        assert_eq!(bytes("Space"), b" ");
        assert_eq!(bytes("BSpace"), [0x7f]);
    }

    #[test]
    fn unknown_names_say_what_is_accepted() {
        for bad in ["", "Foo", "ab", "F13", "C-", "C-Up", "\u{7}", "C-1"] {
            let e = Key::parse(bad).unwrap_err();
            assert!(e.contains("key") || e.contains("Ctrl"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn dialog_keys() {
        assert!(Key::parse("Enter").unwrap().ends_a_dialog());
        assert!(Key::parse("C-c").unwrap().ends_a_dialog());
        assert!(!Key::parse("Down").unwrap().ends_a_dialog());
        assert!(Key::parse("2").unwrap().is_char());
    }
}
