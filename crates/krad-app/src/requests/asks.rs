//! Asks: the open asks, oldest first.

use std::sync::Arc;

use krad_bus::protocol::Response;
use krad_bus::request::ask::Asks;
use krad_bus::server::CallContext;

use crate::Core;

pub(crate) async fn handle(core: &Arc<Core>, _ctx: &CallContext, request: Asks) -> Response {
    Response::Asks(core.asks.list(request.terminal))
}
