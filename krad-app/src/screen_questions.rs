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

/// Claude Code 2.1 (checked against 2.1.197, 2.1.332 and 2.1.337).
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
        marker: "Not logged in · Run /login",
        message: "needs you: log in",
    },
    // 2.1.332 says nothing at startup; a prompt gets this line.
    Question {
        marker: "Not logged in · Please run /login",
        message: "needs you: log in",
    },
    // 2.1.332 offers its auto mode at startup when manual mode is the default.
    Question {
        marker: "Make auto mode your default permission mode?",
        message: "needs you: choose a permission mode",
    },
    // 2.1.332 in auto mode, when its server-side check is out of reach.
    Question {
        marker: "Auto mode can't check actions in this session",
        message: "needs you: auto mode can't check actions: stay in it or leave it",
    },
    Question {
        marker: "Choose the text style",
        message: "needs you: finish Claude Code's setup",
    },
];

/// Codex CLI 0.171 (checked against 0.171.0).
const CODEX: &[Question] = &[
    Question {
        marker: "Sign in with ChatGPT",
        message: "needs you: log in",
    },
    Question {
        marker: "Trust this folder? Codex can",
        message: "needs you: trust this folder",
    },
    // At startup, when a hook is new or changed and not trusted.
    Question {
        marker: "Hooks need review",
        message: "needs you: review Codex's hooks",
    },
];

/// Text on Claude Code's screen while its own permission dialog is up.
const CLAUDE_DIALOG: &[&str] = &[
    "Do you want to proceed?",
    "Do you want to make this edit",
    "Do you want to create",
    "Esc to cancel · Tab to amend",
];

/// Claude Code's line once its dialog was declined (Escape or "No"): the turn
/// is over, and no hook says so.
const CLAUDE_INTERRUPTED: &str = "Interrupted · What should Claude do instead?";

/// Whether the agent's own permission dialog is on `screen`.
pub(crate) fn permission_dialog(hooks: HookKind, screen: &str) -> bool {
    match hooks {
        HookKind::Claude => CLAUDE_DIALOG.iter().any(|m| screen.contains(m)),
        HookKind::Codex => screen.contains("Would you like to run the following command?"),
        HookKind::None => false,
    }
}

/// Whether the screen's last tool call was declined by the user's keys: its
/// result line (`⎿ …`, the newest on screen) is Claude Code's "Interrupted".
pub(crate) fn declined(hooks: HookKind, screen: &str) -> bool {
    hooks == HookKind::Claude
        && screen
            .lines()
            .rev()
            .find(|line| line.trim_start().starts_with('⎿'))
            .is_some_and(|line| line.contains(CLAUDE_INTERRUPTED))
}

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
        assert!(permission_dialog(
            HookKind::Claude,
            " Bash command\n   touch made.txt\n Do you want to proceed?\n ❯ 1. Yes"
        ));
        assert!(!permission_dialog(HookKind::Claude, "❯ make a file"));
        assert!(declined(
            HookKind::Claude,
            "● Bash(touch other.txt)\n  ⎿  Interrupted · What should Claude do instead?\n❯"
        ));
        // An older decline, then a newer call waiting: not declined.
        assert!(!declined(
            HookKind::Claude,
            "  ⎿  Interrupted · What should Claude do instead?\n● Bash(touch x)\n  ⎿  Waiting…"
        ));
    }
}
