//! The requests the bus answers itself, so that a busy app never delays them:
//! Hello, Stats and Shutdown.

use std::future::Future;

use super::{App, Bus};
use crate::protocol::ApiError;
use crate::request::Call;
use crate::request::hello::{Hello, HelloInfo};
use crate::request::shutdown::Shutdown;
use crate::request::stats::Stats;

/// A request the bus answers (served `by bus` in the request list).
pub(super) trait ServedByBus: Call {
    /// Answers the request.
    fn serve<A: App>(
        self,
        bus: &Bus,
        app: &A,
    ) -> impl Future<Output = Result<Self::Answer, ApiError>> + Send;
}

impl ServedByBus for Hello {
    async fn serve<A: App>(self, _bus: &Bus, _app: &A) -> Result<HelloInfo, ApiError> {
        Ok(HelloInfo::of_this_process())
    }
}

impl ServedByBus for Stats {
    async fn serve<A: App>(
        self,
        bus: &Bus,
        app: &A,
    ) -> Result<crate::request::stats::StatsInfo, ApiError> {
        Ok(bus.stats(app.agent_count().await))
    }
}

impl ServedByBus for Shutdown {
    async fn serve<A: App>(self, bus: &Bus, _app: &A) -> Result<(), ApiError> {
        bus.request_shutdown(self.closes_terminals());
        Ok(())
    }
}
