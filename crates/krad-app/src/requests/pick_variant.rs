//! PickVariant: being built (see the project's issues).

use std::sync::Arc;

use krad_bus::protocol::{ApiError, Response};
use krad_bus::request::pick_variant;
use krad_bus::server::CallContext;

use crate::Core;

pub(crate) async fn handle(
    _core: &Arc<Core>,
    _ctx: &CallContext,
    _request: pick_variant::PickVariant,
) -> Response {
    ApiError::internal("PickVariant is being built and not served yet").into()
}
