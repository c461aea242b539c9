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
    /// The answer ([`AskAnswer::Nothing`], `{}`, when nobody answered).
    pub answer: AskAnswer,
}

/// An answer to an ask, as `Answer` sends it and `Answered` reports it.
///
/// # Format
///
/// ```json
/// {"option":"allow"}
/// {"text":"use SQLite"}
/// {"fields":{"name":"db","size":3}}
/// {}                        (nobody answered: the ask expired)
/// ```
///
/// Any other shape decodes as [`AskAnswer::Unreadable`], so that a request
/// carrying one still reaches the checks of its caller's rights and is then
/// refused `invalid` naming the shape the ask wants.
#[derive(Debug, Clone, PartialEq)]
pub enum AskAnswer {
    /// An option's id (a permission or a choice).
    Option(String),
    /// A text.
    Text(String),
    /// A form's values, by field name.
    Fields(serde_json::Map<String, Value>),
    /// Nobody answered.
    Nothing,
    /// A value of none of these shapes, kept as sent.
    Unreadable(Value),
}

impl AskAnswer {
    /// The option chosen, if this answer is one.
    pub fn option(&self) -> Option<&str> {
        match self {
            AskAnswer::Option(option) => Some(option),
            _ => None,
        }
    }

    /// The answer as JSON.
    pub fn to_value(&self) -> Value {
        let one = |key: &str, value: Value| {
            Value::Object([(key.to_owned(), value)].into_iter().collect())
        };
        match self {
            AskAnswer::Option(option) => one("option", Value::String(option.clone())),
            AskAnswer::Text(text) => one("text", Value::String(text.clone())),
            AskAnswer::Fields(fields) => one("fields", Value::Object(fields.clone())),
            AskAnswer::Nothing => Value::Object(serde_json::Map::new()),
            AskAnswer::Unreadable(value) => value.clone(),
        }
    }

    /// Reads an answer; never fails (see [`AskAnswer::Unreadable`]).
    pub fn from_value(value: Value) -> AskAnswer {
        let Value::Object(map) = &value else {
            return AskAnswer::Unreadable(value);
        };
        let mut entries = map.iter();
        match (entries.next(), entries.next()) {
            (None, _) => AskAnswer::Nothing,
            (Some((key, inner)), None) => match (key.as_str(), inner) {
                ("option", Value::String(option)) => AskAnswer::Option(option.clone()),
                ("text", Value::String(text)) => AskAnswer::Text(text.clone()),
                ("fields", Value::Object(fields)) => AskAnswer::Fields(fields.clone()),
                _ => AskAnswer::Unreadable(value),
            },
            _ => AskAnswer::Unreadable(value),
        }
    }
}

impl Serialize for AskAnswer {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for AskAnswer {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(AskAnswer::from_value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn answers_round_trip_and_odd_shapes_are_kept() {
        for (value, answer) in [
            (
                json!({"option": "allow"}),
                AskAnswer::Option("allow".into()),
            ),
            (
                json!({"text": "use SQLite"}),
                AskAnswer::Text("use SQLite".into()),
            ),
            (json!({}), AskAnswer::Nothing),
            (
                json!({"option": 5}),
                AskAnswer::Unreadable(json!({"option": 5})),
            ),
            (json!("allow"), AskAnswer::Unreadable(json!("allow"))),
        ] {
            let decoded: AskAnswer = serde_json::from_value(value.clone()).unwrap();
            assert_eq!(decoded, answer);
            assert_eq!(serde_json::to_value(&decoded).unwrap(), value);
        }
    }
}
