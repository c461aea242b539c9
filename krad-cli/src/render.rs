//! Human formatting shared by the commands: agent records (an unknown state
//! prints `?`), relative times, one-line text cut to a width, and tables fitted
//! to the terminal.

use std::time::SystemTime;

use krad_bus::protocol::AgentRecord;

/// The width used on a terminal whose size cannot be read.
pub(crate) const DEFAULT_WIDTH: usize = 100;

/// The width of output that goes to a pipe or a file: nothing is cut.
pub(crate) const UNLIMITED: usize = usize::MAX / 4;

/// The width to fit tables to: `$COLUMNS`; else the terminal's width; else
/// (stdout is a pipe or a file) [`UNLIMITED`], so that scripts and logs get
/// whole cells.
pub(crate) fn terminal_width() -> usize {
    let columns = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&c| c > 0);
    if let Some(columns) = columns {
        return columns;
    }
    if !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        return UNLIMITED;
    }
    crossterm::terminal::size()
        .ok()
        .map(|(cols, _)| usize::from(cols))
        .filter(|&cols| cols > 0)
        .unwrap_or(DEFAULT_WIDTH)
}

/// An agent record as the commands print it. States and sources from a newer
/// app than this CLI knows print as `?`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Agent<'a>(pub &'a AgentRecord);

impl<'a> Agent<'a> {
    /// The terminal id as text.
    pub(crate) fn id(&self) -> String {
        self.0.terminal.to_string()
    }

