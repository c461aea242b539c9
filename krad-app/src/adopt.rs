//! Taking terminals back after a restart. With a restart-safe host (`[terminals]
//! host = "tmux"`) the store keeps every terminal's record in the state file;
//! terminals keep running when the app stops or is killed, and the next app:
//!
//! * takes back each kept terminal the host still has ([`TerminalHost::adopt`]):
//!   its record as it was (state, message, parent, lead…), its screen as the host
//!   shows it, then its output and events as before — a terminal that died while
//!   the app was away comes back `exited`, with its status and last screen;
//! * reports the kept terminals the host no longer has as `exited` (no status:
//!   nobody saw the end);
//! * ends what the host has but no record names (a terminal whose spawn the
//!   previous app did not live to record);
//! * writes each taken-back terminal's token file again with the token of this
//!   run's secret (the program reads the file each time `krad` runs), and names
//!   the bus endpoints the terminals were given when they differ from this run's,
//!   for `krad serve` to listen on as well — so that their `krad` calls reach
//!   this app.
//!
//! Terminals on SSH hosts that live in tmux there ([`crate::remote_tmux`]) are
//! kept whatever the local host, and are their host's tmux host's: the next
//! app makes each again with the same terminal id and record
//! ([`restore_host_terminals`]), waiting for the link; once it is up (on the
//! port the last run had), the host's tmux client takes each back with its
//! screen as tmux has it (the program never restarted; one that ended
//! meanwhile is `exited` with its code, one whose pane is gone `exited` without
//! one), and each terminal's token file there is written again.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use krad_bus::protocol::{AgentRecord, AgentState, StateSource, TerminalRef};
use krad_term::{AdoptSpec, Attachment, ExitStatus, Snapshot, Survivor, Terminal, TerminalEvent};
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::config::{HookKind, PromptDelivery};
use crate::hosts::Host;
use crate::profile::Profile;
use crate::profile::shell_quote;
use crate::records::TerminalEntry;
use crate::spawning::Spawner;
use crate::store::set_state;
use crate::transcripts;
use krad_bus::private_file;

/// Events a terminal may queue before frequent ones are coalesced (as Spawn).
const EVENT_QUEUE: usize = 64;

