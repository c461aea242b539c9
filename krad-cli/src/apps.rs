//! Which app serves which repository, on this machine: the lock that lets one
//! app serve a repository at a time (`lock`), the discovery file each app
//! writes into its repository's `.git/krad/` (`discovery`), the per-user
//! directory of running apps (`registry`), and how a path leads to its
//! repository's identity, its canonical git common directory (`repository`).
//!
//! `krad serve` holds the lock from before it opens the store until it exits;
//! readers (the CLI finding its app, `krad apps`) test the lock to tell a
//! live app from a dead one's leftovers, and clean those.
//!
//! Plain files and kernel locks only: this module never imports the bus
//! client, the commands or `connect` (which uses it).

pub(crate) mod discovery;
pub(crate) mod lock;
pub(crate) mod registry;
pub(crate) mod repository;
