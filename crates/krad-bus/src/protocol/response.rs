//! Responses: an object with one key, or a bare string (`"Ok"`, `"TimedOut"`).

use serde::{Deserialize, Serialize};

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
    /// The request failed.
    Error(ApiError),
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
}
