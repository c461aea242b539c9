//! The request set: one file per request, each declaring everything about its
//! request in one `impl Call` (its answer, who may make it, its deadline, whether
//! it is at-most-once, whether it waits), and here the one list of requests from
//! which the rest is derived: [`RequestKind`], [`Request`] and its parsing, the
//! names Hello lists, the server's dispatch and the app's handler trait.
//!
//! Adding a request: a file here with its struct and `impl Call`, a `pub mod`
//! line and a line in [`for_each_request!`]; then the app's handler
//! (`impl Handle<TheRequest>`). Nothing compiles until the handler exists.

pub mod answer;
pub mod archives;
pub mod ask;
pub mod asks;
pub mod attach;
pub mod budget;
pub mod changes;
pub mod check;
pub mod check_variants;
pub mod close;
pub mod code;
pub mod collect_environments;
pub mod conflicts;
pub mod connections;
pub mod create_worktree;
pub mod environments;
pub mod extension_tool;
pub mod extensions;
pub mod hello;
pub mod hosts;
pub mod list;
pub mod merge_variants;
pub mod output;
pub mod pick_variant;
pub mod rename;
pub mod report;
pub mod run_variants;
pub mod scores;
pub mod send;
pub mod shutdown;
pub mod spawn;
pub mod stats;
pub mod subscribe_agents;
pub mod update_environment;
pub mod wait;

use std::fmt::Display;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::protocol::{ApiError, ErrorCode, TypedAnswer};

/// One request: its fields (decoded by serde, then checked by [`Call::validate`])
/// and every fact about it the bus, the app and the clients need.
///
/// Each fact is said one way: the constants are facts about the request's kind
/// (they never depend on its fields); the functions may look at the fields, and
/// a request overrides one only when it differs from the default.
pub trait Call: DeserializeOwned + Serialize + Into<Request> + Send + 'static {
    /// Its name.
    const KIND: RequestKind;
    /// Who may make it (section 4).
    const RIGHTS: Rights;
    /// Whether a `request_id` makes it at-most-once (section 8).
    const AT_MOST_ONCE: bool;
    /// What it answers when it succeeds.
    type Answer: TypedAnswer;

    /// Checks what serde cannot (values well-formed but impossible: `invalid`);
    /// the default accepts everything.
    fn validate(&self) -> Result<(), ApiError> {
        Ok(())
    }

    /// How long the app may take before it answers `"TimedOut"`. The default:
    /// [`deadline::STANDARD`]; none for a stream ([`TypedAnswer::STREAMS`]).
    fn deadline(&self) -> Option<Duration> {
        (!Self::Answer::STREAMS).then_some(deadline::STANDARD)
    }

    /// Whether it waits on something, so that a client closing its connection
    /// cancels it (section 2). The default: only a stream.
    fn cancels_when_client_leaves(&self) -> bool {
        Self::Answer::STREAMS
    }

    /// Whether it counts in Stats' `waits_pending` while it runs.
    fn is_wait(&self) -> bool {
        false
    }
}

/// The deadlines of section 5, in one place.
pub mod deadline {
    use std::time::Duration;

    /// Most requests.
    pub const STANDARD: Duration = Duration::from_secs(10);
    /// CreateWorktree, Changes, Conflicts, UpdateEnvironment, Close, PickVariant,
    /// Spawn, RunVariants.
    pub const LONG: Duration = Duration::from_secs(60);
    /// Code, ExtensionTool.
    pub const LONGEST: Duration = Duration::from_secs(120);
    /// The longest a Wait or a Check may ask to wait, in seconds.
    pub const MAX_WAIT_SECS: u64 = 1800;
    /// CollectEnvironments: each environment's teardown may take its time, and
    /// removing a large worktree is a large delete (it runs to its end all the
    /// same).
    pub const COLLECTION: Duration = Duration::from_secs(600);
    /// Added to the time a Wait or Check asked for.
    pub const WAIT_GRACE: Duration = Duration::from_secs(1);

    /// The deadline of a request that asked to wait `secs`.
    pub fn waited(secs: u64) -> Duration {
        Duration::from_secs(secs) + WAIT_GRACE
    }
}

