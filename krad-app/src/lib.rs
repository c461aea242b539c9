//! The embedded app that `krad serve` runs behind the bus: it hosts terminals
//! and tells the truth about the agents in them.
//!
//! * [`config`] and [`profile`] — the config file and the profiles it defines.
//! * [`store`] — the one state store (records, revs, the change index), with
//!   [`records`] for what survives a restart.
//! * [`watcher`] — one task per terminal turning its events into agent states.
//! * `app` — the composition root: `EmbeddedApp` starts, restores, serves
//!   and shuts down; its `Core` builds every domain's handle once. This file
//!   declares and re-exports, and defines nothing.
//! * `requests` — how the bus reaches the app: one adapter per request (check
//!   the caller's scope, call the domain, answer), and the `App` impl.
//! * `spawning` — starting an agent on a new terminal (Spawn, each variant).
//! * `environments` — worktrees, their setup, archives, variant groups
//!   (running and picking them), garbage collection.
//! * `attacher` — one client attached to a terminal; `subscription` — the
//!   SubscribeAgents stream.
//! * `adopt` — taking back, after a restart, the terminals a restart-safe
//!   host (tmux) kept running.

mod adopt;
mod announced;
mod app;
mod asking;
mod asks;
mod attacher;
mod budget;
pub mod cgroup;
mod checks;
mod closing;
pub mod config;
mod crash_point;
mod environments;
mod extensions;
mod feed;
mod foreground;
mod git;
mod hosts;
mod input;
mod intents;
mod leftovers;
mod limits;
mod notify;
mod phone;
pub mod port_registry;
mod prices;
mod profile;
mod program;
mod queue;
mod records;
mod recovery;
mod remote_tmux;
mod reports;
mod requests;
mod run_variants;
pub mod sampling;
pub mod sandbox;
mod screen_questions;
mod sending;
mod spawning;
mod spend;
mod state_db;
mod store;
mod subscription;
mod transcripts;
pub mod usage;
mod waiting;
mod watcher;

pub use app::{EmbeddedApp, StartError};
pub use config::Settings;
pub use phone::{Durable, Readiness, SOCKET_ENV as DURABLE_SOCKET_ENV, TlsListening};
pub use subscription::AgentStream;
