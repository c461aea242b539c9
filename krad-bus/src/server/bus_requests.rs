//! The requests the bus answers itself, so that a busy app never delays them:
//! Hello, Stats and Shutdown. Hello's answer never changes while the app runs:
//! it is serialized once, when the bus is made, and written as those bytes.

use std::future::Future;

use super::{App, AttachmentOf, Bus, Reply, SubscriptionOf};
use crate::protocol::{EncodedAnswer, TypedAnswer};
use crate::request::Call;
use crate::request::hello::{Hello, HelloInfo};
use crate::request::shutdown::Shutdown;
use crate::request::stats::Stats;

/// A request the bus answers (served `by bus` in the request list).
pub(super) trait ServedByBus: Call {
    /// Answers the request, as it is written.
    fn reply<A: App>(
        self,
        bus: &Bus,
        app: &A,
    ) -> impl Future<Output = Reply<SubscriptionOf<A>, AttachmentOf<A>>> + Send;
}

/// Hello's answer line, made once per bus.
pub(super) fn hello_line() -> EncodedAnswer {
    EncodedAnswer::of(&HelloInfo::of_this_process().into_response())
}

impl ServedByBus for Hello {
    async fn reply<A: App>(self, bus: &Bus, _app: &A) -> Reply<SubscriptionOf<A>, AttachmentOf<A>> {
        Reply::Encoded(bus.hello.clone())
    }
}

impl ServedByBus for Stats {
    async fn reply<A: App>(self, bus: &Bus, app: &A) -> Reply<SubscriptionOf<A>, AttachmentOf<A>> {
        Reply::answer(bus.stats(app.agent_count().await).into_response())
    }
}

impl ServedByBus for Shutdown {
    async fn reply<A: App>(self, bus: &Bus, _app: &A) -> Reply<SubscriptionOf<A>, AttachmentOf<A>> {
        bus.request_shutdown(self.closes_terminals());
        Reply::answer(().into_response())
    }
}
