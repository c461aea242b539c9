//! The envelope every request line carries, and step 1 of the order of checks:
//! turning a line into an [`Envelope`] without judging the request's name or fields.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};

use super::error::ApiError;

/// The version of the agents API this crate speaks.
pub const API_VERSION: u64 = 1;

/// A token as presented on the wire. Its `Debug` never shows the secret.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Token(String);

impl Token {
    /// Wraps a token string.
    pub fn new(token: impl Into<String>) -> Self {
        Token(token.into())
    }

    /// The token's characters, to compare or to send. Never log them.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// A terminal as named in `from` and in tokens: its environment and its id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TerminalRef {
    /// The environment the terminal runs in (`main`, a worktree's name, …).
    pub environment: String,
    /// The terminal's id, a positive integer.
    pub terminal: u64,
}

/// Who claims to be calling: the `from` field of the envelope.
///
/// # Format
///
/// ```json
/// "Client"
/// {"Terminal":{"environment":"main","terminal":4}}
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Caller {
    /// A client outside the app's terminals, holding the api.json token.
    Client,
    /// One of the app's terminals, holding its own bus or lead token.
    Terminal(TerminalRef),
}

/// A request as it arrived: its name and its (not yet judged) fields.
#[derive(Debug, Clone, PartialEq)]
pub struct RawRequest {
    /// The request's name, e.g. `Hello` or `Wait`.
    pub name: String,
    /// The object (or `null`) under the name; `None` for the bare-string form.
    pub fields: Option<Value>,
}

/// A `request_id`: 1–128 bytes of printable ASCII without spaces (section 8).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RequestId(String);

impl RequestId {
    /// Checks and wraps a request id.
    pub fn parse(id: &str) -> Result<Self, String> {
        if id.is_empty() || id.len() > 128 {
            return Err(format!(
                "request_id must be 1 to 128 bytes long, not {}",
                id.len()
            ));
        }
        if !id.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
            return Err("request_id must be printable ASCII without spaces".to_owned());
        }
        Ok(RequestId(id.to_owned()))
    }

    /// The id's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A request line that passed step 1: well-formed, not yet authenticated.
#[derive(Debug, Clone)]
pub struct Envelope {
    /// The API version the client speaks (an integer; missing means 1).
    pub api_version: Number,
    /// The token the caller presents.
    pub token: Token,
    /// Who the caller claims to be.
    pub from: Caller,
    /// The request's name and fields.
    pub request: RawRequest,
    /// Makes a mutating request at-most-once.
    pub request_id: Option<RequestId>,
}

impl Envelope {
    /// Step 1 of the order of checks: parses a request line (without its `\n`).
    ///
    /// Rejects with `bad_request` anything that is not JSON, not an object, or whose
    /// `api_version`, `token`, `from`, `request` or `request_id` has the wrong shape.
    /// Unknown envelope fields are ignored.
    pub fn parse(line: &[u8]) -> Result<Envelope, ApiError> {
        let mut fields = match serde_json::from_slice::<EnvelopeFields>(line) {
            Ok(fields) => fields,
            // Not JSON, or not an object: the slow path says which.
            Err(_) => EnvelopeFields::of(line)?,
        };
        let api_version = match fields.api_version.take() {
            None | Some(Value::Null) => Number::from(API_VERSION),
            Some(Value::Number(n)) if n.is_i64() || n.is_u64() => n,
            Some(_) => {
                return Err(ApiError::bad_request(
                    "envelope field \"api_version\" must be an integer",
                ));
            }
        };
        let token = match fields.token.take() {
            Some(Value::String(token)) => Token(token),
            Some(_) => {
                return Err(ApiError::bad_request(
                    "envelope field \"token\" must be a string",
                ));
            }
            None => {
                return Err(ApiError::bad_request(
                    "the envelope has no \"token\" (read it from api.json or KRAD_ADE_TOKEN_FILE)",
                ));
            }
        };
        let from = parse_from(fields.from)?;
        let request = parse_request(fields.request)?;
        let request_id = match fields.request_id {
            None | Some(Value::Null) => None,
            Some(Value::String(id)) => Some(
                RequestId::parse(&id)
                    .map_err(|e| ApiError::bad_request(format!("envelope field {e}")))?,
            ),
            Some(_) => {
                return Err(ApiError::bad_request(
                    "envelope field \"request_id\" must be a string",
                ));
            }
        };
        Ok(Envelope {
            api_version,
            token,
            from,
            request,
            request_id,
        })
    }

    /// Whether the envelope speaks the version this app serves.
    pub fn speaks_v1(&self) -> bool {
        self.api_version.as_u64() == Some(API_VERSION)
    }
}

