//! Writes a sandbox refused, told to the user: the kernel answers a write
//! outside the agent's environment with `EROFS`, which the agent's tools print
//! as their error (`Read-only file system`) — the app does not see the write
//! itself. So the watcher of a contained terminal reads its screen, at most
//! once per [`LOOK_EVERY`] while output flows, and each new line naming that
//! error goes to the app's log (`info`), once, beside the connections an
//! allowlist refused.

use std::collections::HashSet;
use std::time::Duration;

use krad_term::Snapshot;

/// How often a contained terminal's screen is read while its output flows.
pub(crate) const LOOK_EVERY: Duration = Duration::from_secs(1);

/// The lines of scrollback read with the screen: what scrolled by since the
/// last look, on a busy terminal.
pub(crate) const SCROLLBACK: usize = 200;

/// The error a refused write gets, as tools print it (strerror of `EROFS`).
const REFUSED: &str = "Read-only file system";

/// Lines logged at most, per terminal (then no more are).
const MAX_LINES: usize = 100;

/// What one contained terminal's screen said of refused writes so far.
#[derive(Debug, Default)]
pub(crate) struct Refusals {
    told: HashSet<String>,
}

impl Refusals {
    /// Logs the lines of `snapshot` naming a refused write not told before;
    /// returns them.
    pub(crate) fn look(&mut self, id: u64, snapshot: &Snapshot) -> Vec<String> {
        let lines = snapshot
            .scrollback
            .iter()
            .map(String::as_str)
            .chain(snapshot.screen.lines());
        let mut new = Vec::new();
        for line in lines.map(str::trim).filter(|l| l.contains(REFUSED)) {
            if self.told.len() >= MAX_LINES || self.told.contains(line) {
                continue;
            }
            self.told.insert(line.to_owned());
            tracing::info!(
                terminal = id,
                "the sandbox refused a write outside the agent's environment: {line}"
            );
            new.push(line.to_owned());
        }
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn screen(scrollback: &[&str], screen: &str) -> Snapshot {
        let mut snapshot = Snapshot::blank((80, 24));
        snapshot.scrollback = scrollback.iter().map(|s| (*s).to_owned()).collect();
        snapshot.screen = screen.to_owned();
        snapshot
    }

    #[test]
    fn each_refused_write_is_told_once() {
        let mut refusals = Refusals::default();
        let first = screen(
            &["sh: 1: cannot create /etc/x: Read-only file system"],
            "$ touch /usr/y\ntouch: cannot touch '/usr/y': Read-only file system\n$",
        );
        assert_eq!(refusals.look(4, &first).len(), 2);
        assert!(refusals.look(4, &first).is_empty(), "told once");
        let calm = screen(&[], "all good\n$");
        assert!(refusals.look(4, &calm).is_empty());
    }
}
