//! Environments: main, then every worktree by name.

use krad_bus::protocol::{ApiError, EnvironmentInfo};
use krad_bus::request::environments::Environments;
use krad_bus::server::{CallContext, Handle};

use crate::app::EmbeddedApp;
use crate::environments;

impl Handle<Environments> for EmbeddedApp {
    async fn handle(
        &self,
        _ctx: &CallContext,
        _request: Environments,
    ) -> Result<Vec<EnvironmentInfo>, ApiError> {
        let core = self.core();
        let mut all = vec![environments::main_info(core.environments()).await];
        all.extend(environments::infos(core.environments(), &core.store().environments()).await);
        Ok(all)
    }
}
