//! Check: one agent's record now, or as soon as its rev passes `since_rev`.

use std::time::Duration;

use krad_bus::protocol::Response;
use krad_bus::request::check::Check;
use krad_bus::server::CallContext;

use crate::Core;

pub(crate) async fn handle(core: &Core, _ctx: &CallContext, request: Check) -> Response {
    let Some(mut watch) = core.store.watch(request.target) else {
        return Core::no_terminal(request.target).into();
    };
    let record = watch.borrow_and_update().clone();
    let Some(wait_secs) = request.wait_secs else {
        return Response::Agent(Box::new(record));
    };
    let since = request.since_rev.unwrap_or(record.rev);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(wait_secs);
    loop {
        let record = watch.borrow_and_update().clone();
        if record.rev > since {
            return Response::Agent(Box::new(record));
        }
        tokio::select! {
            changed = watch.changed() => {
                if changed.is_err() {
                    // Removed: its last record is the answer.
                    return Response::Agent(Box::new(watch.borrow().clone()));
                }
            }
            () = tokio::time::sleep_until(deadline) => return Response::Agent(Box::new(record)),
        }
    }
}