/// The one list of requests, in the order Hello lists them: each request's
/// name, its module, and who serves it (`bus`: the bus itself; `app`: the app
/// through [`crate::server::Handle`]; `encoded`: the app, answering a line it
/// spliced from cached JSON through [`crate::server::HandleEncoded`]; `stream`:
/// a SubscribeAgents stream; `attach`: an attachment). Everything that must name every request is
/// generated from it by a macro passed as `$then`.
macro_rules! for_each_request {
    ($then:ident) => {
        $then! {
            Hello(hello) by bus,
            List(list) by encoded,
            Check(check) by encoded,
            Wait(wait) by app,
            Spawn(spawn) by app,
            Send(send) by app,
            Output(output) by app,
            Close(close) by app,
            Rename(rename) by app,
            Budget(budget) by app,
            Report(report) by app,
            SubscribeAgents(subscribe_agents) by stream,
            Attach(attach) by attach,
            Environments(environments) by app,
            CreateWorktree(create_worktree) by app,
            Changes(changes) by app,
            Conflicts(conflicts) by app,
            UpdateEnvironment(update_environment) by app,
            Archives(archives) by app,
            RestoreArchive(archives) by app,
            CollectEnvironments(collect_environments) by app,
            RunVariants(run_variants) by app,
            PickVariant(pick_variant) by app,
            Scores(scores) by app,
            CheckVariants(check_variants) by app,
            MergeVariants(merge_variants) by app,
            Code(code) by app,
            Extensions(extensions) by app,
            ExtensionTool(extension_tool) by app,
            Hosts(hosts) by app,
            CheckHost(hosts) by app,
            Ask(ask) by app,
            Answer(answer) by app,
            Asks(asks) by app,
            Connections(connections) by app,
            Stats(stats) by bus,
            Shutdown(shutdown) by bus,
        }
    };
}

pub(crate) use for_each_request;

/// Declares [`RequestKind`], [`Request`] and what is derived from them.
macro_rules! declare_requests {
    ($($kind:ident($module:ident) by $served:ident,)*) => {
        /// The name of a request, without its fields.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum RequestKind {
            $(
                #[doc = concat!("The `", stringify!($kind), "` request.")]
                $kind,
            )*
        }

        impl RequestKind {
            /// Every request this app serves, in the order Hello lists them.
            pub const ALL: &'static [RequestKind] = &[$(RequestKind::$kind),*];

            /// The wire name.
            pub fn name(self) -> &'static str {
                match self {
                    $(RequestKind::$kind => stringify!($kind),)*
                }
            }

            /// Who may make this request.
            pub fn rights(self) -> Rights {
                match self {
                    $(RequestKind::$kind => <$module::$kind as Call>::RIGHTS,)*
                }
            }

            /// Whether a `request_id` makes this request at-most-once (section 8).
            pub fn at_most_once(self) -> bool {
                match self {
                    $(RequestKind::$kind => <$module::$kind as Call>::AT_MOST_ONCE,)*
                }
            }
        }

        /// A request whose name and fields have been checked.
        #[derive(Debug, Clone, PartialEq, Serialize)]
        pub enum Request {
            $(
                #[doc = concat!("See [`", stringify!($module), "::", stringify!($kind), "`].")]
                $kind($module::$kind),
            )*
        }

        $(
            impl From<$module::$kind> for Request {
                fn from(request: $module::$kind) -> Request {
                    Request::$kind(request)
                }
            }
        )*

        impl Request {
            /// Step 4 of the order of checks: the request's name, then its fields.
            ///
            /// An unknown name is `unknown_request`; fields of the wrong shape are
            /// `bad_request` naming the request and the field. Unknown fields are ignored.
            pub fn parse(name: &str, fields: Option<Value>) -> Result<Request, ApiError> {
                let Some(kind) = RequestKind::from_name(name) else {
                    return Err(unknown_request(name));
                };
                Ok(match kind {
                    $(RequestKind::$kind => Request::$kind(fields_of(fields)?),)*
                })
            }

            /// The request's name.
            pub fn kind(&self) -> RequestKind {
                match self {
                    $(Request::$kind(_) => RequestKind::$kind,)*
                }
            }

            /// How long the app may take before it answers `"TimedOut"`; `None` for streams.
            pub fn deadline(&self) -> Option<Duration> {
                match self {
                    $(Request::$kind(r) => r.deadline(),)*
                }
            }

            /// Whether the request waits on something, so that a client closing its
            /// connection cancels it (section 2).
            pub fn cancels_when_client_leaves(&self) -> bool {
                match self {
                    $(Request::$kind(r) => r.cancels_when_client_leaves(),)*
                }
            }

            /// Whether the request counts in Stats' `waits_pending` while it runs.
            pub fn is_wait(&self) -> bool {
                match self {
                    $(Request::$kind(r) => r.is_wait(),)*
                }
            }
        }
    };
}

for_each_request!(declare_requests);

/// Who may make a request (the table of section 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rights {
    /// Client, lead terminals and plain terminals.
    Anyone,
    /// Only `Client`.
    ClientOnly,
    /// Only terminals, each about itself (Report).
    TerminalsAboutThemselves,
    /// Client and lead terminals anywhere; a plain terminal only inside its own
    /// environment and on terminals it spawned (the app checks the scope).
    Scoped,
    /// Client and lead terminals; never a plain terminal.
    ClientAndLeads,
}

impl RequestKind {
    /// Looks a wire name up; `None` means `unknown_request`.
    pub fn from_name(name: &str) -> Option<RequestKind> {
        Self::ALL.iter().copied().find(|kind| kind.name() == name)
    }

    /// An error about this request as a whole: the message as given, the
    /// detail naming the request.
    pub fn error(self, code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError::new(code, message).with_detail(serde_json::json!({ "request": self.name() }))
    }

