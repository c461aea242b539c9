//! Responses: an object with one key, or a bare string (`"Ok"`, `"TimedOut"`).

use serde::{Deserialize, Serialize};

use super::agent::{AgentRecord, AgentState};
use super::error::ApiError;
use crate::request::{hello::HelloInfo, stats::StatsInfo};

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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Response {
    /// Done, nothing to say.
    Ok,
    /// The request's deadline passed before it completed.
    TimedOut,
    /// The answer to Hello.
    Hello(HelloInfo),
    /// The answer to Stats.
    Stats(StatsInfo),
    /// One agent (Check, Wait with `target`, Spawn).
    Agent(Box<AgentRecord>),
    /// Several agents (List, Wait with `targets`).
    Agents(Vec<AgentRecord>),
    /// The answer to Send.
    Sent(SentInfo),
    /// The answer to Output.
    Output(OutputInfo),
    /// One environment (CreateWorktree).
    Environment(Box<super::EnvironmentInfo>),
    /// Every environment.
    Environments(Vec<super::EnvironmentInfo>),
    /// The answer to Changes.
    Changes(Box<super::ChangesInfo>),
    /// The answer to Conflicts.
    Conflicts(super::ConflictsInfo),
    /// The answer to UpdateEnvironment.
    Updated(Box<super::UpdatedInfo>),
    /// The answer to Archives.
    Archives(Vec<super::ArchiveInfo>),
    /// The answer to CollectEnvironments.
    Collected(super::CollectedInfo),
    /// The answer to RunVariants.
    Variants(super::VariantsInfo),
    /// The answer to PickVariant.
    Picked(super::PickedInfo),
    /// A variant group's scoreboard (Scores, CheckVariants).
    Scores(Box<super::ScoresInfo>),
    /// The answer to MergeVariants.
    Merged(Box<super::MergedInfo>),
    /// The answer to Code.
    CodeResult(Box<super::CodeResultInfo>),
    /// The answer to Extensions.
    Extensions(Vec<super::ExtensionInfo>),
    /// The answer to Hosts and CheckHost: each host's link.
    Hosts(Vec<super::HostStatus>),
    /// The answer to Ask: how it was decided.
    Answered(super::AnsweredInfo),
    /// The open asks.
    Asks(Vec<super::AskInfo>),
    /// The answer to ExtensionTool.
    ToolResult(super::ToolResultInfo),
    /// The answer to Connections.
    Connections(crate::request::connections::ConnectionsInfo),
    /// The request failed.
    Error(ApiError),
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
