//! Environments: main, then every worktree by name.

use std::sync::Arc;

use krad_bus::protocol::Response;
use krad_bus::request::environments::Environments;
use krad_bus::server::CallContext;

use crate::{Core, environments};

pub(crate) async fn handle(
    core: &Arc<Core>,
    _ctx: &CallContext,
    _request: Environments,
) -> Response {
    let mut all = vec![environments::main_info(core).await];
    all.extend(
        core.store
            .environments()
            .iter()
            .map(|r| environments::info(core, r)),
    );
    Response::Environments(all)
}