/// Takes back the terminals of the previous run; see the module's doc.
/// Returns the other bus endpoints the terminals taken back were given.
pub(crate) async fn restore(spawner: &Spawner) -> Vec<SocketAddr> {
    restore_host_terminals(spawner).await;
    if !spawner.host.restart_safe() {
        // The PTY host's terminals ended with the app that died: on record,
        // `exited`, until closed (an acknowledged Spawn names a terminal
        // that is there).
        let kept = kept_here(spawner);
        if !kept.is_empty() {
            tracing::info!(
                lost = kept.len(),
                "the terminals of the previous run were lost with it"
            );
        }
        for entry in kept {
            record_gone(spawner, entry, LOST);
        }
        return Vec::new();
    }
    let host = spawner.host.clone();
    let survivors = match tokio::task::spawn_blocking(move || host.survivors()).await {
        Ok(Ok(survivors)) => survivors,
        Ok(Err(error)) => {
            tracing::warn!(%error, "cannot list the terminals the host kept; they stay on record for the next start");
            return Vec::new();
        }
        Err(error) => {
            tracing::warn!(%error, "cannot list the terminals the host kept");
            return Vec::new();
        }
    };
    let survivors: BTreeMap<u64, Survivor> = survivors.into_iter().map(|s| (s.id, s)).collect();
    // Host terminals' loops go on through the dead app's links until those end:
    // end them first, so that the new links get the ports the programs know.
    crate::leftovers::end_dead_masters().await;
    let mut on_hosts: BTreeMap<String, Vec<TerminalRef>> = BTreeMap::new();
    let mut lead = BTreeSet::new();
    let kept = kept_here(spawner);
    let known: BTreeSet<u64> = kept.iter().map(|entry| entry.record.terminal).collect();
    let mut endpoints = BTreeSet::new();
    let (mut adopted, mut gone) = (0, 0);
    for entry in kept {
        let id = entry.record.terminal;
        if survivors.contains_key(&id) {
            let endpoint = entry.endpoint.clone();
            let me = TerminalRef {
                environment: entry.record.environment.clone(),
                terminal: id,
            };
            let (host, is_lead) = (entry.record.host.clone(), entry.record.lead);
            match adopt(spawner, entry.clone()).await {
                Ok(()) => {
                    adopted += 1;
                    endpoints.extend(endpoint);
                    if let Some(host) = host {
                        on_hosts.entry(host).or_default().push(me);
                        if is_lead {
                            lead.insert(id);
                        }
                    }
                    continue;
                }
                Err(error) => {
                    tracing::warn!(terminal = id, %error, "cannot take the terminal back: ending it");
                    // On record `exited`: so it must be, not left running
                    // where no record, limit or Close reaches it.
                    let host = spawner.host.clone();
                    let _ = tokio::task::spawn_blocking(move || host.discard(id)).await;
                    record_gone(spawner, entry, NOT_TAKEN_BACK);
                    continue;
                }
            }
        }
        if entry.record.pid.is_none() {
            // Kept before its start, and the app died before the host started
            // it: it never ran (see `Store::keep_before_start`).
            spawner.store.forget_kept(id);
            if let Some(path) = &entry.token_file {
                let _ = std::fs::remove_file(path);
            }
            continue;
        }
        gone += 1;
        record_gone(spawner, entry, GONE);
    }
    for id in survivors.keys().filter(|id| !known.contains(id)) {
        tracing::info!(terminal = id, "ending a terminal no record names");
        let host = spawner.host.clone();
        let id = *id;
        let _ = tokio::task::spawn_blocking(move || host.discard(id)).await;
    }
    if adopted + gone > 0 {
        tracing::info!(adopted, gone, "took back the terminals of the previous run");
    }
    for (name, terminals) in on_hosts {
        if let Ok(host) = spawner.hosts.get(&name) {
            let (spawner, lead) = (spawner.clone(), lead.clone());
            host.await_new_tokens(terminals.iter().map(|me| me.terminal));
            tokio::spawn(
                async move { new_tokens_once_up(&spawner, &host, &terminals, &lead).await },
            );
        }
    }
    endpoints
        .iter()
        .filter_map(|endpoint| match endpoint.parse::<SocketAddr>() {
            Ok(address) => Some(address).filter(|a| *a != spawner.settings.endpoint),
            Err(_) => {
                tracing::warn!(%endpoint, "a kept terminal's bus endpoint is not an address; ignored");
                None
            }
        })
        .collect()
}

/// The kept terminals of this machine's host, by id (a host's terminals in
/// tmux there are its own tmux host's).
fn kept_here(spawner: &Spawner) -> Vec<TerminalEntry> {
    let mut kept: Vec<TerminalEntry> = spawner
        .store
        .kept_terminals()
        .into_iter()
        .filter(|entry| entry.record.host.is_none())
        .collect();
    kept.sort_by_key(|entry| entry.record.terminal);
    kept
}

/// Takes back the terminals on SSH hosts that live in tmux there, whatever
/// the local host: each waits in its host's tmux host for the link; see the
/// module's doc.
async fn restore_host_terminals(spawner: &Spawner) {
    let mut kept: Vec<TerminalEntry> = spawner
        .store
        .kept_terminals()
        .into_iter()
        .filter(|entry| entry.record.host.is_some())
        .collect();
    if kept.is_empty() {
        return;
    }
    kept.sort_by_key(|entry| entry.record.terminal);
    // Their old links hold the port the programs were told: free it first.
    crate::leftovers::end_dead_masters().await;
    let mut by_host: BTreeMap<String, Vec<TerminalRef>> = BTreeMap::new();
    let mut lead = BTreeSet::new();
    for entry in kept {
        let id = entry.record.terminal;
        spawner.store.keep_terminal(id);
        let host = entry
            .record
            .host
            .as_deref()
            .and_then(|name| spawner.hosts.get(name).ok());
        let Some(host) = host.filter(|_| entry.record.state != AgentState::Exited) else {
            record_gone(spawner, entry, GONE);
            continue;
        };
        let me = TerminalRef {
            environment: entry.record.environment.clone(),
            terminal: id,
        };
        let is_lead = entry.record.lead;
        match reattach(spawner, &host, entry.clone()).await {
            Ok(()) => {
                if is_lead {
                    lead.insert(id);
                }
                by_host.entry(host.name.clone()).or_default().push(me);
            }
            Err(error) => {
                tracing::warn!(terminal = id, %error, "cannot attach to the terminal on its host again");
                record_gone(spawner, entry, GONE);
            }
        }
    }
    for (name, terminals) in by_host {
        let Ok(host) = spawner.hosts.get(&name) else {
            continue;
        };
        tracing::info!(host = %name, terminals = terminals.len(), "taking back the terminals on the host once its link is up");
        let spawner = spawner.clone();
        let lead = lead.clone();
        host.await_new_tokens(terminals.iter().map(|me| me.terminal));
        tokio::spawn(async move { new_tokens_once_up(&spawner, &host, &terminals, &lead).await });
    }
}

