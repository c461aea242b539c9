//! Error codes of the agents API and the `{"Error":{…}}` body that carries them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Every error code the contract defines (section 3 of the agents API).
///
/// The wire spelling is the snake_case name (`bad_request`, `not_found`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The line is not a valid envelope, or a request's fields are malformed.
    BadRequest,
    /// The request name is not one this app serves (a newer client, an older app).
    UnknownRequest,
    /// The token does not belong to the caller named in `from`.
    Unauthorized,
    /// `api_version` is not the one this app serves.
    UnsupportedApiVersion,
    /// The caller may not make this request.
    Forbidden,
    /// The thing the request names does not exist.
    NotFound,
    /// A name is taken, a merge conflicts, a tree is dirty, a target has exited.
    Conflict,
    /// Fields are well-formed but impossible (count 0, an unknown profile).
    Invalid,
    /// The operation ran and failed (git, spawn, ssh).
    Failed,
    /// An extension or a host cannot be reached right now.
    Unavailable,
    /// A `request_id` was used before for a different request.
    RequestIdReused,
    /// Not now, try again: too many connections at once, a program that does
    /// not read its input, or a `[limits]` limit (`detail.retry_after_secs`).
    Busy,
    /// A bug in the app.
    Internal,
    /// A value this build does not know, from a newer app: shown, never acted on.
    #[serde(other)]
    Other,
}

impl ErrorCode {
    /// All codes, in the contract's order.
    pub const ALL: [ErrorCode; 13] = [
        ErrorCode::BadRequest,
        ErrorCode::UnknownRequest,
        ErrorCode::Unauthorized,
        ErrorCode::UnsupportedApiVersion,
        ErrorCode::Forbidden,
        ErrorCode::NotFound,
        ErrorCode::Conflict,
        ErrorCode::Invalid,
        ErrorCode::Failed,
        ErrorCode::Unavailable,
        ErrorCode::RequestIdReused,
        ErrorCode::Busy,
        ErrorCode::Internal,
    ];

    /// The wire spelling of the code.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::UnknownRequest => "unknown_request",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::UnsupportedApiVersion => "unsupported_api_version",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Conflict => "conflict",
            ErrorCode::Invalid => "invalid",
            ErrorCode::Failed => "failed",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::RequestIdReused => "request_id_reused",
            ErrorCode::Busy => "busy",
            ErrorCode::Internal => "internal",
            ErrorCode::Other => "other",
        }
    }

    /// Position of the code in [`ErrorCode::ALL`], for per-code counters
    /// ([`ErrorCode::Other`] is past its end).
    pub fn index(self) -> usize {
        self as usize
    }

    /// The code of an answer kept as JSON (a recorded answer), when it is an
    /// `Error`; its other fields, known or not, do not matter.
    pub fn of_answer(answer: &Value) -> Option<ErrorCode> {
        /// An error's shape, as far as its code.
        #[derive(Deserialize)]
        enum Shape {
            Error { code: ErrorCode },
        }
        match Shape::deserialize(answer) {
            Ok(Shape::Error { code }) => Some(code),
            Err(_) => None,
        }
    }

    /// Whether a client may simply try again later.
    pub fn retryable(self) -> bool {
        matches!(self, ErrorCode::Busy | ErrorCode::Unavailable)
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The body of an `{"Error":{…}}` response.
///
/// # Format
///
/// ```json
/// {"Error":{"code":"not_found","message":"no terminal 9","detail":{"terminal":9}}}
/// {"Error":{"code":"busy","message":"…","retryable":true}}
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiError {
    /// What kind of error this is; clients branch on it.
    pub code: ErrorCode,
    /// A sentence for a person. Never contains a token.
    pub message: String,
    /// The thing the error concerns, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<Value>,
    /// Present and true when trying again later may succeed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retryable: bool,
}

impl ApiError {
    /// An error with a code and a message; `retryable` follows the code.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            code,
            message: message.into(),
            detail: None,
            retryable: code.retryable(),
        }
    }

    /// Adds the `detail` object naming the thing the error concerns.
    pub fn with_detail(mut self, detail: Value) -> Self {
        self.detail = Some(detail);
        self
    }

    /// `bad_request` with a message.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::BadRequest, message)
    }

    /// `internal` with a message.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for ApiError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_answers_code_is_read_by_its_shape() {
        let busy = serde_json::json!({"Error":{"code":"busy","message":"x","replayed":true}});
        assert_eq!(ErrorCode::of_answer(&busy), Some(ErrorCode::Busy));
        let newer = serde_json::json!({"Error":{"code":"overheated"}});
        assert_eq!(ErrorCode::of_answer(&newer), Some(ErrorCode::Other));
        assert_eq!(ErrorCode::of_answer(&serde_json::json!("Ok")), None);
        assert_eq!(
            ErrorCode::of_answer(&serde_json::json!({"Agent":{"terminal":1}})),
            None
        );
    }

    #[test]
    fn codes_spell_as_the_contract_says() {
        for code in ErrorCode::ALL {
            let json = serde_json::to_value(code).unwrap();
            assert_eq!(json, Value::String(code.as_str().to_owned()));
            assert_eq!(ErrorCode::ALL[code.index()], code);
        }
    }

    #[test]
    fn busy_and_unavailable_are_retryable() {
        let busy = serde_json::to_value(ApiError::new(ErrorCode::Busy, "x")).unwrap();
        assert_eq!(busy["retryable"], true);
        let nf = serde_json::to_value(ApiError::new(ErrorCode::NotFound, "x")).unwrap();
        assert!(nf.get("retryable").is_none());
    }
}
