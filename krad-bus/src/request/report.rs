//! `Report`: a terminal tells the app its agent's state (hooks call it through
//! `krad report`).

use serde::{Deserialize, Serialize};

use super::{Call, RequestKind, Rights};
use crate::protocol::AgentState;
use crate::protocol::ApiError;

/// The states a terminal may report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReportedState {
    /// Running a turn.
    Working,
    /// Turn over.
    Idle,
    /// Blocked on a question.
    Asking,
}

impl From<ReportedState> for AgentState {
    fn from(state: ReportedState) -> AgentState {
        match state {
            ReportedState::Working => AgentState::Working,
            ReportedState::Idle => AgentState::Idle,
            ReportedState::Asking => AgentState::Asking,
        }
    }
}

/// The Report request (terminals only, about themselves).
///
/// # Format
///
/// ```json
/// {"Report":{"state":"idle","message":"All 48 tests pass."}}
/// "Ok"
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The new state.
    pub state: ReportedState,
    /// What the agent said (its last message, the question it asks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// A title to show.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The agent's own session id (Claude Code's `session_id`, Codex's
    /// `thread-id`), so that a closed conversation can be resumed. A krad addition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The file where the agent's CLI records its model calls (Claude Code's
    /// transcript, Codex's rollout file): an absolute path to a `.jsonl`
    /// file, which the app reads for the agent's tokens. A krad addition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript: Option<String>,
}

impl Call for Report {
    const KIND: RequestKind = RequestKind::Report;
    const RIGHTS: Rights = Rights::TerminalsAboutThemselves;
    const AT_MOST_ONCE: bool = false;
    type Answer = ();

    fn validate(&self) -> Result<(), ApiError> {
        if let Some(path) = &self.transcript
            && (!path.starts_with('/') || !path.ends_with(".jsonl") || path.len() > 4096)
        {
            return Err(Self::KIND.invalid(
                "transcript",
                "a transcript is an absolute path to a .jsonl file (at most 4096 bytes)",
            ));
        }
        match &self.session {
            Some(session)
                if session.is_empty()
                    || session.len() > 128
                    || !session.bytes().all(|b| (0x21..=0x7e).contains(&b)) =>
            {
                Err(Self::KIND.invalid(
                    "session",
                    "a session id is 1–128 bytes of printable ASCII without spaces",
                ))
            }
            _ => Ok(()),
        }
    }
}
