//! What a terminal's output signalled besides the screen: the bell and the
//! title, as the parser reports them (its event listener), and OSC 9 / OSC 777
//! notifications and OSC 7501 agent states, read from the OSC bodies the
//! screen's scan collects (the parser ignores these sequences).

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use alacritty_terminal::event::{Event, EventListener};

use super::Notification;

/// What was signalled since the screen last took it.
#[derive(Debug, Default)]
pub(super) struct Recorded {
    /// The window title (empty when never set or reset).
    pub(super) title: String,
    pub(super) bells: usize,
    pub(super) notifications: Vec<Notification>,
    pub(super) agent_states: Vec<String>,
}

impl Recorded {
    /// Records what the OSC sequence with this body (what follows `ESC ]`, up
    /// to its terminator) asks for, if it is a notification or an announced
    /// state.
    pub(super) fn osc(&mut self, body: &[u8]) {
        let params: Vec<&[u8]> = body.split(|&b| b == b';').collect();
        if let Some(notification) = notification(&params) {
            self.notifications.push(notification);
        } else if let Some(state) = agent_state(&params) {
            self.agent_states.push(state);
        }
    }
}

/// The parser's event listener: keeps the title and counts bells in a
/// [`Recorded`] the screen shares with it. Other events (answers to queries,
/// clipboard requests...) are dropped: no one answers a program through the
/// screen.
#[derive(Debug, Clone, Default)]
pub(super) struct Recorder(Arc<Mutex<Recorded>>);

impl Recorder {
    pub(super) fn lock(&self) -> MutexGuard<'_, Recorded> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl EventListener for Recorder {
    fn send_event(&self, event: Event) {
        match event {
            Event::Bell => {
                let mut recorded = self.lock();
                recorded.bells = recorded.bells.saturating_add(1);
            }
            Event::Title(title) => self.lock().title = title,
            Event::ResetTitle => self.lock().title.clear(),
            _ => {}
        }
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
