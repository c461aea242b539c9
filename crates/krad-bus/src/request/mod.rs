//! The request set: one file per request, and here the table that says, for every
//! request, its wire name, who may make it, its deadline and whether it mutates.
//!
//! Adding a request means adding a [`RequestKind`], a [`Request`] variant and its
//! file; every `match` below (and the server's dispatch) refuses to compile until
//! the new request's rights and deadline are decided.

pub mod ask;
pub mod attach;
pub mod changes;
pub mod check;
pub mod close;
pub mod code;
pub mod create_worktree;
pub mod environments;
pub mod extension_tool;
pub mod extensions;
pub mod hello;
pub mod hosts;
pub mod list;
pub mod output;
pub mod pick_variant;
pub mod report;
pub mod run_variants;
pub mod send;
pub mod shutdown;
pub mod spawn;
pub mod stats;
pub mod subscribe_agents;
pub mod wait;

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::protocol::{ApiError, ErrorCode};

/// A request's fields: decoded by serde, then checked for values that are
/// well-formed but impossible (`invalid`).
pub trait Fields: DeserializeOwned {
    /// Checks what serde cannot; the default accepts everything.
    fn validate(&self) -> Result<(), ApiError> {
        Ok(())
    }
}

/// `invalid`, naming the request and the field.
pub(crate) fn invalid(request: &str, field: &str, why: impl std::fmt::Display) -> ApiError {
    ApiError::new(
        ErrorCode::Invalid,
        format!("{request}: field \"{field}\": {why}"),
    )
    .with_detail(serde_json::json!({ "request": request, "field": field }))
}

/// The deadlines of section 5, in one place.
pub mod deadline {
    use std::time::Duration;

    /// Most requests.
    pub const STANDARD: Duration = Duration::from_secs(10);
    /// CreateWorktree, Changes, Close, PickVariant, Spawn, RunVariants.
    pub const LONG: Duration = Duration::from_secs(60);
    /// Code, ExtensionTool.
    pub const LONGEST: Duration = Duration::from_secs(120);
    /// The longest a Wait or a Check may ask to wait, in seconds.
    pub const MAX_WAIT_SECS: u64 = 1800;
    /// Added to the time a Wait or Check asked for.
    pub const WAIT_GRACE: Duration = Duration::from_secs(1);
}

/// Declares [`RequestKind`], its [`RequestKind::ALL`] list and its wire names
/// from one list, so that no request can be served yet missing from Hello.
macro_rules! request_kinds {
    ($($kind:ident),* $(,)?) => {
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
        }
    };
}

request_kinds![
    Hello,
    List,
    Check,
    Wait,
    Spawn,
    Send,
    Output,
    Close,
    Report,
    SubscribeAgents,
    Attach,
    Environments,
    CreateWorktree,
    Changes,
    RunVariants,
    PickVariant,
    Code,
    Extensions,
    ExtensionTool,
    Hosts,
    CheckHost,
    Ask,
    Answer,
    Asks,
    Stats,
    Shutdown,
];

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

    /// Who may make this request.
    pub fn rights(self) -> Rights {
        match self {
            RequestKind::Hello
            | RequestKind::List
            | RequestKind::Check
            | RequestKind::Wait
            | RequestKind::Output
            | RequestKind::SubscribeAgents
            | RequestKind::Environments
            | RequestKind::Changes
            | RequestKind::Extensions
            | RequestKind::ExtensionTool
            | RequestKind::Hosts
            | RequestKind::CheckHost
            | RequestKind::Asks
            | RequestKind::Stats => Rights::Anyone,
            RequestKind::Report | RequestKind::Ask => Rights::TerminalsAboutThemselves,
            RequestKind::Answer => Rights::ClientAndLeads,
            RequestKind::Spawn
            | RequestKind::Send
            | RequestKind::Attach
            | RequestKind::Close
            | RequestKind::CreateWorktree
            | RequestKind::RunVariants
            | RequestKind::PickVariant
            | RequestKind::Code => Rights::Scoped,
            RequestKind::Shutdown => Rights::ClientOnly,
        }
    }

    /// Whether a `request_id` makes this request at-most-once (section 8).
    pub fn mutates(self) -> bool {
        match self {
            RequestKind::Hello
            | RequestKind::List
            | RequestKind::Check
            | RequestKind::Wait
            | RequestKind::Output
            | RequestKind::Report
            | RequestKind::SubscribeAgents
            | RequestKind::Attach
            | RequestKind::Environments
            | RequestKind::Changes
            | RequestKind::Extensions
            | RequestKind::ExtensionTool
            | RequestKind::Hosts
            | RequestKind::CheckHost
            | RequestKind::Ask
            | RequestKind::Asks
            | RequestKind::Stats => false,
            RequestKind::Answer => true,
            RequestKind::Spawn
            | RequestKind::Send
            | RequestKind::Close
            | RequestKind::CreateWorktree
            | RequestKind::RunVariants
            | RequestKind::PickVariant
            | RequestKind::Code
            | RequestKind::Shutdown => true,
        }
    }
}

