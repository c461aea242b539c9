//! Typed answers: what each request answers when it succeeds, and how it maps to
//! (and from) the one [`Response`] enum on the wire.
//!
//! A request names its answer type in its `impl Call` (`type Answer`, a
//! [`TypedAnswer`]); the server turns a handler's `Ok(answer)` into its
//! response with [`TypedAnswer::into_response`], and a client decodes it back
//! with [`TypedAnswer::from_response`].

use super::{
    AgentRecord, AnsweredInfo, ArchiveInfo, AskInfo, ChangesInfo, CodeResultInfo, CollectedInfo,
    ConflictsInfo, EnvironmentInfo, ExtensionInfo, HostStatus, MergedInfo, OutputInfo, PickedInfo,
    Response, ScoresInfo, SentInfo, ToolResultInfo, UpdatedInfo, VariantsInfo,
};
use crate::request::connections::ConnectionsInfo;
use crate::request::hello::HelloInfo;
use crate::request::stats::StatsInfo;

/// A request's answer when it succeeds.
pub trait TypedAnswer: Sized + Send + 'static {
    /// The answer as the response on the wire.
    fn into_response(self) -> Response;

    /// The answer a response stands for; the response back when it is another
    /// (an error, `"TimedOut"`, or the answer of another request).
    fn from_response(response: Response) -> Result<Self, Response>;

    /// The request is answered by a stream (SubscribeAgents, Attach): served
    /// until its client leaves, so it has no deadline, and its client leaving
    /// ends it (see [`crate::request::Call`]'s defaults).
    const STREAMS: bool = false;
}

/// Declares the answers that are exactly one response variant.
macro_rules! one_variant_answers {
    ($($answer:ty => $variant:ident $(boxed $boxed:tt)?,)*) => {
        $(
            impl TypedAnswer for $answer {
                fn into_response(self) -> Response {
                    Response::$variant(one_variant_answers!(@wrap self $($boxed)?))
                }

                fn from_response(response: Response) -> Result<Self, Response> {
                    match response {
                        #[allow(clippy::needless_question_mark)]
                        Response::$variant(answer) => Ok(one_variant_answers!(@unwrap answer $($boxed)?)),
                        other => Err(other),
                    }
                }
            }
        )*
    };
    (@wrap $value:ident) => { $value };
    (@wrap $value:ident $boxed:tt) => { Box::new($value) };
    (@unwrap $value:ident) => { $value };
    (@unwrap $value:ident $boxed:tt) => { *$value };
}

one_variant_answers! {
    HelloInfo => Hello,
    StatsInfo => Stats,
    AgentRecord => Agent boxed (),
    Vec<AgentRecord> => Agents,
    SentInfo => Sent,
    OutputInfo => Output,
    EnvironmentInfo => Environment boxed (),
    Vec<EnvironmentInfo> => Environments,
    ChangesInfo => Changes boxed (),
    ConflictsInfo => Conflicts,
    UpdatedInfo => Updated boxed (),
    Vec<ArchiveInfo> => Archives,
    CollectedInfo => Collected,
    VariantsInfo => Variants,
    PickedInfo => Picked,
    ScoresInfo => Scores boxed (),
    MergedInfo => Merged boxed (),
    CodeResultInfo => CodeResult boxed (),
    Vec<ExtensionInfo> => Extensions,
    Vec<HostStatus> => Hosts,
    AnsweredInfo => Answered,
    Vec<AskInfo> => Asks,
    ToolResultInfo => ToolResult,
    ConnectionsInfo => Connections,
}

/// `"Ok"`: done, nothing to say.
impl TypedAnswer for () {
    fn into_response(self) -> Response {
        Response::Ok
    }

    fn from_response(response: Response) -> Result<Self, Response> {
        match response {
            Response::Ok => Ok(()),
            other => Err(other),
        }
    }
}

/// The answer to Wait: the record of its `target`, the records of its
/// `targets`, or `"TimedOut"` when its own timeout passed first.
#[derive(Debug, Clone, PartialEq)]
pub enum Waited {
    /// The one target's record.
    Agent(Box<AgentRecord>),
    /// The targets' records, in the order asked.
    Agents(Vec<AgentRecord>),
    /// The condition did not hold within `timeout_secs`.
    TimedOut,
}

impl TypedAnswer for Waited {
    fn into_response(self) -> Response {
        match self {
            Waited::Agent(record) => Response::Agent(record),
            Waited::Agents(records) => Response::Agents(records),
            Waited::TimedOut => Response::TimedOut,
        }
    }

    fn from_response(response: Response) -> Result<Self, Response> {
        match response {
            Response::Agent(record) => Ok(Waited::Agent(record)),
            Response::Agents(records) => Ok(Waited::Agents(records)),
            Response::TimedOut => Ok(Waited::TimedOut),
            other => Err(other),
        }
    }
}

/// The "answer" of a streaming request (SubscribeAgents, Attach): there is none,
/// the connection carries a stream instead. No value of this type exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Streamed {}

impl TypedAnswer for Streamed {
    const STREAMS: bool = true;

    fn into_response(self) -> Response {
        match self {}
    }

    fn from_response(response: Response) -> Result<Self, Response> {
        Err(response)
    }
}