    /// The name given at spawn.
    pub(crate) fn name(&self) -> Option<&'a str> {
        self.0.name.as_deref().filter(|n| !n.is_empty())
    }

    /// The environment, with `@host` for an agent on an SSH host.
    pub(crate) fn place(&self) -> String {
        match &self.0.host {
            Some(host) => format!("{}@{host}", self.0.environment),
            None => self.0.environment.clone(),
        }
    }

    /// The state (`working`, `idle`, …; `?` for one this CLI does not know).
    pub(crate) fn state(&self) -> &'static str {
        self.0.state.as_str()
    }

    /// Where the state came from (`hook`, `quiet`, …; `?` for one this CLI does not know).
    pub(crate) fn source(&self) -> &'static str {
        self.0.state_source.as_str()
    }

    /// The last message, if any.
    pub(crate) fn message(&self) -> Option<&'a str> {
        self.0.message.as_deref().filter(|m| !m.trim().is_empty())
    }

    /// The title, if any.
    pub(crate) fn title(&self) -> Option<&'a str> {
        self.0.title.as_deref().filter(|t| !t.trim().is_empty())
    }

    /// When the state last changed (RFC 3339), if the app said.
    pub(crate) fn state_since(&self) -> Option<&'a str> {
        Some(self.0.state_since.as_str()).filter(|s| !s.trim().is_empty())
    }

    /// `idle (hook)`, `? (quiet)`.
    pub(crate) fn state_label(&self) -> String {
        format!("{} ({})", self.state(), self.source())
    }

    /// How long the agent has been in its state, relative to `now` (`12s`, `3m`).
    pub(crate) fn since(&self, now: SystemTime) -> String {
        self.state_since()
            .and_then(|since| elapsed(since, now))
            .map_or_else(|| "?".to_owned(), relative)
    }

    /// How the process ended, when that was not a clean exit: `exited with code 3`,
    /// `was killed by signal 9`.
    pub(crate) fn failure(&self) -> Option<String> {
        match (self.0.exit_code, self.0.signal) {
            (_, Some(signal)) => Some(format!("was killed by signal {signal}")),
            (Some(code), None) if code != 0 => Some(format!("exited with code {code}")),
            _ => None,
        }
    }

    /// How the process ended, if it did: `code 0`, `signal 9` — unless its
    /// message says so already (`exited with code 3`: said twice otherwise).
    pub(crate) fn ending(&self) -> Option<String> {
        let ending = match (self.0.exit_code, self.0.signal) {
            (_, Some(signal)) => format!("signal {signal}"),
            (Some(code), None) => format!("code {code}"),
            (None, None) => return None,
        };
        let said = self
            .message()
            .is_some_and(|message| message.contains(&ending));
        (!said).then_some(ending)
    }

    /// The MESSAGE column: how it ended (for exited agents), then the message, on one line.
    pub(crate) fn message_cell(&self) -> String {
        let message = self.message().map(one_line).unwrap_or_default();
        match self.ending() {
            Some(ending) if message.is_empty() => ending,
            Some(ending) => format!("{ending} — {message}"),
            None => message,
        }
    }

    /// The cells of a row of `krad ls` (`with_place`: ENV and PROFILE too) and
    /// `krad watch`: ID, NAME, [ENV, PROFILE,] STATE, SOURCE, SINCE, MESSAGE.
    pub(crate) fn row(&self, now: SystemTime, with_place: bool) -> Vec<String> {
        let mut row = vec![
            self.id(),
            self.name().map_or_else(|| "-".to_owned(), one_line),
        ];
        if with_place {
            row.push(one_line(&self.place()));
            row.push(one_line(&self.0.profile));
        }
        row.extend([
            self.state().to_owned(),
            self.source().to_owned(),
            self.since(now),
            self.message_cell(),
        ]);
        row
    }

    /// What its processes use now, as last sampled: none for an exited
    /// agent (its last sample is of processes that are gone), before the
    /// first sample, and on an SSH host without tmux.
    pub(crate) fn live_usage(&self) -> Option<&'a krad_bus::protocol::Usage> {
        self.0
            .usage
            .as_ref()
            .filter(|_| self.0.state != krad_bus::protocol::AgentState::Exited)
    }

    /// The CPU cell: `12.5%` of one core, as last sampled; `-` when there is
    /// no live sample ([`Agent::live_usage`]).
    pub(crate) fn cpu_cell(&self) -> String {
        self.live_usage().map_or_else(
            || "-".to_owned(),
            |u| format!("{:.1}%", u.cpu_percent.value()),
        )
    }

    /// The MEM cell: the process tree's resident memory (`180.2 MiB`), or `-`.
    pub(crate) fn memory_cell(&self) -> String {
        self.live_usage()
            .map_or_else(|| "-".to_owned(), |u| bytes(u.rss_bytes))
    }

    /// The COST cell: what its model calls cost (`$0.0123`), `?` when a
    /// model used has no price, `-` before its hooks named its files.
    pub(crate) fn cost_cell(&self) -> String {
        cost(self.0.tokens.as_ref())
    }

    /// The TOKENS cell: every token its model calls used, input (cached or
    /// not) and output (`12.3k`), or `-`.
    pub(crate) fn tokens_cell(&self) -> String {
        self.0.tokens.as_ref().map_or_else(
            || "-".to_owned(),
            |t| count(t.input + t.output + t.cache_write + t.cache_read),
        )
    }

    /// `4 fix-login idle (hook) — <message>`.
    pub(crate) fn summary_line(&self) -> String {
        let mut line = self.id();
        if let Some(name) = self.name() {
            line.push(' ');
            line.push_str(&one_line(name));
        }
        line.push(' ');
        line.push_str(&self.state_label());
        if let Some(ending) = self.ending() {
            line.push_str(&format!(", {ending}"));
        }
        if let Some(message) = self.message() {
            let message = one_line(message);
            // `exited (process) — exited with code 3` would say it twice.
            match message.strip_prefix(self.state()) {
                Some(rest) if rest.starts_with(' ') => line.push_str(rest),
                _ => {
                    line.push_str(" — ");
                    line.push_str(&message);
                }
            }
        }
        line
    }
}

/// The wire name of a protocol enum's value (`setting_up`), or `?` for a value
/// from a newer app than this CLI knows (each such enum's `Other`).
pub(crate) fn wire_name<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) if name != "other" => name,
        _ => "?".to_owned(),
    }
}

pub(crate) use krad_tui::{counted, elapsed, one_line, relative, short_commit};

/// A size in bytes for people: `512 B`, `4.0 KiB`, `1.2 GiB`.
pub(crate) fn bytes(bytes: u64) -> String {
    krad_tui::bytes_in(bytes, ["B", "KiB", "MiB", "GiB", "TiB", "PiB"], " ")
}

/// Cuts `text` to at most `width` characters, ending in `…` when cut.
pub(crate) fn truncate(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    if width == 0 {
        return String::new();
    }
    let mut cut: String = text.chars().take(width - 1).collect();
    cut.push('…');
    cut
}

