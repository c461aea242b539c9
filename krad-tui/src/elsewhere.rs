//! The agents asking in the other apps on this machine, for the header: a
//! thread counts them every [`EVERY`] with the CLI's [`AskingElsewhere`] and
//! tells the UI when the count, or the app the screen is on (its
//! generation: a switch away and back is a new one), changes. Must
//! never import the state or the terminal.

use std::sync::mpsc::Sender;
use std::time::Duration;

use crate::AskingElsewhere;
use crate::event::Event;

/// How often the other apps are counted.
pub(crate) const EVERY: Duration = Duration::from_secs(3);

/// Starts the counting thread. `here` says which app the screen is on: its
/// generation and its bus (none while it is not reached). The thread ends
/// with the UI's channel.
pub(crate) fn start(
    count: AskingElsewhere,
    here: impl Fn() -> (u64, Option<String>) + Send + 'static,
    events: Sender<Event>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("krad-tui-elsewhere".into())
        .spawn(move || {
            let mut said: Option<(u64, usize)> = None;
            loop {
                if let (app, Some(endpoint)) = here() {
                    let now = (app, count(&endpoint));
                    if said != Some(now) {
                        let (app, asking) = now;
                        if events.send(Event::AskingElsewhere { app, asking }).is_err() {
                            return;
                        }
                        said = Some(now);
                    }
                }
                std::thread::sleep(EVERY);
            }
        })?;
    Ok(())
}
