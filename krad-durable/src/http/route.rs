//! The routes of `/session/v1` as a path and a method name them, and the
//! reading of a URL: its path ids, its query, `%XX` escapes.

use hyper::Method;

use crate::limits;
use crate::wire::WireError;

/// The path every route starts with.
const PREFIX: &str = "/session/v1";

/// A route the facet knows: a GET or a POST.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Route {
    /// A route that reads.
    Get(GetRoute),
    /// A route that acts, with a request id.
    Post(PostRoute),
}

/// The GET routes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum GetRoute {
    /// `/hello`.
    Hello,
    /// `/snapshot`.
    Snapshot,
    /// `/pane/:id/events`.
    Events(String),
    /// `/conversations`.
    Conversations,
    /// `/conversation/:id/items`.
    Items(String),
}

/// The POST routes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum PostRoute {
    /// `/pane/:id/answer`.
    Answer(String),
    /// `/pane/:id/send`.
    Send(String),
    /// `/pane/:id/abort`.
    Abort(String),
    /// `/pane/:id/action`.
    Action(String),
    /// `/rename`.
    Rename,
    /// `/close`.
    Close,
    /// `/starter/:id`.
    Starter(String),
    /// `/reopen`.
    Reopen,
}

impl Route {
    /// The method the route takes.
    fn method(&self) -> Method {
        match self {
            Route::Get(_) => Method::GET,
            Route::Post(_) => Method::POST,
        }
    }
}

/// The route of a path, checked against the method it came with: an unknown
/// path or a bad id is 404, a known route with the other method 405.
pub(super) fn find_route(method: &Method, path: &str) -> Result<Route, WireError> {
    let not_found = || {
        WireError::missing(
            "not-found",
            format!("no route {path}; routes are under {PREFIX}/"),
        )
    };
    let rest = path
        .strip_prefix(PREFIX)
        .and_then(|r| r.strip_prefix('/'))
        .ok_or_else(not_found)?;
    // No route has more than three segments: a longer path is not found
    // without collecting it.
    let mut segments = [""; 3];
    let mut count = 0;
    for segment in rest.split('/') {
        *segments.get_mut(count).ok_or_else(not_found)? = segment;
        count += 1;
    }
    let route = match segments.get(..count).unwrap_or_default() {
        ["hello"] => Route::Get(GetRoute::Hello),
        ["snapshot"] => Route::Get(GetRoute::Snapshot),
        ["conversations"] => Route::Get(GetRoute::Conversations),
        ["pane", id, "events"] => Route::Get(GetRoute::Events(pane_id(id)?)),
        ["conversation", id, "items"] => {
            Route::Get(GetRoute::Items(path_id(id, "no-such-conversation")?))
        }
        ["pane", id, "answer"] => Route::Post(PostRoute::Answer(pane_id(id)?)),
        ["pane", id, "send"] => Route::Post(PostRoute::Send(pane_id(id)?)),
        ["pane", id, "abort"] => Route::Post(PostRoute::Abort(pane_id(id)?)),
        ["pane", id, "action"] => Route::Post(PostRoute::Action(pane_id(id)?)),
        ["rename"] => Route::Post(PostRoute::Rename),
        ["close"] => Route::Post(PostRoute::Close),
        ["reopen"] => Route::Post(PostRoute::Reopen),
        ["starter", id] => Route::Post(PostRoute::Starter(path_id(id, "no-such-starter")?)),
        _ => return Err(not_found()),
    };
    let wanted = route.method();
    if *method != wanted {
        return Err(WireError::new(
            405,
            "method-not-allowed",
            format!("{path} takes {wanted}"),
        ));
    }
    Ok(route)
}

fn pane_id(id: &str) -> Result<String, WireError> {
    path_id(id, "no-such-pane")
}

fn path_id(id: &str, code: &'static str) -> Result<String, WireError> {
    let id = percent_decode(id);
    if limits::valid_id(&id) {
        Ok(id)
    } else {
        Err(WireError::missing(
            code,
            "not an id (1–128 bytes, no spaces, controls, /, ? or #)",
        ))
    }
}

