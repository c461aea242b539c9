//! Hosts and CheckHost: the SSH hosts of the config and the state of their links.

use crate::app::EmbeddedApp;
use krad_bus::protocol::{ApiError, HostStatus};
use krad_bus::request::hosts::{CheckHost, Hosts};
use krad_bus::server::{CallContext, Handle};

impl Handle<Hosts> for EmbeddedApp {
    async fn handle(
        &self,
        _ctx: &CallContext,
        _request: Hosts,
    ) -> Result<Vec<HostStatus>, ApiError> {
        Ok(self.core().hosts().statuses())
    }
}

/// Connects (when needed) and answers the host's state; an unreachable host is
/// `unavailable` with ssh's own reason.
impl Handle<CheckHost> for EmbeddedApp {
    async fn handle(
        &self,
        _ctx: &CallContext,
        request: CheckHost,
    ) -> Result<Vec<HostStatus>, ApiError> {
        let host = self.core().hosts().get(&request.name)?;
        host.connect().await?;
        host.run("true", None).await?;
        Ok(vec![host.status()])
    }
}
