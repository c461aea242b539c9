//! Typing into a terminal: text as a paste (bracketed when the program asked
//! for it), Enter as a write of its own once the paste is taken, and named keys
//! one at a time, each once the program took the one before.
//!
//! A TUI that reads a paste and a carriage return in one read may take the
//! return as part of the paste (a newline in the input box) and never submit;
//! waiting until the program redrew after the paste makes Enter a keystroke.

use std::time::Duration;

use krad_bus::protocol::keys::Key;
use krad_term::Terminal;

/// How long to wait for the program to show it took a paste before Enter.
const PASTE_TAKEN_WITHIN: Duration = Duration::from_millis(3000);
/// How long to wait for the program to show it took a key before the next.
const KEY_TAKEN_WITHIN: Duration = Duration::from_millis(300);
/// All the waiting one call may do (a Send's deadline is 10 s): past it, the
/// rest is written without waiting.
const WAITING_BUDGET: Duration = Duration::from_secs(6);
/// How often the screen is looked at meanwhile.
const POLL: Duration = Duration::from_millis(10);
/// A program that redrew may redraw once more for the same write (a paste's
/// echo, then the input box growing): this much calm counts as taken.
const SETTLED: Duration = Duration::from_millis(40);

/// Why typing stopped.
#[derive(Debug)]
pub(crate) enum TypeError {
    /// The write failed.
    Io(std::io::Error),
    /// The terminal's input is closed.
    Closed,
}

impl std::fmt::Display for TypeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TypeError::Io(e) => write!(f, "{e}"),
            TypeError::Closed => f.write_str("its input is closed"),
        }
    }
}

/// Types `text` (a paste), then presses Enter if asked, then each key.
pub(crate) async fn type_into(
    terminal: &dyn Terminal,
    text: &str,
    enter: bool,
    keys: &[Key],
) -> Result<(), TypeError> {
    let budget = tokio::time::Instant::now() + WAITING_BUDGET;
    // How long the write in hand may wait before the next one, if one follows.
    let wait = |more: bool, within: Duration| {
        more.then(|| (tokio::time::Instant::now() + within).min(budget))
    };
    if !text.is_empty() {
        let more = enter || !keys.is_empty();
        let bytes = paste(text, terminal.bracketed_paste());
        let shown = echo_of(text);
        write_taken(terminal, bytes, wait(more, PASTE_TAKEN_WITHIN), shown).await?;
    }
    if enter {
        let more = !keys.is_empty();
        write_taken(terminal, b"\r".to_vec(), wait(more, KEY_TAKEN_WITHIN), None).await?;
    }
    for (i, key) in keys.iter().enumerate() {
        let bytes = key.bytes(terminal.snapshot(0).application_cursor);
        let more = i + 1 < keys.len();
        write_taken(terminal, bytes, wait(more, KEY_TAKEN_WITHIN), None).await?;
    }
    Ok(())
}

/// How long a typed prompt may take to be submitted before Enter is tried again.
const SUBMITTED_WITHIN: Duration = Duration::from_millis(1500);
/// How many more times Enter is tried.
const SUBMIT_AGAIN: usize = 2;
/// Between taking back a newline and pressing Enter again.
const AFTER_BACKSPACE: Duration = Duration::from_millis(150);

/// After a typed prompt's Enter: until `submitted` says the program took the
/// prompt, looks at the input line and tries again — Enter when the prompt
/// still waits on the cursor's line (the key was dropped), Backspace and Enter
/// when the cursor sits on a new empty line under it (Enter became a newline in
/// the input box). Claude Code 2.1.332, busy a moment just after its trust
/// dialog, did both. Anything else on the screen is left alone.
pub(crate) async fn until_submitted(
    terminal: &dyn Terminal,
    text: &str,
    submitted: impl Fn() -> bool,
) -> Result<(), TypeError> {
    let Some(shown) = echo_of(text) else {
        return Ok(());
    };
    for _ in 0..SUBMIT_AGAIN {
        let until = tokio::time::Instant::now() + SUBMITTED_WITHIN;
        while tokio::time::Instant::now() < until {
            if submitted() {
                return Ok(());
            }
            tokio::time::sleep(POLL * 5).await;
        }
        let snapshot = terminal.snapshot(0);
        let lines: Vec<&str> = snapshot.screen.lines().collect();
        let row = usize::from(snapshot.cursor.0);
        let here = lines.get(row).copied().unwrap_or_default();
        let above = row
            .checked_sub(1)
            .and_then(|r| lines.get(r))
            .copied()
            .unwrap_or_default();
        if here.contains(shown) {
            tracing::debug!(
                terminal = terminal.id(),
                "the prompt's Enter was dropped: again"
            );
        } else if here.trim().is_empty() && above.contains(shown) {
            tracing::debug!(
                terminal = terminal.id(),
                "the prompt's Enter became a newline"
            );
            write_taken(terminal, b"\x7f".to_vec(), None, None).await?;
            tokio::time::sleep(AFTER_BACKSPACE).await;
        } else {
            return Ok(());
        }
        write_taken(terminal, b"\r".to_vec(), None, None).await?;
    }
    Ok(())
}

