//! Wait: until one agent, or all or any of several, stops (or exits) (see
//! [`crate::waiting`]).

use std::future::Future;

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
        match HeldWait::new(self.core().store(), request) {
            Ok(waiting) => Either::Left(waiting.until_met()),
            Err(error) => Either::Right(std::future::ready(Err(error))),
        }
    }
}
