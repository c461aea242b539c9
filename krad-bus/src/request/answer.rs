//! `Answer`: a person (or a client on their behalf) answers an agent's open
//! [`super::ask::Ask`].

use serde::{Deserialize, Serialize};

use super::{Call, RequestKind, Rights};
use crate::protocol::AskAnswer;

/// The Answer request (Client and lead terminals; never a terminal about its own ask).
///
/// # Format
///
/// ```json
/// {"Answer":{"ask":"a-3f2a…","answer":{"option":"allow"}}}
/// {"Answer":{"ask":"a-77b0…","answer":{"text":"use SQLite"}}}
/// "Ok"
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// The ask's id.
    pub ask: String,
    /// `{"option": id}` for a permission or choice, `{"text": …}`, or `{"fields": {…}}`.
    pub answer: AskAnswer,
}

impl Call for Answer {
    const KIND: RequestKind = RequestKind::Answer;
    const RIGHTS: Rights = Rights::ClientAndLeads;
    const AT_MOST_ONCE: bool = true;
    type Answer = ();
}
