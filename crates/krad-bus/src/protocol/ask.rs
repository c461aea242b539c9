//! Asks: an open question, and how it was decided.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::request::ask::{AskField, AskKind, AskOption, AskTool};

/// An open ask.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AskInfo {
    /// Its id (stable for the same tool call).
    pub ask: String,
    /// The terminal that asks.
    pub terminal: u64,
    /// Its environment.
    pub environment: String,
    /// permission, choice, text or form.
    pub kind: AskKind,
    /// The question a person reads (for a permission, built from the tool).
    pub title: String,
    /// The options (a permission's are the app's: allow, allow-always, deny).
    pub options: Vec<AskOption>,
    /// The fields of a form.
    pub fields: Vec<AskField>,
    /// The tool of a permission.
    pub tool: Option<AskTool>,
    /// Bumped when the ask changes; answers name the revision they saw.
    pub revision: u64,
    /// When it was raised (RFC 3339 UTC).
    pub created_at: String,
    /// When it expires and is decided by `timeout`.
    pub expires_at: String,
}

/// Who decided an ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DecidedBy {
    /// A person through the durable facet.
    Phone,
    /// A bus client (`krad answer`).
    Client,
    /// The agent itself went on (its turn was interrupted, its hook left).
    Program,
    /// Nobody answered before it expired.
    Timeout,
    /// A value this build does not know, from a newer app: shown, never acted on.
    #[serde(other)]
    Other,
}

/// The answer to Ask.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnsweredInfo {
    /// The ask.
    pub ask: String,
    /// Who decided it.
    pub by: DecidedBy,
    /// The answer (`{}` when nobody answered).
    pub answer: Value,
}
