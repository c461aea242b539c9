//! Rename: a terminal's new name, in its record and as its pane's title.

use krad_bus::protocol::{AgentRecord, ApiError};
use krad_bus::request::RequestKind;
use krad_bus::request::rename::Rename;
use krad_bus::server::{CallContext, Handle};
use krad_bus::token::Principal;

use super::may_act_on;
use crate::app::EmbeddedApp;
use crate::records::no_terminal;

impl Handle<Rename> for EmbeddedApp {
    async fn handle(&self, ctx: &CallContext, request: Rename) -> Result<AgentRecord, ApiError> {
        let core = self.core();
        let id = request.target;
        let record = core.store().record(id).ok_or_else(|| no_terminal(id))?;
        let itself = matches!(&ctx.principal, Principal::Terminal(me) if me.terminal == id);
        if !itself {
            may_act_on(&ctx.principal, RequestKind::Rename, &record)?;
        }
        let name = request.name;
        let renamed = core
            .store()
            .update(id, |entry| {
                let changed = entry.record.name != name;
                entry.record.name.clone_from(&name);
                changed
            })
            .ok_or_else(|| no_terminal(id))?;
        // The phone shows the same name (none: the tab's own title again).
        core.feed()
            .rename(None, Some(id), name.as_deref().unwrap_or_default());
        Ok(renamed)
    }
}
