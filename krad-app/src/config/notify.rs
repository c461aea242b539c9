//! `[notify]`: which moves of an agent are told to the user, and how — the
//! values only; [`crate::notify`] tells. A leaf.

use serde::Deserialize;

/// What a notification is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NotifyKind {
    /// The agent asks something (a permission, a login, a choice).
    Asking,
    /// The agent finished its turn (`working` → `idle`).
    Idle,
    /// The agent's program ended.
    Exited,
}

impl NotifyKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            NotifyKind::Asking => "asking",
            NotifyKind::Idle => "idle",
            NotifyKind::Exited => "exited",
        }
    }
}

/// `[notify]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyConfig {
    /// A program and its arguments, run with the record as JSON on stdin.
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// Also show a desktop notification with `notify-send`, when installed.
    #[serde(default)]
    pub desktop: bool,
    /// The kinds to tell about (default: all three).
    #[serde(default = "all_kinds")]
    pub on: Vec<NotifyKind>,
    /// At most one notification per terminal this often (default 10 s).
    #[serde(default = "default_debounce")]
    pub debounce_secs: u64,
}

fn all_kinds() -> Vec<NotifyKind> {
    vec![NotifyKind::Asking, NotifyKind::Idle, NotifyKind::Exited]
}

fn default_debounce() -> u64 {
    10
}

impl NotifyConfig {
    /// Checks what serde cannot: a command with a program.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(command) = &self.command
            && command.first().is_none_or(String::is_empty)
        {
            return Err("[notify] command needs a program: command = [\"notify-me\"]".into());
        }
        if self.command.is_none() && !self.desktop {
            return Err("[notify] says nothing to do: give a command, or desktop = true".into());
        }
        Ok(())
    }
}