/// A request whose name and fields have been checked.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Request {
    /// See [`hello::Hello`].
    Hello(hello::Hello),
    /// See [`list::List`].
    List(list::List),
    /// See [`check::Check`].
    Check(check::Check),
    /// See [`wait::Wait`].
    Wait(wait::Wait),
    /// See [`spawn::Spawn`].
    Spawn(spawn::Spawn),
    /// See [`send::Send`].
    Send(send::Send),
    /// See [`output::Output`].
    Output(output::Output),
    /// See [`close::Close`].
    Close(close::Close),
    /// See [`report::Report`].
    Report(report::Report),
    /// See [`subscribe_agents::SubscribeAgents`].
    SubscribeAgents(subscribe_agents::SubscribeAgents),
    /// See [`attach::Attach`].
    Attach(attach::Attach),
    /// See [`environments::Environments`].
    Environments(environments::Environments),
    /// See [`create_worktree::CreateWorktree`].
    CreateWorktree(create_worktree::CreateWorktree),
    /// See [`changes::Changes`].
    Changes(changes::Changes),
    /// See [`run_variants::RunVariants`].
    RunVariants(run_variants::RunVariants),
    /// See [`pick_variant::PickVariant`].
    PickVariant(pick_variant::PickVariant),
    /// See [`code::Code`].
    Code(code::Code),
    /// See [`extensions::Extensions`].
    Extensions(extensions::Extensions),
    /// See [`extension_tool::ExtensionTool`].
    ExtensionTool(extension_tool::ExtensionTool),
    /// See [`hosts::Hosts`].
    Hosts(hosts::Hosts),
    /// See [`hosts::CheckHost`].
    CheckHost(hosts::CheckHost),
    /// See [`ask::Ask`].
    Ask(ask::Ask),
    /// See [`ask::Answer`].
    Answer(ask::Answer),
    /// See [`ask::Asks`].
    Asks(ask::Asks),
    /// See [`stats::Stats`].
    Stats(stats::Stats),
    /// See [`shutdown::Shutdown`].
    Shutdown(shutdown::Shutdown),
}