/// The envelope's fields as they arrived, before their shapes are judged.
///
/// Read straight from the line: the keys are matched without being copied and
/// unknown fields are skipped (still checked to be JSON), where a whole
/// [`Value`] would allocate every key and value into a map only to take five
/// of them out. A key given twice keeps its last value, as in a [`Value`].
#[derive(Default)]
struct EnvelopeFields {
    api_version: Option<Value>,
    token: Option<Value>,
    from: Option<Value>,
    request: Option<Value>,
    request_id: Option<Value>,
}

impl EnvelopeFields {
    /// The slow path, for a line that is not a JSON object: parsed whole, to
    /// say what is wrong with it.
    fn of(line: &[u8]) -> Result<EnvelopeFields, ApiError> {
        let value: Value = serde_json::from_slice(line).map_err(|e| {
            ApiError::bad_request(format!("the request line is not valid JSON: {e}"))
        })?;
        let Value::Object(mut object) = value else {
            return Err(ApiError::bad_request(
                "the request line must be a JSON object (the envelope)",
            ));
        };
        Ok(EnvelopeFields {
            api_version: object.remove("api_version"),
            token: object.remove("token"),
            from: object.remove("from"),
            request: object.remove("request"),
            request_id: object.remove("request_id"),
        })
    }
}

impl<'de> Deserialize<'de> for EnvelopeFields {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = EnvelopeFields;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("the envelope, a JSON object")
            }

            fn visit_map<M: serde::de::MapAccess<'de>>(
                self,
                mut map: M,
            ) -> Result<EnvelopeFields, M::Error> {
                let mut fields = EnvelopeFields::default();
                while let Some(key) = map.next_key::<Key>()? {
                    let slot = match key {
                        Key::ApiVersion => &mut fields.api_version,
                        Key::Token => &mut fields.token,
                        Key::From => &mut fields.from,
                        Key::Request => &mut fields.request,
                        Key::RequestId => &mut fields.request_id,
                        Key::Other => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                            continue;
                        }
                    };
                    *slot = Some(map.next_value()?);
                }
                Ok(fields)
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

/// An envelope key, matched as it is read (never copied).
enum Key {
    ApiVersion,
    Token,
    From,
    Request,
    RequestId,
    Other,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Name;
        impl serde::de::Visitor<'_> for Name {
            type Value = Key;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an envelope field's name")
            }

            fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<Key, E> {
                Ok(match name {
                    "api_version" => Key::ApiVersion,
                    "token" => Key::Token,
                    "from" => Key::From,
                    "request" => Key::Request,
                    "request_id" => Key::RequestId,
                    _ => Key::Other,
                })
            }
        }
        deserializer.deserialize_identifier(Name)
    }
}

fn parse_from(from: Option<Value>) -> Result<Caller, ApiError> {
    const SHAPE: &str = "envelope field \"from\" must be \"Client\" or \
         {\"Terminal\":{\"environment\":\"<name>\",\"terminal\":<id>}}";
    match from {
        Some(Value::String(s)) if s == "Client" => Ok(Caller::Client),
        Some(Value::Object(mut outer)) if outer.len() == 1 => {
            let Some(Value::Object(inner)) = outer.remove("Terminal") else {
                return Err(ApiError::bad_request(SHAPE));
            };
            parse_terminal_ref(&inner)
                .map(Caller::Terminal)
                .ok_or_else(|| ApiError::bad_request(SHAPE))
        }
        None => Err(ApiError::bad_request(
            "the envelope has no \"from\" (\"Client\" outside the app's terminals)",
        )),
        Some(_) => Err(ApiError::bad_request(SHAPE)),
    }
}

fn parse_terminal_ref(inner: &Map<String, Value>) -> Option<TerminalRef> {
    let environment = inner.get("environment")?.as_str()?;
    let terminal = inner.get("terminal")?.as_u64()?;
    if environment.is_empty() || terminal == 0 {
        return None;
    }
    Some(TerminalRef {
        environment: environment.to_owned(),
        terminal,
    })
}

fn parse_request(request: Option<Value>) -> Result<RawRequest, ApiError> {
    const SHAPE: &str = "envelope field \"request\" must be a request name (\"Hello\") \
         or an object with one key ({\"Wait\":{\"target\":4}})";
    match request {
        Some(Value::String(name)) => Ok(RawRequest { name, fields: None }),
        Some(Value::Object(object)) if object.len() == 1 => {
            let Some((name, fields)) = object.into_iter().next() else {
                return Err(ApiError::bad_request(SHAPE));
            };
            Ok(RawRequest {
                name,
                fields: Some(fields),
            })
        }
        None => Err(ApiError::bad_request("the envelope has no \"request\"")),
        Some(_) => Err(ApiError::bad_request(SHAPE)),
    }
}

