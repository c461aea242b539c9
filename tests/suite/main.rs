//! The integration suite: the real `krad` binary over real sockets, section by
//! section of the agents API contract (`docs/protocol.md`).

// Tests state what they expect with unwrap and assert; a failure is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod support;
mod torture;

mod agents;
mod api_json;
mod apps;
mod asks;
mod attach;
mod chromium;
mod cli;
mod cli_agents;
mod code;
mod collie;
mod cost;
mod crash;
mod crash_budget;
mod crash_discovery;
mod crash_page;
mod crash_points;
mod crash_queue;
mod crash_sandbox;
mod doctor;
mod durable;
mod durable_asks;
mod durable_doctor;
mod envelope;
mod environments;
mod extensions;
mod gc;
mod hardening;
mod host_down;
mod in_process;
mod isolation;
mod limits;
mod load;
mod queue;
mod remote_tmux;
mod rename;
mod request_path;
mod rights;
mod sandbox;
mod sandbox_net;
mod scored;
mod secrets;
mod ssh;
mod ssh_environments;
mod tmux;
mod transport;
mod truth;
mod tui;
mod ui;
mod ui_browser;
mod usage;
mod waits;

mod real;