impl Request {
    /// Step 4 of the order of checks: the request's name, then its fields.
    ///
    /// An unknown name is `unknown_request`; fields of the wrong shape are
    /// `bad_request` naming the request and the field. Unknown fields are ignored.
    pub fn parse(name: &str, fields: Option<Value>) -> Result<Request, ApiError> {
        let Some(kind) = RequestKind::from_name(name) else {
            return Err(ApiError::new(
                ErrorCode::UnknownRequest,
                format!(
                    "unknown request {name:?}: this app (build {}) does not serve it; \
                     if a newer krad knows it, update the app",
                    crate::protocol::BUILD
                ),
            )
            .with_detail(serde_json::json!({ "request": name })));
        };
        Ok(match kind {
            RequestKind::Hello => Request::Hello(fields_of(kind, fields)?),
            RequestKind::List => Request::List(fields_of(kind, fields)?),
            RequestKind::Check => Request::Check(fields_of(kind, fields)?),
            RequestKind::Wait => Request::Wait(fields_of(kind, fields)?),
            RequestKind::Spawn => Request::Spawn(fields_of(kind, fields)?),
            RequestKind::Send => Request::Send(fields_of(kind, fields)?),
            RequestKind::Output => Request::Output(fields_of(kind, fields)?),
            RequestKind::Close => Request::Close(fields_of(kind, fields)?),
            RequestKind::Report => Request::Report(fields_of(kind, fields)?),
            RequestKind::SubscribeAgents => Request::SubscribeAgents(fields_of(kind, fields)?),
            RequestKind::Attach => Request::Attach(fields_of(kind, fields)?),
            RequestKind::Environments => Request::Environments(fields_of(kind, fields)?),
            RequestKind::CreateWorktree => Request::CreateWorktree(fields_of(kind, fields)?),
            RequestKind::Changes => Request::Changes(fields_of(kind, fields)?),
            RequestKind::RunVariants => Request::RunVariants(fields_of(kind, fields)?),
            RequestKind::PickVariant => Request::PickVariant(fields_of(kind, fields)?),
            RequestKind::Code => Request::Code(fields_of(kind, fields)?),
            RequestKind::Extensions => Request::Extensions(fields_of(kind, fields)?),
            RequestKind::ExtensionTool => Request::ExtensionTool(fields_of(kind, fields)?),
            RequestKind::Hosts => Request::Hosts(fields_of(kind, fields)?),
            RequestKind::CheckHost => Request::CheckHost(fields_of(kind, fields)?),
            RequestKind::Ask => Request::Ask(fields_of(kind, fields)?),
            RequestKind::Answer => Request::Answer(fields_of(kind, fields)?),
            RequestKind::Asks => Request::Asks(fields_of(kind, fields)?),
            RequestKind::Stats => Request::Stats(fields_of(kind, fields)?),
            RequestKind::Shutdown => Request::Shutdown(fields_of(kind, fields)?),
        })
    }

    /// The request's name.
    pub fn kind(&self) -> RequestKind {
        match self {
            Request::Hello(_) => RequestKind::Hello,
            Request::List(_) => RequestKind::List,
            Request::Check(_) => RequestKind::Check,
            Request::Wait(_) => RequestKind::Wait,
            Request::Spawn(_) => RequestKind::Spawn,
            Request::Send(_) => RequestKind::Send,
            Request::Output(_) => RequestKind::Output,
            Request::Close(_) => RequestKind::Close,
            Request::Report(_) => RequestKind::Report,
            Request::SubscribeAgents(_) => RequestKind::SubscribeAgents,
            Request::Attach(_) => RequestKind::Attach,
            Request::Environments(_) => RequestKind::Environments,
            Request::CreateWorktree(_) => RequestKind::CreateWorktree,
            Request::Changes(_) => RequestKind::Changes,
            Request::RunVariants(_) => RequestKind::RunVariants,
            Request::PickVariant(_) => RequestKind::PickVariant,
            Request::Code(_) => RequestKind::Code,
            Request::Extensions(_) => RequestKind::Extensions,
            Request::ExtensionTool(_) => RequestKind::ExtensionTool,
            Request::Hosts(_) => RequestKind::Hosts,
            Request::CheckHost(_) => RequestKind::CheckHost,
            Request::Ask(_) => RequestKind::Ask,
            Request::Answer(_) => RequestKind::Answer,
            Request::Asks(_) => RequestKind::Asks,
            Request::Stats(_) => RequestKind::Stats,
            Request::Shutdown(_) => RequestKind::Shutdown,
        }
    }

