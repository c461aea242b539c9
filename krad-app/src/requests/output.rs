//! Output: the visible screen, the cursor and the last lines of scrollback.

use krad_bus::protocol::{ApiError, MAX_RESPONSE, OutputInfo};
use krad_bus::request::output::Output;
use krad_bus::server::{CallContext, Handle};

use crate::app::EmbeddedApp;
use crate::records::no_terminal;

/// Room kept in the answer line for everything but the scrollback.
const ANSWER_ROOM: usize = MAX_RESPONSE - 512 * 1024;

impl Handle<Output> for EmbeddedApp {
    async fn handle(&self, _ctx: &CallContext, request: Output) -> Result<OutputInfo, ApiError> {
        let core = self.core();
        let Some(terminal) = core.store().with(request.target, |e| e.terminal.clone()) else {
            return Err(no_terminal(request.target));
        };
        let snapshot = terminal.snapshot(request.lines());
        let mut scrollback = snapshot.scrollback;
        let mut truncated = snapshot.truncated;
        // Keep the newest lines that fit in one answer line.
        let mut size = snapshot.screen.len();
        let mut keep_from = scrollback.len();
        while keep_from > 0 {
            let line = scrollback[keep_from - 1].len() + 4;
            if size + line > ANSWER_ROOM {
                truncated = true;
                break;
            }
            size += line;
            keep_from -= 1;
        }
        scrollback.drain(..keep_from);
        Ok(OutputInfo {
            terminal: request.target,
            screen: snapshot.screen,
            cursor: [snapshot.cursor.0, snapshot.cursor.1],
            scrollback,
            truncated,
        })
    }
}
