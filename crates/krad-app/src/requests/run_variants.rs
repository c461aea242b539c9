//! RunVariants: being built (see the project's issues).

use std::sync::Arc;

use krad_bus::protocol::{ApiError, Response};
use krad_bus::request::run_variants;
use krad_bus::server::CallContext;

use crate::Core;

pub(crate) async fn handle(
    _core: &Arc<Core>,
    _ctx: &CallContext,
    _request: run_variants::RunVariants,
) -> Response {
    ApiError::internal("RunVariants is being built and not served yet").into()
}
