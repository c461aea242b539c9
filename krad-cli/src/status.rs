//! A one-line live status on stderr while a command waits (`krad wait`,
//! `krad code`): what it waits on and for how long, redrawn in place every
//! half second and cleared when the wait ends. Only on a terminal: nothing
//! when stderr is piped or with `--json`. Knows nothing of the bus: the
//! caller says what the line is.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the line is drawn again.
const EVERY: Duration = Duration::from_millis(500);

/// The status line while it shows; dropping it clears it.
pub(crate) struct StatusLine {
    done: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl StatusLine {
    /// Shows `line(elapsed)` until dropped, when stderr is a terminal and the
    /// output is not `--json`; `None` otherwise.
    pub(crate) fn show(
        json: bool,
        line: impl Fn(Duration) -> String + Send + 'static,
    ) -> Option<StatusLine> {
        if json || !std::io::stderr().is_terminal() {
            return None;
        }
        let done = Arc::new(AtomicBool::new(false));
        let stop = done.clone();
        let started = Instant::now();
        let thread = std::thread::Builder::new()
            .name("krad-status".into())
            .spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let text = line(started.elapsed());
                    let width = crate::render::terminal_width().saturating_sub(1);
                    let shown: String = text.chars().take(width).collect();
                    let mut err = std::io::stderr().lock();
                    // Carriage return, the line, then clear to its end.
                    let _ = write!(err, "\r{shown}\x1b[K");
                    let _ = err.flush();
                    drop(err);
                    let until = Instant::now() + EVERY;
                    while Instant::now() < until && !stop.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            })
            .ok()?;
        Some(StatusLine {
            done,
            thread: Some(thread),
        })
    }
}

impl Drop for StatusLine {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[K");
        let _ = err.flush();
    }
}

/// `12 s`, `3 min 4 s`.
pub(crate) fn elapsed(time: Duration) -> String {
    let secs = time.as_secs();
    if secs < 60 {
        format!("{secs} s")
    } else {
        format!("{} min {} s", secs / 60, secs % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elapsed_reads_as_minutes_and_seconds() {
        assert_eq!(elapsed(Duration::from_millis(12_400)), "12 s");
        assert_eq!(elapsed(Duration::from_secs(184)), "3 min 4 s");
    }

    #[test]
    fn nothing_shows_with_json() {
        assert!(StatusLine::show(true, |_| String::new()).is_none());
    }
}