/// A URL's query, decoded: its pairs in order.
pub(super) struct Query(Vec<(String, String)>);

impl Query {
    /// The query of a URL (`None`: there is none).
    pub(super) fn parse(query: Option<&str>) -> Query {
        Query(
            query
                .unwrap_or("")
                .split('&')
                .filter(|pair| !pair.is_empty())
                .map(|pair| {
                    let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                    (percent_decode(key), percent_decode(value))
                })
                .collect(),
        )
    }

    /// The first value of `key`.
    pub(super) fn value(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// `after` as an events cursor: a whole number.
    pub(super) fn event_cursor(&self) -> Result<Option<u64>, WireError> {
        match self.value("after") {
            Some(after) => after
                .parse::<u64>()
                .map(Some)
                .map_err(|_| WireError::bad_request("after is a cursor: a whole number")),
            None => Ok(None),
        }
    }

    /// `after` as a history cursor: opaque, from a previous page.
    pub(super) fn page_cursor(&self) -> Result<Option<String>, WireError> {
        match self.value("after") {
            None | Some("") => Ok(None),
            Some(c) if limits::valid_cursor(c) => Ok(Some(c.to_owned())),
            Some(_) => Err(WireError::bad_request(
                "after is a cursor from a previous page",
            )),
        }
    }

    /// `limit`, clamped to `1..=max` (`max` when absent).
    pub(super) fn limit(&self, max: usize) -> Result<usize, WireError> {
        match self.value("limit") {
            None | Some("") => Ok(max),
            Some(n) => n.parse::<usize>().map(|n| n.clamp(1, max)).map_err(|_| {
                WireError::bad_request(format!("limit is a whole number (at most {max})"))
            }),
        }
    }
}

/// `%XX` decoding; anything malformed is kept as it is.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                i += 3;
            }
            (b'+', _, _) => {
                out.push(b' ');
                i += 1;
            }
            (byte, _, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_and_methods() {
        assert_eq!(
            find_route(&Method::GET, "/session/v1/pane/p1/events").ok(),
            Some(Route::Get(GetRoute::Events("p1".into())))
        );
        assert_eq!(
            find_route(&Method::POST, "/session/v1/pane/p%2D1/send").ok(),
            Some(Route::Post(PostRoute::Send("p-1".into())))
        );
        assert_eq!(
            find_route(&Method::POST, "/session/v1/starter/claude").ok(),
            Some(Route::Post(PostRoute::Starter("claude".into())))
        );
        assert_eq!(
            find_route(&Method::GET, "/session/v1/pane/p1/answer")
                .err()
                .map(|e| e.status),
            Some(405)
        );
        assert_eq!(
            find_route(&Method::POST, "/session/v1/hello")
                .err()
                .map(|e| e.status),
            Some(405)
        );
        assert_eq!(
            find_route(&Method::GET, "/session/v2/hello")
                .err()
                .map(|e| e.code),
            Some("not-found")
        );
        assert_eq!(
            find_route(&Method::GET, "/session/v1/nope")
                .err()
                .map(|e| e.code),
            Some("not-found")
        );
        assert_eq!(
            find_route(&Method::POST, "/session/v1/pane/p1/jump")
                .err()
                .map(|e| e.code),
            Some("not-found")
        );
        for longer in [
            "/session/v1/pane/p1/events/more",
            "/session/v1/hello/",
            "/session/v1/a/b/c/d/e/f",
            "/session/v1/",
        ] {
            assert_eq!(
                find_route(&Method::GET, longer).err().map(|e| e.code),
                Some("not-found"),
                "{longer}"
            );
        }
        assert_eq!(percent_decode("a%20b%2"), "a b%2");
    }

    #[test]
    fn queries() {
        let query = Query::parse(Some("after=12&limit=5000&x"));
        assert_eq!(query.event_cursor().ok(), Some(Some(12)));
        assert_eq!(query.limit(100).ok(), Some(100));
        assert_eq!(query.value("x"), Some(""));
        assert!(Query::parse(Some("after=x")).event_cursor().is_err());
        assert_eq!(Query::parse(None).page_cursor().ok(), Some(None));
    }
}
