//! Questions an agent CLI asks on its screen, where no hook can tell: a login,
//! trusting the folder, approving an API key. Found by text the CLI shows, per
//! kind of agent; each becomes `asking` (`state_source: "screen"`) with a message
//! that says what the user must do, until the text is gone.

use crate::config::HookKind;

/// A screen that asks something of the user.
struct Question {
    /// Text the screen shows while it asks (matched case-sensitively).
    marker: &'static str,
    /// The agent's message meanwhile.
    message: &'static str,
}

/// Claude Code 2.1 (checked against 2.1.197).
const CLAUDE: &[Question] = &[
    Question {
        marker: "Is this a project you created or one you trust",
        message: "needs you: trust this folder",
    },
    Question {
        marker: "Do you trust the files in this folder",
        message: "needs you: trust this folder",
    },
    Question {
        marker: "Select login method",
        message: "needs you: log in",
    },
    Question {
        marker: "Do you want to use this API key",
        message: "needs you: approve the API key",
    },
    Question {
        marker: "Choose the text style",
        message: "needs you: finish Claude Code's setup",
    },
];

/// Codex CLI 0.171.
const CODEX: &[Question] = &[
    Question {
        marker: "Sign in with ChatGPT",
        message: "needs you: log in",
    },
    Question {
        marker: "Do you trust the contents of this directory",
        message: "needs you: trust this folder",
    },
    Question {
        marker: "allow Codex to work in this folder",
        message: "needs you: trust this folder",
    },
];

/// Whether agents of this kind have screen questions to look for.
pub(crate) fn known(hooks: HookKind) -> bool {
    !questions(hooks).is_empty()
}

fn questions(hooks: HookKind) -> &'static [Question] {
    match hooks {
        HookKind::Claude => CLAUDE,
        HookKind::Codex => CODEX,
        HookKind::None => &[],
    }
}

/// The message of the question `screen` asks, if it asks one.
pub(crate) fn find(hooks: HookKind, screen: &str) -> Option<&'static str> {
    questions(hooks)
        .iter()
        .find(|q| screen.contains(q.marker))
        .map(|q| q.message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_screens() {
        let trust = " Quick safety check: Is this a project you created or one you trust? (Like your own code…)\n ❯ 1. Yes, I trust this folder";
        assert_eq!(
            find(HookKind::Claude, trust),
            Some("needs you: trust this folder")
        );
        assert_eq!(
            find(
                HookKind::Claude,
                "Select login method:\n ❯ 1. Claude account"
            ),
            Some("needs you: log in")
        );
        assert_eq!(find(HookKind::Claude, "> fix the bug"), None);
        assert_eq!(find(HookKind::None, trust), None);
        assert!(known(HookKind::Codex) && !known(HookKind::None));
    }
}
