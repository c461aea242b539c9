//! The krad agents bus.
//!
//! * [`protocol`] — the wire: envelope, callers, responses, error codes, limits.
//! * [`request`] — the request set, one module per request, with the table of
//!   rights and deadlines.
//! * [`token`] — the app's secret and the tokens derived from it.
//! * [`api_json`] — the discovery file clients outside the terminals read.
//! * [`server`] — the loopback server and the [`server::App`] it serves.
//! * [`client`] — the one client of the bus, blocking and async, typed: the
//!   CLI, the home screen, the page's server and the benchmarks call through it.

pub mod api_json;
pub mod client;
pub mod private_file;
pub mod protocol;
pub mod request;
pub mod server;
pub mod token;
