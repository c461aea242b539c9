//! The user's terminal while the home screen runs (or `krad attach`): raw
//! mode and the alternate screen, given back by a guard on every way out —
//! the end, an error, a panic on any thread (a hook; a panic on a thread
//! other than the main one then ends the program, status 101), a signal (the
//! loop ends, the guard drops). The one guard of the workspace: `krad attach` takes it
//! too. Owns no state of the UI; must never import the bus.

use std::io::Write;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether the terminal still needs putting back.
static ACTIVE: AtomicBool = AtomicBool::new(false);
static HOOK: Once = Once::new();

/// Attributes, scroll region, keypad and cursor modes, bracketed paste, mouse
/// and focus reporting, the kitty keyboard protocol, the cursor shown, the
/// main screen back: whatever an attached program set, undone.
const RESET: &[u8] = b"\x1b[0m\x1b[r\x1b[?1l\x1b>\x1b[?2004l\x1b[?1000l\x1b[?1002l\x1b[?1003l\
\x1b[?1005l\x1b[?1006l\x1b[?1015l\x1b[?1004l\x1b[<u\x1b[?25h\x1b[?1049l";

/// The same, but staying on the alternate screen (after an attachment).
pub(crate) const RESET_KEEP_SCREEN: &[u8] = b"\x1b[0m\x1b[r\x1b[?1l\x1b>\x1b[?2004l\x1b[?1000l\
\x1b[?1002l\x1b[?1003l\x1b[?1005l\x1b[?1006l\x1b[?1015l\x1b[?1004l\x1b[<u\x1b[H\x1b[2J";

/// The terminal in raw mode on the alternate screen until dropped.
#[derive(Debug)]
pub struct TerminalGuard;

impl TerminalGuard {
    /// Takes the terminal for the home screen (bracketed paste on: a paste
    /// goes into a field whole).
    pub(crate) fn enter() -> std::io::Result<TerminalGuard> {
        TerminalGuard::enter_with(b"\x1b[?1049h\x1b[?2004h\x1b[H\x1b[2J")
    }

    /// Takes the terminal: raw mode, then `prologue` (which enters the
    /// alternate screen, and whatever modes the caller wants); everything is
    /// undone when the guard drops, or on a panic.
    pub fn enter_with(prologue: &[u8]) -> std::io::Result<TerminalGuard> {
        HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                let was_taken = restore();
                previous(info);
                // A thread of the UI (its bus, its keyboard) gone would leave
                // it half alive on a terminal given back: it ends, as the
                // main thread's panic ends it.
                if was_taken && std::thread::current().name() != Some("main") {
                    std::process::exit(101);
                }
            }));
        });
        crossterm::terminal::enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        write_out(prologue);
        Ok(TerminalGuard)
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// Puts the terminal back, once; says whether it had been taken.
fn restore() -> bool {
    if !ACTIVE.swap(false, Ordering::SeqCst) {
        return false;
    }
    write_out(RESET);
    let _ = crossterm::terminal::disable_raw_mode();
    true
}

/// Writes to the terminal; a closed one is no error here.
pub(crate) fn write_out(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(bytes).and_then(|()| out.flush());
}
