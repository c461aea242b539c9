//! Printing to stdout: JSON for `--json`, text otherwise. A closed stdout (a pipe
//! to `head`) ends the program quietly.

use std::io::Write;

use serde::Serialize;
use serde_json::Value;

use crate::connect::Received;

/// Prints an answer: with `--json` the app's JSON as it came, otherwise what
/// `human` prints of the typed answer.
pub(crate) fn emit<A>(json: bool, reply: &Received<A>, human: impl FnOnce(&A)) {
    if json {
        self::json(&reply.raw);
    } else {
        human(&reply.answer);
    }
}

/// Prints one JSON value on its own line.
pub(crate) fn json(value: &Value) {
    line(&value.to_string());
}

/// Prints one of the CLI's own messages (`{"Stopped":…}`, `{"Attach":…}`) as
/// a JSON line, its keys in order as any JSON value's.
pub(crate) fn message<T: Serialize>(message: &T) {
    match serde_json::to_value(message) {
        Ok(value) => json(&value),
        // Plain data always serializes; say so rather than print nothing.
        Err(e) => eprintln!("krad: cannot write the message as JSON: {e}"),
    }
}

/// Rings the terminal's bell.
pub(crate) fn bell() {
    let mut out = std::io::stdout().lock();
    if out.write_all(b"\x07").and_then(|()| out.flush()).is_err() {
        std::process::exit(0);
    }
}

/// Writes bytes as they are (a completion script, a patch).
pub(crate) fn bytes(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    if out.write_all(bytes).and_then(|()| out.flush()).is_err() {
        std::process::exit(0);
    }
}

/// Prints lines of text.
pub(crate) fn lines<S: AsRef<str>>(lines: impl IntoIterator<Item = S>) {
    for text in lines {
        line(text.as_ref());
    }
}

/// Prints one line of text.
pub(crate) fn line(text: &str) {
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{text}").and_then(|()| out.flush()).is_err() {
        // Broken pipe: the reader is gone, and so is the point of going on.
        std::process::exit(0);
    }
}
