//! PickVariant: keeps one variant, archives and closes the others.

use std::sync::Arc;

use krad_bus::protocol::Response;
use krad_bus::request::pick_variant::PickVariant;
use krad_bus::server::CallContext;

use super::not_for_plain_terminals;
use crate::Core;
use crate::environments::variants;

pub(crate) async fn handle(core: &Arc<Core>, ctx: &CallContext, request: PickVariant) -> Response {
    if let Err(e) = not_for_plain_terminals(&ctx.principal, "PickVariant") {
        return e.into();
    }
    match variants::pick(core, request).await {
        Ok(picked) => Response::Picked(picked),
        Err(e) => e.into(),
    }
}
