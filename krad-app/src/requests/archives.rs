//! Archives and RestoreArchive: the work Close kept under `refs/krad/archive/`
//! (here or on an SSH host), and one of them an environment again (see
//! [`crate::environments::archives`]). Plain terminals may list, not restore.

use krad_bus::protocol::{ApiError, ArchiveInfo, EnvironmentInfo};
use krad_bus::request::archives::{Archives, RestoreArchive};
use krad_bus::server::{CallContext, Handle};

use crate::app::EmbeddedApp;
use crate::environments::{self, archives};
use crate::intents::{Plan, Underway};

impl Handle<Archives> for EmbeddedApp {
    async fn handle(
        &self,
        _ctx: &CallContext,
        request: Archives,
    ) -> Result<Vec<ArchiveInfo>, ApiError> {
        let core = self.core();
        match environments::host(core.environments(), request.host.as_deref())? {
            Some(host) => archives::list(core.environments(), Some(&host)).await,
            None => archives::list_all(core.environments()).await,
        }
    }
}

impl Handle<RestoreArchive> for EmbeddedApp {
    async fn handle(
        &self,
        ctx: &CallContext,
        request: RestoreArchive,
    ) -> Result<EnvironmentInfo, ApiError> {
        let core = self.core();
        let name = request.as_name.unwrap_or_else(|| request.name.clone());
        let host = environments::host(core.environments(), request.host.as_deref())?;
        // Its retry after a crash is a CreateWorktree's: the environment if it
        // was made, else nothing was.
        let _underway = Underway::begin(
            core.store().db(),
            ctx,
            Plan::CreateWorktree { name: name.clone() },
        )?;
        let record = archives::restore(core.environments(), &request.name, &name, host).await?;
        Ok(environments::info(core.environments(), &record))
    }
}