/// A table column: its header, and how wide it may grow and shrink. The last
/// column of a table takes whatever width is left.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Column {
    /// The header.
    pub header: &'static str,
    /// The widest it grows to fit its cells.
    pub max: usize,
    /// The narrowest it shrinks to when the line is too long.
    pub min: usize,
}

impl Column {
    /// A column.
    pub(crate) const fn new(header: &'static str, min: usize, max: usize) -> Column {
        Column { header, max, min }
    }
}

/// Lays rows out under headers, fitted to `width`: columns grow to their cells
/// (up to their max), shrink (down to their min) when the line is too long, and
/// the last column gets the rest; cells that do not fit end in `…`.
pub(crate) fn table(columns: &[Column], rows: &[Vec<String>], width: usize) -> Vec<String> {
    let Some(last) = columns.len().checked_sub(1) else {
        return Vec::new();
    };
    let mut widths: Vec<usize> = columns[..last]
        .iter()
        .enumerate()
        .map(|(i, column)| {
            let cells = rows
                .iter()
                .filter_map(|row| row.get(i))
                .map(|cell| cell.chars().count());
            cells
                .chain(std::iter::once(column.header.chars().count()))
                .max()
                .unwrap_or(0)
                .min(column.max.max(column.min))
        })
        .collect();
    let gaps = 2 * last;
    // Leave the last column at least its header, when shrinking others can.
    let wanted_last = columns[last].header.chars().count().min(columns[last].max);
    while widths.iter().sum::<usize>() + gaps + wanted_last > width {
        let shrinkable = widths
            .iter()
            .enumerate()
            .filter(|&(i, &w)| w > columns[i].min)
            .max_by_key(|&(_, &w)| w)
            .map(|(i, _)| i);
        match shrinkable {
            Some(i) => widths[i] -= 1,
            None => break,
        }
    }
    let last_width = width
        .saturating_sub(widths.iter().sum::<usize>() + gaps)
        .min(columns[last].max);
    widths.push(last_width);

    let line = |cells: &mut dyn Iterator<Item = &str>| -> String {
        let mut text = String::new();
        for (i, cell) in cells.enumerate().take(widths.len()) {
            if i > 0 {
                text.push_str("  ");
            }
            let cell = truncate(cell, widths[i]);
            text.push_str(&cell);
            if i < last {
                let pad = widths[i].saturating_sub(cell.chars().count());
                text.extend(std::iter::repeat_n(' ', pad));
            }
        }
        text.trim_end().to_owned()
    };
    let mut lines = Vec::with_capacity(rows.len() + 1);
    lines.push(line(&mut columns.iter().map(|c| c.header)));
    for row in rows {
        lines.push(line(&mut row.iter().map(String::as_str)));
    }
    lines
}

/// A whole record as the app sends it, with `fields` put over a plain one.
#[cfg(test)]
pub(crate) fn test_record(fields: serde_json::Value) -> AgentRecord {
    let mut record = serde_json::json!({"terminal":1,"environment":"main","name":null,
        "profile":"shell","command":[],"lead":false,"parent":null,"group":null,"variant":null,
        "state":"working","state_source":"process","message":null,"exit_code":null,
        "signal":null,"pid":null,"title":null,"started_at":"2025-01-01T00:00:00Z",
        "state_since":"2025-01-01T00:00:00Z","rev":1});
    if let (Some(record), Some(fields)) = (record.as_object_mut(), fields.as_object()) {
        record.extend(fields.clone());
    }
    serde_json::from_value(record).expect("a whole record")
}

/// A COST cell: `$0.0123`, `?` without a price, `-` without tokens.
pub(crate) fn cost(tokens: Option<&krad_bus::protocol::Tokens>) -> String {
    match tokens {
        None => "-".to_owned(),
        Some(tokens) => tokens
            .cost_usd
            .map_or_else(|| "?".to_owned(), |c| c.to_string()),
    }
}

