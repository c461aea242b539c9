//! krad's page: the app in a browser.
//!
//! A small HTTP server on 127.0.0.1 that is itself a **client of the bus**: it
//! holds the client token (from the app that starts it) and serves one page
//! whose views are built on the bus's own requests and streams, relayed over
//! one WebSocket per page (`relay`). Login is a one-time URL exchanged for an
//! HttpOnly, SameSite=Strict cookie; the Host and Origin headers are checked
//! (`auth`); no CORS headers are ever sent. See docs/ui.md.

mod assets;
mod auth;
mod bus;
mod http;
mod relay;
mod reviews;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use krad_bus::protocol::Token;
use tokio::net::TcpListener;
use tokio::sync::watch;

pub use auth::LOGIN_TTL;

/// The page's vendored npm parts as pinned: `vendor/MANIFEST` (file, package,
/// version, sha256 a line), which build.rs checked the embedded files against.
pub const VENDOR_MANIFEST: &str = include_str!("../vendor/MANIFEST");

/// The size of the page's file at `path` (`/assets/xterm.js`), if embedded.
pub fn embedded_size(path: &str) -> Option<usize> {
    assets::find(path).map(|(_, body)| body.len())
}

/// What the page's server needs to know.
#[derive(Debug, Clone)]
pub struct WebSettings {
    /// The bus, `127.0.0.1:<port>`.
    pub bus: SocketAddr,
    /// The client token the page's calls carry (never sent to the browser).
    pub client_token: Token,
    /// Where review comments are kept (`<git dir>/krad/ui/`).
    pub state_dir: PathBuf,
}

/// The page's server, running.
#[derive(Debug)]
pub struct Ui {
    address: SocketAddr,
    stop: watch::Sender<bool>,
}

impl Ui {
    /// Where the page is served.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// `http://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("http://{}/", self.address)
    }

    /// Stops accepting; open pages are closed.
    pub fn stop(&self) {
        let _ = self.stop.send(true);
    }
}

/// Binds 127.0.0.1:`port` (0: the system picks) and serves the page.
pub async fn start(port: u16, settings: WebSettings) -> std::io::Result<Ui> {
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    let address = listener.local_addr()?;
    let (stop, stopped) = watch::channel(false);
    let state = Arc::new(http::State::new(address, settings));
    tokio::spawn(http::serve(listener, state, stopped));
    Ok(Ui { address, stop })
}
