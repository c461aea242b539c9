//! Connections: a contained terminal's connection attempts, from its
//! sandbox's network ([`crate::sandbox::net`]).

use krad_bus::protocol::ApiError;
use krad_bus::request::connections::{Connections, ConnectionsInfo};
use krad_bus::server::{CallContext, Handle};

use crate::app::EmbeddedApp;
use crate::records::no_terminal;

impl Handle<Connections> for EmbeddedApp {
    async fn handle(
        &self,
        _ctx: &CallContext,
        request: Connections,
    ) -> Result<ConnectionsInfo, ApiError> {
        let core = self.core();
        if core.store().record(request.target).is_none() {
            return Err(no_terminal(request.target));
        }
        Ok(match core.sandbox().nets().get(request.target) {
            Some(net) => net.info(request.since),
            None => ConnectionsInfo {
                terminal: request.target,
                ..ConnectionsInfo::default()
            },
        })
    }
}