/// A count, short: `950`, `12.3k`, `4.5M`.
pub(crate) fn count(n: u64) -> String {
    match n {
        0..1000 => n.to_string(),
        1000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    #[test]
    fn sizes_in_binary_units() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(4096), "4.0 KiB");
        assert_eq!(bytes(1_288_490_189), "1.2 GiB");
    }

    #[test]
    fn relative_times_use_the_largest_unit() {
        assert_eq!(relative(Duration::from_secs(0)), "0s");
        assert_eq!(relative(Duration::from_secs(12)), "12s");
        assert_eq!(relative(Duration::from_secs(190)), "3m");
        assert_eq!(relative(Duration::from_secs(3 * 3600 + 5)), "3h");
        assert_eq!(relative(Duration::from_secs(2 * 86_400)), "2d");
    }

    #[test]
    fn elapsed_reads_rfc3339_and_clamps_the_future() {
        let now = humantime::parse_rfc3339("2025-01-01T00:01:00Z").unwrap();
        assert_eq!(
            elapsed("2025-01-01T00:00:48.250Z", now).map(|d| d.as_secs()),
            Some(11)
        );
        assert_eq!(elapsed("2025-01-01T00:02:00Z", now), Some(Duration::ZERO));
        assert_eq!(elapsed("yesterday", now), None);
    }

    #[test]
    fn one_line_drops_control_characters() {
        assert_eq!(one_line("  a\nb\t\tc \x1b[31mred "), "a b c [31mred");
        assert_eq!(one_line(""), "");
    }

    #[test]
    fn truncate_counts_characters() {
        assert_eq!(truncate("héllo", 5), "héllo");
        assert_eq!(truncate("héllo", 4), "hél…");
        assert_eq!(truncate("héllo", 1), "…");
        assert_eq!(truncate("héllo", 0), "");
    }

    #[test]
    fn tables_fit_the_width() {
        let columns = [
            Column::new("ID", 2, 6),
            Column::new("NAME", 4, 24),
            Column::new("MESSAGE", 0, usize::MAX),
        ];
        let rows = vec![
            vec![
                "4".into(),
                "fix-login".into(),
                "running the tests now".into(),
            ],
            vec![
                "12".into(),
                "a-very-long-agent-name-indeed-yes".into(),
                String::new(),
            ],
        ];
        let lines = table(&columns, &rows, 40);
        assert!(lines.iter().all(|l| l.chars().count() <= 40), "{lines:#?}");
        assert_eq!(lines[0], "ID  NAME                      MESSAGE");
        assert!(lines[1].starts_with("4   fix-login"), "{lines:#?}");
        assert!(lines[2].contains('…'), "{lines:#?}");

        // Too narrow: the name shrinks before the line overflows.
        let lines = table(&columns, &rows, 20);
        assert!(lines.iter().all(|l| l.chars().count() <= 20), "{lines:#?}");
    }

    #[test]
    fn records_print_what_is_there() {
        let quiet = test_record(json!({"terminal":4}));
        assert_eq!(Agent(&quiet).summary_line(), "4 working (process)");
        assert_eq!(Agent(&quiet).failure(), None);
        let undated = test_record(json!({"state_since":""}));
        assert_eq!(Agent(&undated).since(SystemTime::now()), "?");
        let failed = test_record(json!({"exit_code":2,"state":"exited"}));
        assert_eq!(
            Agent(&failed).failure().as_deref(),
            Some("exited with code 2")
        );
        // Issue 48: `code 3 — exited with code 3` said it twice.
        let said = test_record(json!({"terminal": 5, "state": "exited", "exit_code": 3,
            "message": "exited with code 3"}));
        assert_eq!(Agent(&said).message_cell(), "exited with code 3");
        assert_eq!(
            Agent(&said).summary_line(),
            "5 exited (process) with code 3"
        );
        let killed = test_record(json!({"terminal": 4, "name": "x", "state": "exited",
            "state_source": "process", "exit_code": null, "signal": 9, "message": "bye"}));
        assert_eq!(
            Agent(&killed).summary_line(),
            "4 x exited (process), signal 9 — bye"
        );
        assert_eq!(
            Agent(&killed).failure().as_deref(),
            Some("was killed by signal 9")
        );
        let remote = test_record(json!({"environment":"feat","host":"gpu"}));
        assert_eq!(Agent(&remote).place(), "feat@gpu");
    }

    #[test]
    fn a_newer_apps_states_print_as_question_marks() {
        let newer = test_record(json!({"state":"sleeping","state_source":"telepathy"}));
        assert_eq!(Agent(&newer).state_label(), "? (?)");
        assert_eq!(
            wire_name(&krad_bus::protocol::EnvironmentStatus::SettingUp),
            "setting_up"
        );
        assert_eq!(
            wire_name(&krad_bus::protocol::EnvironmentStatus::Other),
            "?"
        );
    }
}