    /// An error about one of this request's fields: `<request>: <message>`, the
    /// detail naming the request and the field.
    pub fn field_error(self, code: ErrorCode, field: &str, message: impl Display) -> ApiError {
        ApiError::new(code, format!("{}: {message}", self.name()))
            .with_detail(serde_json::json!({ "request": self.name(), "field": field }))
    }

    /// `invalid`: a field well-formed but impossible (`<request>: field
    /// "<field>": <why>`).
    pub fn invalid(self, field: &str, why: impl Display) -> ApiError {
        self.field_error(
            ErrorCode::Invalid,
            field,
            format_args!("field \"{field}\": {why}"),
        )
    }
}

impl Request {
    /// The request as its wire JSON (`{"Name":{…}}`).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

fn unknown_request(name: &str) -> ApiError {
    ApiError::new(
        ErrorCode::UnknownRequest,
        format!(
            "unknown request {name:?}: this app (build {}) does not serve it; \
             if a newer krad knows it, update the app",
            crate::protocol::BUILD
        ),
    )
    .with_detail(serde_json::json!({ "request": name }))
}

/// Decodes a request's fields, naming the field that is wrong.
fn fields_of<T: Call>(fields: Option<Value>) -> Result<T, ApiError> {
    let kind = T::KIND;
    let fields = match fields {
        None | Some(Value::Null) => Value::Object(Default::default()),
        Some(object @ Value::Object(_)) => object,
        Some(_) => {
            return Err(ApiError::bad_request(format!(
                "{}: the request's fields must be an object",
                kind.name()
            )));
        }
    };
    let decoded: T = serde_path_to_error::deserialize(fields).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        // serde says a missing field at the path of the object that lacks it.
        let missing = inner
            .strip_prefix("missing field `")
            .and_then(|rest| rest.split('`').next());
        let (field, message) = match (path.as_str(), missing) {
            (".", Some(name)) => (name.to_owned(), format!("field \"{name}\" is missing")),
            (_, Some(name)) => {
                let field = format!("{path}.{name}");
                let message = format!("field \"{field}\" is missing");
                (field, message)
            }
            (".", None) => (path.clone(), inner),
            (_, None) => (path.clone(), format!("field \"{path}\": {inner}")),
        };
        kind.field_error(ErrorCode::BadRequest, &field, message)
    })?;
    decoded.validate()?;
    Ok(decoded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ErrorCode;
    use serde_json::json;

    #[test]
    fn every_kind_round_trips_its_name() {
        for &kind in RequestKind::ALL {
            assert_eq!(RequestKind::from_name(kind.name()), Some(kind));
        }
    }

    #[test]
    fn fieldless_requests_take_every_spelling() {
        for fields in [
            None,
            Some(json!(null)),
            Some(json!({})),
            Some(json!({"x":1})),
        ] {
            assert_eq!(
                Request::parse("Hello", fields).unwrap(),
                Request::Hello(hello::Hello {})
            );
        }
    }

    #[test]
    fn unknown_names_and_bad_fields() {
        let e = Request::parse("Teleport", None).unwrap_err();
        assert_eq!(e.code, ErrorCode::UnknownRequest);
        let e = Request::parse("Shutdown", Some(json!({"close_terminals":"yes"}))).unwrap_err();
        assert_eq!(e.code, ErrorCode::BadRequest);
        assert!(
            e.message.contains("Shutdown") && e.message.contains("close_terminals"),
            "{}",
            e.message
        );
        let e = Request::parse("Shutdown", Some(json!([1]))).unwrap_err();
        assert_eq!(e.code, ErrorCode::BadRequest);
    }

    #[test]
    fn a_missing_field_is_named_in_the_detail() {
        let e = Request::parse("Check", Some(json!({}))).unwrap_err();
        assert_eq!(e.code, ErrorCode::BadRequest);
        assert_eq!(e.message, "Check: field \"target\" is missing");
        assert_eq!(e.detail.unwrap()["field"], "target");
        let e = Request::parse("Ask", Some(json!({"kind": "permission", "tool": {}}))).unwrap_err();
        assert_eq!(e.detail.unwrap()["field"], "tool.name", "{}", e.message);
    }

    #[test]
    fn streams_have_no_deadline_and_end_when_their_client_leaves() {
        for name in ["SubscribeAgents", "Attach"] {
            let request = Request::parse(name, Some(json!({"target": 1}))).unwrap();
            assert_eq!(request.deadline(), None, "{name}");
            assert!(request.cancels_when_client_leaves(), "{name}");
        }
        let hello = Request::parse("Hello", None).unwrap();
        assert_eq!(hello.deadline(), Some(deadline::STANDARD));
        assert!(!hello.cancels_when_client_leaves());
    }

    #[test]
    fn wire_form_parses_back() {
        let request = Request::Shutdown(shutdown::Shutdown {
            close_terminals: Some(false),
        });
        let Value::Object(map) = request.to_value() else {
            panic!()
        };
        let (name, fields) = map.into_iter().next().unwrap();
        assert_eq!(Request::parse(&name, Some(fields)).unwrap(), request);
    }
}
