//! Responses: an object with one key, or a bare string (`"Ok"`, `"TimedOut"`),
//! and the typed answers they carry.
//!
//! A request names its answer type in its `impl Call` (`type Answer`, a
//! [`TypedAnswer`]); the server turns a handler's `Ok(answer)` into its
//! response with [`TypedAnswer::into_response`], and a client decodes it back
//! with [`TypedAnswer::from_response`]. The one list of answers, `responses!`
//! below, declares both the [`Response`] enum and those conversions. It imports
//! the protocol's answer types and nothing of the server or the client.

use serde::{Deserialize, Serialize};

use super::agent::{AgentRecord, AgentState};
use super::error::ApiError;
use super::{
    AnsweredInfo, ArchiveInfo, AskInfo, ChangesInfo, CodeResultInfo, CollectedInfo, ConflictsInfo,
    EnvironmentInfo, ExtensionInfo, HostStatus, MergedInfo, PickedInfo, ScoresInfo, ToolResultInfo,
    UpdatedInfo, VariantsInfo,
};
use crate::request::connections::ConnectionsInfo;
use crate::request::{hello::HelloInfo, stats::StatsInfo};

/// Declares [`Response`] and, for each variant that is exactly one typed
/// answer, that answer's [`TypedAnswer`] impl: a new answer shape is one entry
/// here (`Variant(WireType) => AnswerType`, `, boxed` when the wire boxes it).
macro_rules! responses {
    (
        $(#[$enum_doc:meta])*
        units { $( $(#[$unit_doc:meta])* $unit:ident, )* }
        answers { $( $(#[$doc:meta])* $variant:ident($wire:ty) => $answer:ty $(, $boxed:ident)?; )* }
        others { $( $(#[$other_doc:meta])* $other:ident($other_wire:ty), )* }
    ) => {
        $(#[$enum_doc])*
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        pub enum Response {
            $( $(#[$unit_doc])* $unit, )*
            $( $(#[$doc])* $variant($wire), )*
            $( $(#[$other_doc])* $other($other_wire), )*
        }

        $(
            impl TypedAnswer for $answer {
                fn into_response(self) -> Response {
                    Response::$variant(responses!(@wrap self $($boxed)?))
                }

                fn from_response(response: Response) -> Result<Self, Response> {
                    match response {
                        #[allow(clippy::needless_question_mark)]
                        Response::$variant(answer) => Ok(responses!(@unwrap answer $($boxed)?)),
                        other => Err(other),
                    }
                }
            }
        )*
    };
    (@wrap $value:ident) => { $value };
    (@wrap $value:ident boxed) => { Box::new($value) };
    (@unwrap $value:ident) => { $value };
    (@unwrap $value:ident boxed) => { *$value };
}

responses! {
    /// Every answer the app can give. Serde's externally tagged form is exactly the
    /// wire form: unit variants are bare strings, the others one-key objects.
    ///
    /// # Format
    ///
    /// ```json
    /// "Ok"
    /// "TimedOut"
    /// {"Hello":{"api_version":1,"build":"0.1.0","pid":4821,"requests":["Hello"]}}
    /// {"Error":{"code":"not_found","message":"no terminal 9"}}
    /// ```
    units {
        /// Done, nothing to say.
        Ok,
        /// The request's deadline passed before it completed.
        TimedOut,
    }
    answers {
        /// The answer to Hello.
        Hello(HelloInfo) => HelloInfo;
        /// The answer to Stats.
        Stats(StatsInfo) => StatsInfo;
        /// One agent (Check, Wait with `target`, Spawn).
        Agent(Box<AgentRecord>) => AgentRecord, boxed;
        /// Several agents (List, Wait with `targets`).
        Agents(Vec<AgentRecord>) => Vec<AgentRecord>;
        /// The answer to Send.
        Sent(SentInfo) => SentInfo;
        /// The answer to Output.
        Output(OutputInfo) => OutputInfo;
        /// One environment (CreateWorktree).
        Environment(Box<EnvironmentInfo>) => EnvironmentInfo, boxed;
        /// Every environment.
        Environments(Vec<EnvironmentInfo>) => Vec<EnvironmentInfo>;
        /// The answer to Changes.
        Changes(Box<ChangesInfo>) => ChangesInfo, boxed;
        /// The answer to Conflicts.
        Conflicts(ConflictsInfo) => ConflictsInfo;
        /// The answer to UpdateEnvironment.
        Updated(Box<UpdatedInfo>) => UpdatedInfo, boxed;
        /// The answer to Archives.
        Archives(Vec<ArchiveInfo>) => Vec<ArchiveInfo>;
        /// The answer to CollectEnvironments.
        Collected(CollectedInfo) => CollectedInfo;
        /// The answer to RunVariants.
        Variants(VariantsInfo) => VariantsInfo;
        /// The answer to PickVariant.
        Picked(PickedInfo) => PickedInfo;
        /// A variant group's scoreboard (Scores, CheckVariants).
        Scores(Box<ScoresInfo>) => ScoresInfo, boxed;
        /// The answer to MergeVariants.
        Merged(Box<MergedInfo>) => MergedInfo, boxed;
        /// The answer to Code.
        CodeResult(Box<CodeResultInfo>) => CodeResultInfo, boxed;
        /// The answer to Extensions.
        Extensions(Vec<ExtensionInfo>) => Vec<ExtensionInfo>;
        /// The answer to Hosts and CheckHost: each host's link.
        Hosts(Vec<HostStatus>) => Vec<HostStatus>;
        /// The answer to Ask: how it was decided.
        Answered(AnsweredInfo) => AnsweredInfo;
        /// The open asks.
        Asks(Vec<AskInfo>) => Vec<AskInfo>;
        /// The answer to ExtensionTool.
        ToolResult(ToolResultInfo) => ToolResultInfo;
        /// The answer to Connections.
        Connections(ConnectionsInfo) => ConnectionsInfo;
    }
    others {
        /// The request failed.
        Error(ApiError),
    }
}

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

/// The answer to Send.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentInfo {
    /// The terminal written to.
    pub terminal: u64,
    /// True once the text was written to the terminal's input.
    pub delivered: bool,
    /// The agent's state after the write.
    pub state: AgentState,
    /// Its place (from 1) in the app's queue, for a Send sent with `"queue":
    /// true` that waits there for room under `[limits]` (then `delivered` is
    /// false: it is typed when its turn comes); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_place: Option<u32>,
}

/// The answer to Output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputInfo {
    /// The terminal read.
    pub terminal: u64,
    /// The visible screen, rows joined by `\n`.
    pub screen: String,
    /// The cursor: row and column, from 0.
    pub cursor: [u16; 2],
    /// The last lines of scrollback, oldest first.
    pub scrollback: Vec<String>,
    /// True when more scrollback exists than was returned, or the answer was cut.
    pub truncated: bool,
}

impl Response {
    /// The error code, when this is an error.
    pub fn error_code(&self) -> Option<super::ErrorCode> {
        match self {
            Response::Error(e) => Some(e.code),
            _ => None,
        }
    }

    /// The response as one line of JSON, `\n` included.
    pub fn to_line(&self) -> Vec<u8> {
        let mut line = match serde_json::to_vec(self) {
            Ok(line) => line,
            // Serializing these plain structs cannot fail; answer something valid anyway.
            Err(_) => {
                br#"{"Error":{"code":"internal","message":"could not encode the answer"}}"#.to_vec()
            }
        };
        line.push(b'\n');
        line
    }
}

/// An answer as a client reads it: the response, and whether the app replayed
/// it (the repeat of a finished `request_id`, section 8).
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    /// The response.
    pub response: Response,
    /// Whether it was marked `"replayed": true`.
    pub replayed: bool,
}

impl Response {
    /// Decodes an answer's JSON, replays included: a replayed bare string
    /// comes as `{"Ok":{"replayed":true}}`, a replayed object with
    /// `"replayed": true` added inside it.
    pub fn decode(value: serde_json::Value) -> Result<Decoded, serde_json::Error> {
        use serde_json::Value;
        let replayed = match &value {
            Value::Object(outer) => outer
                .values()
                .any(|inner| inner.get("replayed").and_then(Value::as_bool) == Some(true)),
            _ => false,
        };
        let value = match value {
            Value::Object(outer) if replayed && outer.len() == 1 => {
                let mut outer = outer.into_iter();
                match outer.next() {
                    Some((name, Value::Object(inner)))
                        if inner.len() == 1 && (name == "Ok" || name == "TimedOut") =>
                    {
                        Value::String(name)
                    }
                    Some((name, inner)) => Value::Object([(name, inner)].into_iter().collect()),
                    None => Value::Null,
                }
            }
            other => other,
        };
        Ok(Decoded {
            response: serde_json::from_value(value)?,
            replayed,
        })
    }
}

impl From<ApiError> for Response {
    fn from(error: ApiError) -> Self {
        Response::Error(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_strings_and_one_key_objects() {
        assert_eq!(Response::Ok.to_line(), b"\"Ok\"\n");
        assert_eq!(Response::TimedOut.to_line(), b"\"TimedOut\"\n");
        let err: Response = ApiError::bad_request("x").into();
        assert_eq!(
            String::from_utf8(err.to_line()).unwrap(),
            "{\"Error\":{\"code\":\"bad_request\",\"message\":\"x\"}}\n"
        );
    }

    #[test]
    fn replays_decode() {
        let ok = Response::decode(serde_json::json!({"Ok":{"replayed":true}})).unwrap();
        assert_eq!(ok.response, Response::Ok);
        assert!(ok.replayed);
        let fresh = Response::decode(serde_json::json!("Ok")).unwrap();
        assert_eq!((fresh.response, fresh.replayed), (Response::Ok, false));
        let sent = Response::decode(serde_json::json!(
            {"Sent":{"terminal":4,"delivered":true,"state":"working","replayed":true}}
        ))
        .unwrap();
        assert!(sent.replayed);
        assert!(matches!(
            sent.response,
            Response::Sent(SentInfo { terminal: 4, .. })
        ));
    }
}
