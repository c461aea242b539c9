//! `Ask`: an agent asks the user a question, and waits for the answer a person
//! (or a client on their behalf) gives with [`super::answer::Answer`] (section
//! 10, the durable facet); [`super::asks::Asks`] lists the open ones.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;

use super::{Call, RequestKind, Rights, deadline};
use crate::protocol::AnsweredInfo;
use crate::protocol::ApiError;

/// How long an ask stays open when it does not say (seconds).
pub const DEFAULT_EXPIRY_SECS: u64 = 600;

/// What kind of question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AskKind {
    /// May the agent use a tool? Options are built by the app from the tool.
    Permission,
    /// Pick one of the options.
    Choice,
    /// Free text.
    Text,
    /// Fill in the fields.
    Form,
}

/// The tool a permission is about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AskTool {
    /// The tool's name (`Bash`, `Edit`, …).
    pub name: String,
    /// Its input, as the agent would call it.
    #[serde(default)]
    pub input: Value,
}

/// One option of a choice (or of a permission card).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AskOption {
    /// What the answer names.
    pub id: String,
    /// What a person reads.
    pub label: String,
}

/// One field of a form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AskField {
    /// Its key in the answer.
    pub id: String,
    /// What a person reads.
    pub label: String,
}

/// The Ask request (a terminal, about itself). Blocks until the ask is decided.
///
/// # Format
///
/// ```json
/// {"Ask":{"kind":"permission","tool":{"name":"Bash","input":{"command":"rm -rf build"}},"tool_call_id":"toolu_1"}}
/// {"Ask":{"kind":"choice","title":"Which database?","options":[{"id":"pg","label":"Postgres"},{"id":"lite","label":"SQLite"}]}}
/// {"Answered":{"ask":"a-3f2a…","by":"client","answer":{"option":"allow"}}}
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ask {
    /// permission, choice, text or form.
    pub kind: AskKind,
    /// The tool, for a permission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<AskTool>,
    /// The agent's id for the tool call: the same call raised again (after a
    /// reconnect) is the same ask.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// The question (ignored for a permission, whose card the app builds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The options of a choice. For a permission, the options the agent can act
    /// on: `allow-always` is offered only when listed, with its label (naming the
    /// rule it keeps); `allow` and `deny` always are. Omitted: all three.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<AskOption>>,
    /// The fields of a form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields: Option<Vec<AskField>>,
    /// How long it stays open (default 600, at most 1800).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_in_secs: Option<u64>,
}

impl Ask {
    /// How long the ask stays open.
    pub fn expiry_secs(&self) -> u64 {
        self.expires_in_secs.unwrap_or(DEFAULT_EXPIRY_SECS)
    }
}

impl Call for Ask {
    const KIND: RequestKind = RequestKind::Ask;
    const RIGHTS: Rights = Rights::TerminalsAboutThemselves;
    const AT_MOST_ONCE: bool = false;
    type Answer = AnsweredInfo;

    fn deadline(&self) -> Option<Duration> {
        Some(deadline::waited(self.expiry_secs()))
    }

    fn cancels_when_client_leaves(&self) -> bool {
        true
    }

    fn validate(&self) -> Result<(), ApiError> {
        match self.expires_in_secs {
            Some(0) => return Err(Self::KIND.invalid("expires_in_secs", "at least 1 second")),
            Some(s) if s > deadline::MAX_WAIT_SECS => {
                return Err(Self::KIND.invalid(
                    "expires_in_secs",
                    format!("at most {} seconds", deadline::MAX_WAIT_SECS),
                ));
            }
            _ => {}
        }
        match self.kind {
            AskKind::Permission if self.tool.as_ref().is_none_or(|t| t.name.is_empty()) => {
                Err(Self::KIND.invalid("tool", "a permission names its tool"))
            }
            AskKind::Choice if self.options.as_ref().is_none_or(Vec::is_empty) => {
                Err(Self::KIND.invalid("options", "a choice needs options"))
            }
            AskKind::Form if self.fields.as_ref().is_none_or(Vec::is_empty) => {
                Err(Self::KIND.invalid("fields", "a form needs fields"))
            }
            _ => Ok(()),
        }
    }
}
