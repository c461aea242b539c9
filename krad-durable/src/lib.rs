//! The durable facet: the app seen as a *durable agent* by Collie, the phone's
//! bridge (see `docs/durable.md` and the contract `durable-facet-v1.md`).
//!
//! * [`wire`] — what a call is once parsed ([`wire::WireCall`], from a
//!   [`wire::Peer`]), the errors the wire knows, and the [`Facet`] the app
//!   implements.
//! * [`limits`] — the seed's limit table and the cutting and cleaning of text.
//! * [`request_ids`] — at-most-once POSTs: the request-id log of one epoch (one
//!   per transport).
//! * `http` — the routes: hello and the version rules, `ready`, ETags, bodies.
//! * [`socket_path`] — the seed's rules for a socket path, which [`socket`]
//!   and [`doctor`] both check.
//! * [`socket`] — the private Unix socket (0600 in 0700, stale files, callers
//!   that are the app's own descendants refused).
//! * [`tls`] — the TLS listener: certificate (configured or self-signed) and
//!   the bearer token.
//! * [`doctor`] — the walk of a socket path Collie does before connecting.
//! * [`server`] — the accept loops of both transports.

pub mod doctor;
mod http;
pub mod limits;
pub mod request_ids;
pub mod server;
pub mod socket;
pub mod socket_path;
pub mod tls;
pub mod wire;

pub use server::DurableServer;
pub use wire::{Facet, Peer, Transport, WireCall, WireError};