/// What of a one-line text its echo shows for sure: its last few characters (a
/// long line may wrap anywhere before them). `None` for text whose echo can look
/// otherwise (several lines become "[Pasted text]" in some TUIs).
fn echo_of(text: &str) -> Option<&str> {
    let text = text.trim_end();
    if text.is_empty() || text.contains(['\n', '\r']) || text.chars().any(char::is_control) {
        return None;
    }
    let start = text
        .char_indices()
        .rev()
        .nth(ECHO_CHARS - 1)
        .map_or(0, |(i, _)| i);
    // A wrapped line loses the blank it wrapped at.
    Some(text[start..].trim_start())
}

/// Characters of the text's end looked for in its echo.
const ECHO_CHARS: usize = 12;

/// Writes `bytes`; with `until`, returns once the screen changed and settled —
/// and shows `shown`, when given — or at `until` (a program that shows nothing).
async fn write_taken(
    terminal: &dyn Terminal,
    bytes: Vec<u8>,
    until: Option<tokio::time::Instant>,
    shown: Option<&str>,
) -> Result<(), TypeError> {
    let before = until.map(|_| fingerprint(terminal));
    match terminal.write(bytes).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(TypeError::Io(e)),
        Err(_) => return Err(TypeError::Closed),
    }
    let (Some(before), Some(until)) = (before, until) else {
        return Ok(());
    };
    let mut last = before;
    let mut calm_since: Option<tokio::time::Instant> = None;
    while tokio::time::Instant::now() < until {
        tokio::time::sleep(POLL).await;
        let now = fingerprint(terminal);
        if now != last {
            last = now;
            calm_since = Some(tokio::time::Instant::now());
        } else if let Some(since) = calm_since
            && since.elapsed() >= SETTLED
            && shown.is_none_or(|shown| last.0.contains(shown))
        {
            return Ok(());
        }
    }
    Ok(())
}

/// What the screen shows, cheaply compared: its text and cursor.
fn fingerprint(terminal: &dyn Terminal) -> (String, (u16, u16)) {
    let snapshot = terminal.snapshot(0);
    (snapshot.screen, snapshot.cursor)
}

/// The bytes that type `text`: wrapped in bracketed-paste markers when the
/// program turned bracketed paste on, so several lines arrive as one.
pub(crate) fn paste(text: &str, bracketed: bool) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(text.len() + 12);
    if bracketed && !text.is_empty() {
        bytes.extend_from_slice(b"\x1b[200~");
        // A paste-end marker inside the text would end the paste early.
        bytes.extend_from_slice(text.replace("\x1b[201~", "").as_bytes());
        bytes.extend_from_slice(b"\x1b[201~");
    } else {
        bytes.extend_from_slice(text.as_bytes());
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_echo_looked_for_is_the_end_of_one_line() {
        assert_eq!(echo_of("run the tests again"), Some("tests again"));
        assert_eq!(echo_of("short"), Some("short"));
        assert_eq!(echo_of("héllo wörld, ça va"), Some("wörld, ça va"));
        assert_eq!(echo_of("two\nlines"), None);
        assert_eq!(echo_of("  "), None);
    }

    #[test]
    fn pastes_are_wrapped_when_asked() {
        assert_eq!(paste("a\nb", true), b"\x1b[200~a\nb\x1b[201~");
        assert_eq!(paste("ls", false), b"ls");
        assert_eq!(paste("a\x1b[201~b", true), b"\x1b[200~ab\x1b[201~");
        assert_eq!(paste("", true), b"");
    }
}
