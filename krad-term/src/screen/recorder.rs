//! The vt100 parser's callbacks for a [`super::Screen`]: the bell, OSC 9 / OSC
//! 777 notifications, OSC 7501 agent states, the title, and the scrollback rows
//! that leave the top of the main screen.

use std::collections::VecDeque;

use super::Notification;

/// The parser's callbacks: collects signals, the title and the scrollback.
#[derive(Debug, Default)]
pub(super) struct Recorder {
    pub(super) title: String,
    pub(super) bells: usize,
    pub(super) notifications: Vec<Notification>,
    pub(super) agent_states: Vec<String>,
    pub(super) scrollback: VecDeque<String>,
    pub(super) scrollback_cap: usize,
    /// Reused buffer for a row leaving the screen.
    pub(super) row: String,
}

impl vt100::Callbacks for Recorder {
    fn audible_bell(&mut self, _: &mut vt100::Screen) {
        self.bells = self.bells.saturating_add(1);
    }

    fn set_window_title(&mut self, _: &mut vt100::Screen, title: &[u8]) {
        self.title = String::from_utf8_lossy(title).into_owned();
    }

    fn unhandled_osc(&mut self, _: &mut vt100::Screen, params: &[&[u8]]) {
        if let Some(notification) = notification(params) {
            self.notifications.push(notification);
        } else if let Some(state) = agent_state(params) {
            self.agent_states.push(state);
        }
    }

    fn on_scroll(&mut self, row: vt100::capture::RowContents<'_>, alternate_screen: bool) {
        if alternate_screen || self.scrollback_cap == 0 {
            return;
        }
        self.row.clear();
        let mut state = vt100::capture::BasicFormattedCaptureState::new();
        if row
            .write_formatted_basic(&mut self.row, &mut state)
            .is_err()
        {
            return;
        }
        // Once full, the oldest line's buffer takes the new one.
        let mut line = if self.scrollback.len() >= self.scrollback_cap {
            self.scrollback.pop_front().unwrap_or_default()
        } else {
            String::new()
        };
        line.clear();
        if self.row.contains('\x1b') {
            line.extend(vt100::capture::basic_formatted_to_plain(&self.row));
        } else {
            line.push_str(&self.row);
        }
        line.truncate(line.trim_end().len());
        self.scrollback.push_back(line);
    }
}

/// The notification an OSC sequence (split at `;`) asks for, if any.
///
/// * `OSC 9 ; body`: a notification without title — unless the body is a ConEmu
///   command (a number, optionally followed by `;` and arguments, such as the
///   `9 ; 4 ; state ; progress` progress report).
/// * `OSC 777 ; notify ; title ; body`.
fn notification(params: &[&[u8]]) -> Option<Notification> {
    match params {
        [b"9", body @ ..] if !body.is_empty() => {
            let first = body[0];
            if !first.is_empty() && first.len() <= 2 && first.iter().all(u8::is_ascii_digit) {
                return None;
            }
            Some(Notification {
                title: None,
                body: join(body),
            })
        }
        [b"777", b"notify", title, body @ ..] => Some(Notification {
            title: Some(String::from_utf8_lossy(title).into_owned()),
            body: join(body),
        }),
        _ => None,
    }
}

/// The state an `OSC 7501 ; state=… ST` sequence announces (Codex CLI writes
/// them: `working`, `blocked:…:kind=permission`, `done`, `idle`, `clear`), cut to
/// 512 bytes.
fn agent_state(params: &[&[u8]]) -> Option<String> {
    let [b"7501", body @ ..] = params else {
        return None;
    };
    let joined = join(body);
    let state = joined.strip_prefix("state=")?;
    let mut end = state.len().min(512);
    while !state.is_char_boundary(end) {
        end -= 1;
    }
    Some(state[..end].to_owned())
}

/// OSC parameters joined back with the `;` that separated them.
fn join(parts: &[&[u8]]) -> String {
    String::from_utf8_lossy(&parts.join(&b';')).into_owned()
}
