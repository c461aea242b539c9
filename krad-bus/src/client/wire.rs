//! What the blocking and the async client share, each once: the envelope
//! line of a request, the decoding of an answer line into a typed answer, and
//! of a stream's line into its typed message.

use std::time::Duration;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{Answered, Client, ClientError};
use crate::protocol::{OutgoingEnvelope, Response, TypedAnswer};
use crate::request::{Call, Request};

/// A typed request as its wire JSON.
pub(super) fn request_value<R: Call>(request: R) -> Value {
    let request: Request = request.into();
    request.to_value()
}

/// A typed call's request as JSON, and how long its client waits for the
/// answer: the request's deadline plus `margin` (streams: `margin` alone).
pub(super) fn typed_call<R: Call>(request: R, margin: Duration) -> (Value, Duration) {
    let wait = request.deadline().unwrap_or_default() + margin;
    (request_value(request), wait)
}

/// The envelope line (`\n` included) that carries `request` from `client`.
pub(super) fn envelope_line(
    client: &Client,
    request: &Value,
    request_id: Option<&str>,
) -> Result<Vec<u8>, ClientError> {
    let envelope = OutgoingEnvelope {
        api_version: client.api_version,
        token: client.token.expose(),
        from: &client.from,
        request,
        request_id,
    };
    let mut line =
        serde_json::to_vec(&envelope).map_err(|e| ClientError::BadAnswer(e.to_string()))?;
    line.push(b'\n');
    Ok(line)
}

/// An answer line as JSON; an empty one is no answer at all.
pub(super) fn answer_value(line: &[u8]) -> Result<Value, ClientError> {
    if line.is_empty() {
        return Err(ClientError::NoAnswer);
    }
    serde_json::from_slice(line).map_err(|e| ClientError::BadAnswer(e.to_string()))
}

/// The typed answer of `R` an answer's JSON stands for, replays included.
pub(super) fn typed_answer<R: Call>(raw: Value) -> Result<Answered<R::Answer>, ClientError> {
    let decoded = Response::decode(raw.clone())
        .map_err(|e| ClientError::BadAnswer(format!("{e} (the answer to {})", R::KIND.name())))?;
    Ok(Answered {
        raw,
        replayed: decoded.replayed,
        answer: <R::Answer as TypedAnswer>::from_response(decoded.response),
    })
}

/// One line of a stream (SubscribeAgents, Attach, or any request's answer
/// read as a stream): as the app wrote it, and what it is.
#[derive(Debug, Clone)]
pub struct Line<M> {
    /// The line as JSON, for printing or relaying as is.
    pub raw: Value,
    /// The line, typed.
    pub item: Item<M>,
}

/// What a stream's line is.
#[derive(Debug, Clone)]
pub enum Item<M> {
    /// A message of the stream.
    Message(M),
    /// An answer instead of a message: an `Error` (the request refused),
    /// `"TimedOut"`, or another request's answer.
    Answer(Response),
    /// An `Error` this client cannot read (a newer app's shape): its fields.
    UnreadableError(Value),
    /// A line this client does not know (a newer app's message).
    Unknown,
}

impl<M: DeserializeOwned> Line<M> {
    /// Decodes a line read from the app; only a line that is not JSON fails.
    pub fn decode(line: &[u8]) -> Result<Line<M>, ClientError> {
        Ok(Line::from_value(answer_value(line)?))
    }

    /// What a line's JSON is: a message of the stream, else [`Item::of_answer`].
    pub fn from_value(raw: Value) -> Line<M> {
        let item = match M::deserialize(&raw) {
            Ok(message) => Item::Message(message),
            Err(_) => Item::of_answer(&raw),
        };
        Line { raw, item }
    }
}

impl<M> Item<M> {
    /// What a line that is not a message of the stream is: an answer (replays
    /// included), an error this client cannot read, or unknown.
    pub fn of_answer(raw: &Value) -> Item<M> {
        /// The one shape of an error, whatever its fields.
        #[derive(Deserialize)]
        enum AnyError {
            Error(Value),
        }
        match Response::decode(raw.clone()) {
            Ok(decoded) => Item::Answer(decoded.response),
            Err(_) => match AnyError::deserialize(raw) {
                Ok(AnyError::Error(fields)) => Item::UnreadableError(fields),
                Err(_) => Item::Unknown,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{AttachMessage, ErrorCode, StreamMessage};

    #[test]
    fn a_streams_lines_are_typed() {
        let heartbeat = Line::<StreamMessage>::decode(br#"{"Heartbeat":{"rev":3}}"#).unwrap();
        assert!(matches!(
            heartbeat.item,
            Item::Message(StreamMessage::Heartbeat(_))
        ));
        let refused =
            Line::<StreamMessage>::decode(br#"{"Error":{"code":"not_found","message":"x"}}"#)
                .unwrap();
        assert!(
            matches!(&refused.item, Item::Answer(Response::Error(e)) if e.code == ErrorCode::NotFound),
            "{refused:?}"
        );
        let newer = Line::<StreamMessage>::decode(br#"{"Teleported":{}}"#).unwrap();
        assert!(matches!(newer.item, Item::Unknown));
        let odd = Line::<StreamMessage>::decode(br#"{"Error":{"code":"conflict"}}"#).unwrap();
        assert!(matches!(odd.item, Item::UnreadableError(_)));
        // Attach's own Error is a message of its stream.
        let attach =
            Line::<AttachMessage>::decode(br#"{"Error":{"code":"invalid","message":"x"}}"#)
                .unwrap();
        assert!(matches!(
            attach.item,
            Item::Message(AttachMessage::Error(_))
        ));
        assert!(matches!(
            Line::<StreamMessage>::decode(b""),
            Err(ClientError::NoAnswer)
        ));
        assert!(matches!(
            Line::<StreamMessage>::decode(b"nope"),
            Err(ClientError::BadAnswer(_))
        ));
    }
}
