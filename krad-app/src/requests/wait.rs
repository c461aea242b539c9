//! Wait: until one agent, or all or any of several, stops (or exits) (see
//! [`crate::waiting`]); or, for a variant group, until its agents stop and,
//! with `scored`, its checks are over (see [`crate::checks`]).

use std::future::Future;
use std::time::Duration;

use futures_util::future::Either;
use krad_bus::protocol::{ApiError, Waited};
use krad_bus::request::wait::Wait;
use krad_bus::server::{CallContext, Handle};

use crate::app::EmbeddedApp;
use crate::waiting::HeldWait;

impl Handle<Wait> for EmbeddedApp {
    // It answers `TimedOut` at its own timeout, before the bus's deadline.
    const ANSWERS_BEFORE_DEADLINE: bool = true;

    // Not an `async fn`: its future would keep the request (and its copy of
    // the targets) for as long as the wait lasts.
    fn handle(
        &self,
        _ctx: &CallContext,
        request: Wait,
    ) -> impl Future<Output = Result<Waited, ApiError>> + Send {
        if let Some(group) = request.group.clone() {
            let checks = self.core().checks().clone();
            let timeout = Duration::from_secs(request.timeout_secs());
            let scored = request.scored;
            // Boxed: the future of a Wait is as large as its largest branch,
            // and every held Wait would pay for a group's (2,156 bytes a held
            // Wait with it inline, 1,774 boxed: docs/PERFORMANCE.md).
            return Either::Right(Either::Left(Box::pin(async move {
                Ok(match checks.wait_group(&group, scored, timeout).await? {
                    Some(agents) => Waited::Agents(agents),
                    None => Waited::TimedOut,
                })
            })));
        }
        match HeldWait::new(self.core().store(), request) {
            Ok(waiting) => Either::Left(waiting.until_met()),
            Err(error) => Either::Right(Either::Right(std::future::ready(Err(error)))),
        }
    }
}