/// An envelope as a client writes it.
#[derive(Debug, Serialize)]
pub struct OutgoingEnvelope<'a> {
    /// The version spoken; normally [`API_VERSION`].
    pub api_version: u64,
    /// The caller's token.
    pub token: &'a str,
    /// Who is calling.
    pub from: &'a Caller,
    /// The request, as its wire JSON.
    pub request: &'a Value,
    /// The optional at-most-once id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<&'a str>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ErrorCode;

    fn bad(line: &str) -> String {
        let err = Envelope::parse(line.as_bytes()).unwrap_err();
        assert_eq!(err.code, ErrorCode::BadRequest, "{line}");
        err.message
    }

    #[test]
    fn parses_the_minimal_envelope() {
        let env = Envelope::parse(br#"{"token":"t","from":"Client","request":"Hello"}"#).unwrap();
        assert!(env.speaks_v1());
        assert_eq!(env.from, Caller::Client);
        assert_eq!(env.request.name, "Hello");
        assert_eq!(env.request.fields, None);
    }

    #[test]
    fn parses_a_terminal_caller_and_object_request() {
        let env = Envelope::parse(
            br#"{"api_version":1,"token":"t","from":{"Terminal":{"environment":"main","terminal":4}},"request":{"Wait":{"target":4}},"request_id":"a-1","extra":true}"#,
        )
        .unwrap();
        assert_eq!(
            env.from,
            Caller::Terminal(TerminalRef {
                environment: "main".into(),
                terminal: 4
            })
        );
        assert_eq!(env.request.name, "Wait");
        assert_eq!(env.request_id.unwrap().as_str(), "a-1");
    }

    #[test]
    fn reads_keys_as_json_does_escaped_repeated_or_unknown() {
        // An escaped key is its unescaped name; a repeated key keeps its last
        // value (as a parsed JSON object does); unknown fields of any shape are
        // skipped.
        let env = Envelope::parse(
            br#"{"tok\u0065n":"t","from":"Server","from":"Client","x":{"y":[1,{"z":null}]},"request":"Hello","request":"Stats"}"#,
        )
        .unwrap();
        assert_eq!(env.token.expose(), "t");
        assert_eq!(env.from, Caller::Client);
        assert_eq!(env.request.name, "Stats");
        // A repeated key whose last value is wrong is refused, whatever came first.
        assert!(
            bad(r#"{"token":"t","token":5,"from":"Client","request":"Hello"}"#).contains("token")
        );
        // Broken JSON inside an unknown field is still broken JSON.
        assert!(
            bad(r#"{"token":"t","from":"Client","request":"Hello","x":[1,}"#)
                .contains("not valid JSON")
        );
    }

    #[test]
    fn rejects_malformed_envelopes() {
        assert!(bad("nope").contains("not valid JSON"));
        assert!(bad("[1]").contains("JSON object"));
        assert!(
            bad(r#"{"api_version":"1","token":"t","from":"Client","request":"Hello"}"#)
                .contains("api_version")
        );
        assert!(
            bad(r#"{"api_version":1.5,"token":"t","from":"Client","request":"Hello"}"#)
                .contains("api_version")
        );
        assert!(bad(r#"{"token":5,"from":"Client","request":"Hello"}"#).contains("token"));
        assert!(bad(r#"{"from":"Client","request":"Hello"}"#).contains("token"));
        assert!(bad(r#"{"token":"t","from":"Server","request":"Hello"}"#).contains("from"));
        assert!(bad(r#"{"token":"t","from":{"Terminal":{"environment":"main","terminal":0}},"request":"Hello"}"#).contains("from"));
        assert!(
            bad(r#"{"token":"t","from":{"Terminal":{"environment":"main"}},"request":"Hello"}"#)
                .contains("from")
        );
        assert!(bad(r#"{"token":"t","request":"Hello"}"#).contains("from"));
        assert!(
            bad(r#"{"token":"t","from":"Client","request":{"A":{},"B":{}}}"#).contains("one key")
        );
        assert!(bad(r#"{"token":"t","from":"Client","request":7}"#).contains("request"));
        assert!(bad(r#"{"token":"t","from":"Client"}"#).contains("request"));
        assert!(
            bad(r#"{"token":"t","from":"Client","request":"Hello","request_id":"has space"}"#)
                .contains("request_id")
        );
        assert!(
            bad(r#"{"token":"t","from":"Client","request":"Hello","request_id":""}"#)
                .contains("request_id")
        );
    }

    #[test]
    fn token_debug_is_redacted() {
        assert_eq!(format!("{:?}", Token::new("secret")), "Token(<redacted>)");
    }

    #[test]
    fn request_ids_are_bounded() {
        assert!(RequestId::parse(&"x".repeat(128)).is_ok());
        assert!(RequestId::parse(&"x".repeat(129)).is_err());
        assert!(RequestId::parse("é").is_err());
    }
}
