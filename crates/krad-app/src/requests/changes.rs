//! Changes: being built (see the project's issues).

use std::sync::Arc;

use krad_bus::protocol::{ApiError, Response};
use krad_bus::request::changes;
use krad_bus::server::CallContext;

use crate::Core;

pub(crate) async fn handle(
    _core: &Arc<Core>,
    _ctx: &CallContext,
    _request: changes::Changes,
) -> Response {
    ApiError::internal("Changes is being built and not served yet").into()
}