/// Host terminal `entry` again, with its id and its record as it was: its
/// handle now, its pane and screen taken back by the host's tmux client once
/// the link is up (or `exited` then, if the pane is gone).
async fn reattach(spawner: &Spawner, host: &Host, entry: TerminalEntry) -> Result<(), String> {
    let TerminalEntry { record, .. } = entry;
    let id = record.terminal;
    let (events_tx, events) = mpsc::channel(EVENT_QUEUE);
    let spec = AdoptSpec {
        id,
        transcript: Some(transcripts::path(&spawner.settings, id)),
        scrollback_lines: spawner.settings.config.terminals.scrollback,
    };
    let terminal = host
        .tmux_host()
        .adopt_later(spec, events_tx)
        .map_err(|e| e.to_string())?;
    watch_again(spawner, record, terminal, None, events);
    Ok(())
}

/// Records terminal `terminal` again, as `record` says it was, and watches it.
fn watch_again(
    spawner: &Spawner,
    mut record: AgentRecord,
    terminal: Arc<dyn Terminal>,
    token_file: Option<PathBuf>,
    events: mpsc::Receiver<TerminalEvent>,
) {
    let id = record.terminal;
    let profile = profile_of(spawner, &record.profile);
    record.pid = terminal.pid().or(record.pid);
    spawner
        .store
        .insert(record, terminal.clone(), profile.clone(), token_file);
    let contained = crate::sandbox::contained_here(&spawner.sandbox, id);
    spawner.watch(id, terminal, events, None, profile, contained);
}

/// Connects to `host` (again and again, with backoff, until it is up or the
/// app stops), then writes each terminal's token file there again with this
/// run's token. Until then the terminals' calls with the last run's token are
/// refused `unauthorized` but retryable (the caller noted them with
/// [`Host::await_new_tokens`]).
async fn new_tokens_once_up(
    spawner: &Spawner,
    host: &Arc<Host>,
    terminals: &[TerminalRef],
    lead: &BTreeSet<u64>,
) {
    if !host.open_for_waiting_terminals().await {
        return;
    }
    let dir = host.tmux_files_dir();
    for me in terminals {
        let token = spawner
            .secret
            .terminal_token(me, lead.contains(&me.terminal));
        // Only for a terminal whose files are there (it was not closed); the
        // token through stdin, never on a command line.
        let file = shell_quote(&format!("{dir}/{}.token", me.terminal));
        let script = format!("[ -f {file} ] || exit 0; umask 077 && cat > {file}");
        match host.run(&script, Some(token.expose().as_bytes())).await {
            Ok((Some(0), _, _)) => {}
            Ok((_, _, err)) => tracing::warn!(
                terminal = me.terminal,
                "cannot give the terminal its new token: {}",
                String::from_utf8_lossy(&err).trim()
            ),
            Err(error) => tracing::warn!(
                terminal = me.terminal,
                "cannot give the terminal its new token: {}",
                error.message
            ),
        }
        host.has_new_token(me.terminal);
    }
    // The link may have come up before they waited for it.
    host.resume_terminals();
}

