//! The page's server as a client of the bus: krad-bus's one client, async
//! ([`AsyncClient`]), with the client token over loopback; and what the page
//! may ask of it. Must never import the relay or the HTTP side.

use std::net::SocketAddr;

use krad_bus::client::{AsyncClient, Client, ClientError};
use krad_bus::protocol::{Caller, Token};
use krad_bus::request::{Request, RequestKind};
use serde_json::Value;

/// Requests the page may not make, though Client may: stopping the app is
/// for `krad stop`, not for a browser tab.
const NOT_FROM_THE_PAGE: &[RequestKind] = &[RequestKind::Shutdown];

/// The bus at `address`, called as Client with the client token.
pub(crate) fn client(address: SocketAddr, token: Token) -> AsyncClient {
    Client::at(address, token, Caller::Client).into_async()
}

/// Checks a request from the page as the bus would (name and fields), and
/// that the page may make it. The error is for the page to show.
pub(crate) fn judge(request: &Value) -> Result<Request, String> {
    let (name, fields) = match request {
        Value::String(name) => (name.as_str(), None),
        Value::Object(map) if map.len() == 1 => {
            let Some((name, fields)) = map.iter().next() else {
                return Err("an empty request".into());
            };
            (name.as_str(), Some(fields.clone()))
        }
        _ => return Err("a request is a name or an object with one key".into()),
    };
    let parsed = Request::parse(name, fields).map_err(|e| e.message.clone())?;
    if NOT_FROM_THE_PAGE.contains(&parsed.kind()) {
        return Err(format!("{name} is not made from the page"));
    }
    Ok(parsed)
}

/// Why a call got no answer, in the page's words.
pub(crate) fn why(error: ClientError) -> String {
    match error {
        ClientError::Unreachable { endpoint, source } => {
            format!("cannot reach the app's bus at {endpoint}: {source}")
        }
        ClientError::NoAnswerWithin(_) => "the app did not answer in time".into(),
        ClientError::NoAnswer => "the app closed the connection without answering".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_is_judged_like_any_client() {
        assert!(judge(&serde_json::json!("List")).is_ok());
        assert!(judge(&serde_json::json!({"Send":{"target":1,"text":"hi"}})).is_ok());
        assert!(judge(&serde_json::json!("Shutdown")).is_err());
        assert!(judge(&serde_json::json!("NoSuchThing")).is_err());
        assert!(judge(&serde_json::json!({"Send":{"target":"x"}})).is_err());
    }
}
