//! Taking a pane's screen from tmux (`display-message` for its size, cursor and
//! modes, `capture-pane -e` for its cells): the command line that asks, the
//! [`SeedInfo`] its first answer gives, and the bytes that redraw the capture on
//! a fresh screen. The reader puts the screen in place: for a pane taken back
//! after a restart, or as the final screen of a program that ended.

use crate::ExitStatus;

use super::codec::quote;

/// Lines of tmux history a taken-back terminal's scrollback is rebuilt from, at most.
const HISTORY_LINES: usize = 10_000;

/// A pane's state when its screen is taken from tmux.
#[derive(Debug, Default)]
pub(super) struct SeedInfo {
    pub(super) size: (u16, u16),
    cursor: (u16, u16),
    /// The pane's program.
    pub(super) pid: Option<u32>,
    /// How its program ended, if it did.
    pub(super) dead: Option<ExitStatus>,
    alternate: bool,
    application_cursor: bool,
    application_keypad: bool,
    cursor_visible: bool,
}

impl SeedInfo {
    /// The screen a capture shows: its size, and the bytes that draw it.
    pub(super) fn screen(
        &self,
        lines: &[Vec<u8>],
        scrollback_lines: usize,
    ) -> ((u16, u16), Vec<u8>) {
        (self.size, seed_bytes(self, lines, scrollback_lines))
    }
}

/// What redraws a captured pane on a fresh screen: history lines first (they
/// scroll off into the scrollback), then the screen, cursor and modes.
fn seed_bytes(info: &SeedInfo, lines: &[Vec<u8>], scrollback_lines: usize) -> Vec<u8> {
    let (_, rows) = info.size;
    let mut bytes = Vec::new();
    if info.alternate {
        bytes.extend_from_slice(b"\x1b[?1049h");
    }
    let keep = lines.len().min(scrollback_lines + usize::from(rows));
    for (i, line) in lines[lines.len() - keep..].iter().enumerate() {
        if i > 0 {
            bytes.extend_from_slice(b"\r\n");
        }
        bytes.extend_from_slice(line);
    }
    bytes.extend_from_slice(b"\x1b[0m");
    bytes
        .extend_from_slice(format!("\x1b[{};{}H", info.cursor.1 + 1, info.cursor.0 + 1).as_bytes());
    if info.application_cursor {
        bytes.extend_from_slice(b"\x1b[?1h");
    }
    if info.application_keypad {
        bytes.extend_from_slice(b"\x1b=");
    }
    if !info.cursor_visible {
        bytes.extend_from_slice(b"\x1b[?25l");
    }
    bytes
}

/// Asks for a pane's state and screen in one command line, so that nothing the
/// program prints can fall between them: answered twice, state (see
/// [`parse_seed_info`]) then screen.
pub(super) fn seed_line(pane: &str, scrollback_lines: usize) -> String {
    let format = [
        "#{pane_width}",
        "#{pane_height}",
        "#{cursor_x}",
        "#{cursor_y}",
        "#{pane_pid}",
        "#{pane_dead}",
        "#{pane_dead_status}",
        "#{pane_dead_signal}",
        "#{alternate_on}",
        "#{keypad_cursor_flag}",
        "#{keypad_flag}",
        "#{cursor_flag}",
    ]
    .join("\t");
    let history = scrollback_lines.min(HISTORY_LINES);
    format!(
        "display-message -p -t {pane} {format} ; capture-pane -p -e -t {pane} -S -{history}",
        format = quote(format.as_bytes()),
    )
}

/// A pane's state, as the `display-message` of [`seed_line`] prints it.
pub(super) fn parse_seed_info(lines: &[Vec<u8>]) -> Option<SeedInfo> {
    let text = String::from_utf8_lossy(lines.first()?).into_owned();
    let fields: Vec<&str> = text.split('\t').collect();
    let number = |i: usize| fields.get(i).and_then(|f| f.parse::<u16>().ok());
    let flag = |i: usize| fields.get(i) == Some(&"1");
    let dead = flag(5).then(|| ExitStatus {
        code: fields.get(6).and_then(|c| c.parse().ok()),
        signal: fields.get(7).and_then(|s| s.parse().ok()),
    });
    Some(SeedInfo {
        size: (number(0)?, number(1)?),
        cursor: (number(2).unwrap_or(0), number(3).unwrap_or(0)),
        pid: fields.get(4).and_then(|p| p.parse().ok()),
        dead,
        alternate: flag(8),
        application_cursor: flag(9),
        application_keypad: flag(10),
        cursor_visible: fields.get(11) != Some(&"0"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_info_parses() {
        let info =
            parse_seed_info(&[b"100\t30\t5\t2\t4242\t1\t\t15\t0\t1\t0\t1".to_vec()]).unwrap();
        assert_eq!(info.size, (100, 30));
        assert_eq!(info.cursor, (5, 2));
        assert_eq!(info.pid, Some(4242));
        assert_eq!(
            info.dead,
            Some(ExitStatus {
                code: None,
                signal: Some(15)
            })
        );
        assert!(info.application_cursor && !info.application_keypad && info.cursor_visible);
    }
}
