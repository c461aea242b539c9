//! CreateWorktree: being built (see the project's issues).

use std::sync::Arc;

use krad_bus::protocol::{ApiError, Response};
use krad_bus::request::create_worktree;
use krad_bus::server::CallContext;

use crate::Core;

pub(crate) async fn handle(
    _core: &Arc<Core>,
    _ctx: &CallContext,
    _request: create_worktree::CreateWorktree,
) -> Response {
    ApiError::internal("CreateWorktree is being built and not served yet").into()
}
