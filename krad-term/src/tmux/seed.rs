//! A pane's screen taken from tmux (`display-message` for its size, cursor and
//! modes, `capture-pane -e` for its cells): in place of the screen of a pane
//! taken back after a restart, or as the final screen of a program that ended.

use crate::ExitStatus;
use crate::screen::Screen;

use super::codec::quote;
use super::control::Reply;
use super::exit::finish;
use super::lock;
use super::reader::Reader;
use super::terminal::Shared;

/// Lines of tmux history a taken-back terminal's scrollback is rebuilt from, at most.
const HISTORY_LINES: usize = 10_000;

/// A pane's state when its screen is taken from tmux.
#[derive(Debug, Default)]
pub(super) struct SeedInfo {
    size: (u16, u16),
    cursor: (u16, u16),
    pid: Option<u32>,
    dead: Option<ExitStatus>,
    alternate: bool,
    application_cursor: bool,
    application_keypad: bool,
    cursor_visible: bool,
}

impl Reader {
    /// A pane's screen, as tmux has it: in place of the one taken back (then its
    /// output follows), or as the final one once its program ended.
    pub(super) fn seed(&mut self, pane: &str, lines: Option<&[Vec<u8>]>) {
        let Some(pipeline) = self.terminals.get_mut(pane) else {
            return;
        };
        let info = pipeline.seed.take();
        let screen = match (info.as_ref(), lines) {
            (Some(info), Some(lines)) => Some((
                info.size,
                seed_bytes(info, lines, pipeline.shared.scrollback_lines),
            )),
            _ => None,
        };
        if let Some(info) = &info
            && let Some(pid) = info.pid
        {
            let _ = pipeline.shared.pid.set(pid);
        }
        if let Some(seeded) = pipeline.seeded.take() {
            // Taking the pane back.
            let Some((size, bytes)) = screen else {
                let _ = seeded.send(Err("tmux could not capture the pane".into()));
                self.terminals.remove(pane);
                return;
            };
            replace_screen(&pipeline.shared, size, &bytes);
            pipeline.skip_output = false;
            if let Some(pid) = pipeline.shared.pid.get() {
                lock(&self.connection.followed).insert(pane.to_owned(), *pid);
            }
            let _ = seeded.send(Ok(()));
            if let Some(status) = info.and_then(|i| i.dead)
                && let Some(pipeline) = self.terminals.remove(pane)
            {
                finish(&self.connection, pipeline, status, None);
            }
        } else if let Some(status) = pipeline.final_status.take()
            && let Some(pipeline) = self.terminals.remove(pane)
        {
            finish(&self.connection, pipeline, status, screen);
        }
    }
}

/// Replaces a screen with one of `size` showing `bytes` (the title stays).
pub(super) fn replace_screen(shared: &Shared, (cols, rows): (u16, u16), bytes: &[u8]) {
    let scrollback = shared.scrollback_lines;
    shared.screen.with(|screen| {
        let title = screen.title().to_owned();
        *screen = Screen::new(cols, rows, scrollback);
        screen.process(bytes);
        if !title.is_empty() {
            screen.process(format!("\x1b]2;{title}\x07").as_bytes());
        }
    });
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
/// program prints can fall between them: answered twice, state then screen.
pub(super) fn seed_line(pane: &str, scrollback_lines: usize) -> (String, Vec<Reply>) {
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
    let line = format!(
        "display-message -p -t {pane} {format} ; capture-pane -p -e -t {pane} -S -{history}",
        format = quote(format.as_bytes()),
    );
    (
        line,
        vec![
            Reply::SeedInfo(pane.to_owned()),
            Reply::Seed(pane.to_owned()),
        ],
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
