//! Hosts and CheckHost: the SSH hosts of the config and the state of their links.

use std::sync::Arc;

use krad_bus::protocol::Response;
use krad_bus::request::hosts::{CheckHost, Hosts};
use krad_bus::server::CallContext;

use crate::Core;

pub(crate) async fn list(core: &Arc<Core>, _ctx: &CallContext, _request: Hosts) -> Response {
    Response::Hosts(
        core.hosts
            .statuses()
            .iter()
            .filter_map(|s| serde_json::to_value(s).ok())
            .collect(),
    )
}

/// Connects (when needed) and answers the host's state; an unreachable host is
/// `unavailable` with ssh's own reason.
pub(crate) async fn check(core: &Arc<Core>, _ctx: &CallContext, request: CheckHost) -> Response {
    let host = match core.hosts.get(&request.name) {
        Ok(host) => host,
        Err(e) => return e.into(),
    };
    if let Err(e) = host.connect().await {
        return e.into();
    }
    if let Err(e) = host.run("true", None).await {
        return e.into();
    }
    Response::Hosts(
        serde_json::to_value(host.status())
            .ok()
            .into_iter()
            .collect(),
    )
}