    /// How long the app may take before it answers `"TimedOut"`; `None` for streams.
    pub fn deadline(&self) -> Option<Duration> {
        let waited = |secs: u64| Some(Duration::from_secs(secs) + deadline::WAIT_GRACE);
        match self {
            Request::Hello(_)
            | Request::List(_)
            | Request::Send(_)
            | Request::Output(_)
            | Request::Report(_)
            | Request::Environments(_)
            | Request::Extensions(_)
            | Request::Hosts(_)
            | Request::Answer(_)
            | Request::Asks(_)
            | Request::Stats(_)
            | Request::Shutdown(_) => Some(deadline::STANDARD),
            Request::Ask(ask) => waited(ask.expiry_secs()),
            Request::CheckHost(_) => Some(deadline::LONG),
            Request::Spawn(_)
            | Request::Close(_)
            | Request::CreateWorktree(_)
            | Request::Changes(_)
            | Request::RunVariants(_)
            | Request::PickVariant(_) => Some(deadline::LONG),
            Request::Code(_) | Request::ExtensionTool(_) => Some(deadline::LONGEST),
            Request::Check(check) => match check.wait_secs {
                Some(secs) => waited(secs),
                None => Some(deadline::STANDARD),
            },
            Request::Wait(wait) => waited(wait.timeout_secs()),
            Request::SubscribeAgents(_) | Request::Attach(_) => None,
        }
    }

    /// Whether the request waits on something, so that a client closing its
    /// connection cancels it (section 2).
    pub fn cancels_when_client_leaves(&self) -> bool {
        match self {
            Request::Check(check) => check.wait_secs.is_some(),
            Request::Send(send) => send.when == Some(send::When::Idle),
            Request::Wait(_)
            | Request::SubscribeAgents(_)
            | Request::Attach(_)
            | Request::Code(_)
            | Request::ExtensionTool(_)
            | Request::Ask(_) => true,
            Request::Hello(_)
            | Request::List(_)
            | Request::Spawn(_)
            | Request::Output(_)
            | Request::Close(_)
            | Request::Report(_)
            | Request::Environments(_)
            | Request::CreateWorktree(_)
            | Request::Changes(_)
            | Request::RunVariants(_)
            | Request::PickVariant(_)
            | Request::Extensions(_)
            | Request::Hosts(_)
            | Request::CheckHost(_)
            | Request::Answer(_)
            | Request::Asks(_)
            | Request::Stats(_)
            | Request::Shutdown(_) => false,
        }
    }

    /// Whether the request counts in Stats' `waits_pending` while it runs.
    pub fn is_wait(&self) -> bool {
        match self {
            Request::Check(check) => check.wait_secs.is_some(),
            Request::Wait(_) => true,
            Request::Hello(_)
            | Request::List(_)
            | Request::Spawn(_)
            | Request::Send(_)
            | Request::Output(_)
            | Request::Close(_)
            | Request::Report(_)
            | Request::SubscribeAgents(_)
            | Request::Attach(_)
            | Request::Environments(_)
            | Request::CreateWorktree(_)
            | Request::Changes(_)
            | Request::RunVariants(_)
            | Request::PickVariant(_)
            | Request::Code(_)
            | Request::Extensions(_)
            | Request::ExtensionTool(_)
            | Request::Hosts(_)
            | Request::CheckHost(_)
            | Request::Ask(_)
            | Request::Answer(_)
            | Request::Asks(_)
            | Request::Stats(_)
            | Request::Shutdown(_) => false,
        }
    }

    /// The request as its wire JSON (`{"Name":{…}}`).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// Decodes a request's fields, naming the field that is wrong.
fn fields_of<T: Fields>(kind: RequestKind, fields: Option<Value>) -> Result<T, ApiError> {
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
        let inner = e.into_inner();
        let message = if path == "." {
            format!("{}: {inner}", kind.name())
        } else {
            format!("{}: field \"{path}\": {inner}", kind.name())
        };
        ApiError::bad_request(message)
            .with_detail(serde_json::json!({ "request": kind.name(), "field": path }))
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