/// Takes one terminal back and watches it again.
async fn adopt(spawner: &Spawner, entry: TerminalEntry) -> Result<(), String> {
    let TerminalEntry {
        record, token_file, ..
    } = entry;
    let id = record.terminal;
    if let Some(path) = &token_file {
        let me = TerminalRef {
            environment: record.environment.clone(),
            terminal: id,
        };
        let token = spawner.secret.terminal_token(&me, record.lead);
        // A sandbox binds its token file by itself: it sees the same file
        // written again, not one renamed over it.
        let written = if crate::sandbox::contained_here(&spawner.sandbox, id) {
            private_file::rewrite_in_place(path, token.expose().as_bytes())
        } else {
            private_file::write(path, token.expose().as_bytes())
        };
        written.map_err(|e| format!("cannot write its token file {}: {e}", path.display()))?;
    }
    let (events_tx, events) = mpsc::channel(EVENT_QUEUE);
    let spec = AdoptSpec {
        id,
        transcript: Some(transcripts::path(&spawner.settings, id)),
        scrollback_lines: spawner.settings.config.terminals.scrollback,
    };
    let host = spawner.host.clone();
    let terminal = tokio::task::spawn_blocking(move || host.adopt(spec, events_tx))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    crate::sandbox::taken_back(&spawner.sandbox, &record.environment, id);
    watch_again(spawner, record, terminal, token_file, events);
    tracing::info!(terminal = id, "took the terminal back");
    Ok(())
}

/// Why a kept terminal is `exited`: its host no longer had it.
const GONE: &str = "the terminal was gone when the app started again";
/// Why: it ran on the PTY host of an app that died.
const LOST: &str = "lost when the app stopped";
/// Why: its host had it, and taking it back failed (it was ended).
const NOT_TAKEN_BACK: &str =
    "the app could not take the terminal back when it started again: ended";

/// A kept terminal that does not run on: on record, `exited`, saying `why`.
fn record_gone(spawner: &Spawner, entry: TerminalEntry, why: &str) {
    let TerminalEntry {
        mut record,
        token_file,
        ..
    } = entry;
    if record.state != AgentState::Exited {
        record.exit_code = None;
        record.signal = None;
        set_state(
            &mut record,
            AgentState::Exited,
            StateSource::Process,
            Some(why.to_owned()),
        );
    }
    if let Some(path) = token_file {
        let _ = std::fs::remove_file(path);
    }
    // It never runs again: its sandbox's home (with the CLI's credentials)
    // and sockets go now, not at its Close.
    crate::sandbox::forget(&spawner.sandbox, record.terminal);
    let terminal = Arc::new(Gone {
        id: record.terminal,
        status: ExitStatus {
            code: record.exit_code,
            signal: record.signal,
        },
    });
    let profile = profile_of(spawner, &record.profile);
    spawner.store.insert(record, terminal, profile, None);
}

/// The profile a terminal was started with, or `exec` if the config lost it.
fn profile_of(spawner: &Spawner, name: &str) -> Arc<Profile> {
    spawner
        .profiles
        .get(name)
        .or_else(|| spawner.profiles.get("exec"))
        .or_else(|| spawner.profiles.get(spawner.profiles.default_name()))
        .unwrap_or_else(|| {
            Arc::new(Profile {
                name: name.to_owned(),
                command: Vec::new(),
                prompt: PromptDelivery::None,
                hooks: HookKind::None,
                idle_after: None,
                env: Default::default(),
                expose_token: false,
                interrupt: "\u{3}".to_owned(),
                actions: Vec::new(),
                resume: Vec::new(),
                memory_max_mib: None,
                contained: false,
            })
        })
}

/// A terminal that was gone when the app started again: its record stays, with
/// a blank screen.
struct Gone {
    id: u64,
    status: ExitStatus,
}

impl Terminal for Gone {
    fn id(&self) -> u64 {
        self.id
    }

    fn pid(&self) -> Option<u32> {
        None
    }

    fn write(&self, _bytes: Vec<u8>) -> oneshot::Receiver<std::io::Result<()>> {
        let (reply, receiver) = oneshot::channel();
        let _ = reply.send(Err(gone()));
        receiver
    }

    fn resize(&self, _cols: u16, _rows: u16) -> std::io::Result<()> {
        Err(gone())
    }

    fn snapshot(&self, _scrollback_lines: usize) -> Snapshot {
        Snapshot::blank((80, 24))
    }

    fn bracketed_paste(&self) -> bool {
        false
    }

    fn close(&self, _grace: std::time::Duration) {}

    fn exit_status(&self) -> Option<ExitStatus> {
        Some(self.status)
    }

    fn attach(&self) -> Option<Attachment> {
        // A blank screen, then the end (the output's sender is already gone).
        Some(Attachment {
            screen: b"\x1b[H\x1b[2J".to_vec(),
            size: (80, 24),
            output: broadcast::channel(1).1,
        })
    }
}

fn gone() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the terminal is gone")
}
