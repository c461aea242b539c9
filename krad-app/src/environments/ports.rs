//! Ports: with `[environments] ports = N` (this machine) or `[hosts.NAME]
//! ports = N` (an SSH host), each new worktree environment gets its own block
//! of N TCP ports, handed out when it is created and released when it is
//! closed.
//!
//! * Each port is checked free by binding it on 127.0.0.1 on the machine that
//!   runs the environment, when it is handed out.
//! * The block is kept in the store (`Kind::PortBlock`, written in the same
//!   transaction as the environment's record), so it survives restarts.
//! * Two apps never hand out the same port of one machine: the machine's
//!   registry ([`crate::port_registry`]) is asked for it — here directly (the
//!   app's pid holds it), on a host through `krad internal ports` run over the
//!   host's link (this app's id, [`app_id`], holds it until released).
//! * Terminals, the setup and teardown commands and `Code` runs in the
//!   environment see `KRAD_PORT` (the first), `KRAD_PORTS` (all,
//!   space-separated) and `PORT` unless the profile or the Spawn sets it
//!   ([`vars`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use krad_bus::protocol::{ApiError, ErrorCode, PortInUse};
use krad_store::{Kind, StoreError, Tx};
use serde::{Deserialize, Serialize};
use sha2::Digest;

use super::Environments;
use crate::hosts::Host;
use crate::port_registry::{self, Holder, PortsAnswer, Registry};
use crate::profile::shell_quote;
use crate::records::EnvironmentRecord;

/// The first port handed out unless `[environments] first_port` says otherwise
/// (below Linux's ephemeral range, 32768–60999).
pub(crate) const FIRST_PORT: u16 = 20000;

/// How often Environments asks a host which ports of a block are in use (off
/// the request path: it shows what the host said last).
const HOST_IN_USE_REFRESH: Duration = Duration::from_secs(2);

/// An environment's block as the store keeps it: a plain list for this
/// machine (as before hosts had ports), with its host's name otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
enum Stored {
    Here(Vec<u16>),
    OnHost { host: String, ports: Vec<u16> },
}

/// A block of ports and the machine whose ports they are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Block {
    /// The SSH host (None: this machine).
    pub host: Option<String>,
    /// The ports, first the one `KRAD_PORT` names.
    pub ports: Vec<u16>,
}

impl From<Stored> for Block {
    fn from(stored: Stored) -> Block {
        match stored {
            Stored::Here(ports) => Block { host: None, ports },
            Stored::OnHost { host, ports } => Block {
                host: Some(host),
                ports,
            },
        }
    }
}

impl Block {
    fn stored(&self) -> Stored {
        match &self.host {
            None => Stored::Here(self.ports.clone()),
            Some(host) => Stored::OnHost {
                host: host.clone(),
                ports: self.ports.clone(),
            },
        }
    }
}

/// How many ports a new environment gets (0: none), from the config.
fn block_size(envs: &Environments, host: Option<&str>) -> u16 {
    let config = &envs.settings.config;
    match host {
        Some(host) => config.hosts.get(host).and_then(|h| h.ports),
        None => config.environments.ports,
    }
    .unwrap_or(0)
}

fn first_port(envs: &Environments) -> u16 {
    envs.settings
        .config
        .environments
        .first_port
        .unwrap_or(FIRST_PORT)
}

/// This app's id in a host's registry: the same across its restarts (this
/// machine's name and the app's state directory, hashed), different for two
/// apps of one machine.
pub(crate) fn app_id(envs: &Environments) -> String {
    let machine = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let mut hash = sha2::Sha256::new();
    hash.update(machine.trim().as_bytes());
    hash.update([0]);
    hash.update(envs.settings.state_dir.as_os_str().as_encoded_bytes());
    let digest = hex::encode(hash.finalize());
    format!("app-{}", &digest[..16])
}

fn failed(e: impl std::fmt::Display) -> ApiError {
    ApiError::new(ErrorCode::Failed, format!("cannot hand out ports: {e}"))
}

/// Hands out a block for a new environment on `host` (this machine when None;
/// empty without `ports` in the config): each port free in the machine's
/// registry and by a bind test there. Call with the environments lock held.
pub(crate) async fn allocate(
    envs: &Environments,
    host: Option<&Arc<Host>>,
) -> Result<Block, ApiError> {
    let size = block_size(envs, host.map(|h| h.name.as_str()));
    if size == 0 {
        return Ok(Block::default());
    }
    let first = first_port(envs);
    let Some(host) = host else {
        let registry = Registry::open().map_err(failed)?;
        let ports = registry.claim(&Holder::me(), first, size).map_err(failed)?;
        return Ok(Block { host: None, ports });
    };
    // The ports this app holds there (the registry gives back any other it
    // still held: a release that could not reach the host).
    let _calls = envs.host_ports.calls.lock().await;
    let keep: Vec<u16> = blocks(envs)
        .into_values()
        .filter(|b| b.host.as_deref() == Some(host.name.as_str()))
        .flat_map(|b| b.ports)
        .collect();
    let mut args = vec![
        "claim".to_owned(),
        "--first".to_owned(),
        first.to_string(),
        "--count".to_owned(),
        size.to_string(),
    ];
    for port in keep {
        args.extend(["--keep".to_owned(), port.to_string()]);
    }
    let answer = on_host(envs, host, &args).await?;
    Ok(Block {
        host: Some(host.name.clone()),
        ports: answer.ports,
    })
}

/// Runs `krad internal ports <args> --owner <app id>` on `host`: its answer.
async fn on_host(
    envs: &Environments,
    host: &Arc<Host>,
    args: &[String],
) -> Result<PortsAnswer, ApiError> {
    let mut script = format!(
        "exec {} internal ports --owner {}",
        shell_quote(&host.krad()),
        app_id(envs)
    );
    for arg in args {
        script.push(' ');
        script.push_str(&shell_quote(arg));
    }
    let (code, out, err) = host.run(&script, None).await?;
    let said = || {
        let err = String::from_utf8_lossy(&err);
        let last = err.lines().rev().find(|l| !l.trim().is_empty());
        last.unwrap_or("no output").trim().to_owned()
    };
    if code != Some(0) {
        return Err(ApiError::new(
            ErrorCode::Failed,
            format!(
                "the port registry on host {:?} failed ({} internal ports, exit {}): {}; \
                 krad there must be as new as this one",
                host.name,
                host.krad(),
                code.map_or("by a signal".to_owned(), |c| c.to_string()),
                said()
            ),
        ));
    }
    serde_json::from_slice(&out).map_err(|e| {
        ApiError::new(
            ErrorCode::Failed,
            format!(
                "the port registry on host {:?} answered what is not JSON ({e}); \
                 krad there must be as new as this one",
                host.name
            ),
        )
    })
}

/// Writes an environment's block in a transaction (nothing for an empty one).
pub(crate) fn put(tx: &Tx<'_>, name: &str, block: &Block) -> Result<(), StoreError> {
    if block.ports.is_empty() {
        return Ok(());
    }
    tx.put(Kind::PortBlock, name, &block.stored())
}

/// Every stored block, by environment.
fn blocks(envs: &Environments) -> BTreeMap<String, Block> {
    match envs.store.db().read(|tx| tx.all::<Stored>(Kind::PortBlock)) {
        Ok(all) => all.into_iter().map(|(k, v)| (k, v.into())).collect(),
        Err(e) => {
            tracing::warn!("cannot read the port blocks: {e}");
            BTreeMap::new()
        }
    }
}

fn stored_block(envs: &Environments, name: &str) -> Option<Block> {
    envs.store
        .db()
        .read(|tx| tx.get::<Stored>(Kind::PortBlock, name))
        .ok()
        .flatten()
        .map(Block::from)
}

/// An environment's ports (empty without a block).
pub(super) fn block(envs: &Environments, name: &str) -> Vec<u16> {
    envs.port_blocks.ports(name, || {
        stored_block(envs, name)
            .map(|b| b.ports)
            .unwrap_or_default()
    })
}

/// The environments' ports as last read from the store, so that a Spawn (and
/// every other reader) does not read the store for them each time: kept as
/// they are read, forgotten whenever a block is written or removed.
#[derive(Default)]
pub(crate) struct KnownBlocks(Mutex<Known>);

#[derive(Default)]
struct Known {
    /// Bumped by every write: a read that began before one is not kept.
    writes: u64,
    ports: HashMap<String, Arc<[u16]>>,
}

impl KnownBlocks {
    fn lock(&self) -> std::sync::MutexGuard<'_, Known> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `environment`'s ports, read by `read` unless known.
    fn ports(&self, environment: &str, read: impl FnOnce() -> Vec<u16>) -> Vec<u16> {
        let writes = {
            let known = self.lock();
            if let Some(ports) = known.ports.get(environment) {
                return ports.to_vec();
            }
            known.writes
        };
        let ports = read();
        let mut known = self.lock();
        if known.writes == writes {
            known
                .ports
                .insert(environment.to_owned(), Arc::from(ports.as_slice()));
        }
        ports
    }

    /// Forgets `environment`'s ports: call once its block was written or
    /// removed (committed).
    pub(crate) fn forget(&self, environment: &str) {
        let mut known = self.lock();
        known.writes += 1;
        known.ports.remove(environment);
    }
}

/// Gives a block back to its machine's registry without touching the store (a
/// creation that failed before its record was written).
pub(crate) async fn give_back(envs: &Environments, block: &Block) {
    if block.ports.is_empty() {
        return;
    }
    match &block.host {
        None => {
            if let Ok(registry) = Registry::open() {
                for port in &block.ports {
                    registry.release(*port, &Holder::me());
                }
            }
        }
        Some(name) => {
            let _calls = envs.host_ports.calls.lock().await;
            let released = async {
                let host = envs.hosts.get(name)?;
                let mut args = vec!["release".to_owned()];
                args.extend(block.ports.iter().map(u16::to_string));
                on_host(envs, &host, &args).await
            };
            // Not given back now: the next hand-out or restart there does.
            if let Err(e) = released.await {
                tracing::warn!(host = %name, ports = ?block.ports, "ports stay held on the host until the app's next hand-out there: {}", e.message);
            }
        }
    }
}

/// Releases a closed environment's block: forgotten by the store, given back to
/// its machine's registry. Call once the environment is removed.
pub(crate) async fn release(envs: &Environments, name: &str) {
    let Some(block) = stored_block(envs, name) else {
        return;
    };
    let removed = envs
        .store
        .db()
        .write(|tx| tx.remove(Kind::PortBlock, name).map(|_| ()));
    envs.port_blocks.forget(name);
    if let Err(e) = removed {
        tracing::warn!(environment = name, "cannot forget the port block: {e}");
        return;
    }
    envs.host_ports.seen.forget(name);
    give_back(envs, &block).await;
}

/// After a restart: takes the stored blocks back in their registries, and
/// releases those of environments that no longer exist. A host's are taken
/// back in the background, once its link is up.
pub(crate) fn restore(envs: &Arc<Environments>) {
    let mut hosts = BTreeSet::new();
    let mut kept_here = Vec::new();
    for (name, block) in blocks(envs) {
        let live = envs.store.environment(&name).is_some();
        if !live {
            // Its lock files here are stale (the pid of a gone app); a host's
            // are given back by the take-back below.
            let _ = envs
                .store
                .db()
                .write(|tx| tx.remove(Kind::PortBlock, &name).map(|_| ()));
            envs.port_blocks.forget(&name);
        }
        match block.host {
            Some(host) => {
                hosts.insert(host);
            }
            None if live => kept_here.push((name, block.ports)),
            None => {}
        }
    }
    if !kept_here.is_empty() {
        match Registry::open() {
            Ok(registry) => retake_here(&registry, kept_here),
            Err(e) => tracing::warn!("cannot open the port registry: {e}"),
        }
    }
    for host in hosts {
        let envs = envs.clone();
        tokio::spawn(async move { retake_on_host(&envs, &host).await });
    }
}

fn retake_here(registry: &Registry, blocks: Vec<(String, Vec<u16>)>) {
    for (name, ports) in blocks {
        for port in ports {
            if !registry.retake(port, &Holder::me()) {
                tracing::warn!(
                    environment = name,
                    port,
                    "port of the environment is held by another app"
                );
            }
        }
    }
}

/// Takes this app's blocks on `host` back in its registry (a host that
/// rebooted lost them with its runtime dir) and gives back any other port it
/// holds there (of environments closed while the host was down).
async fn retake_on_host(envs: &Environments, host_name: &str) {
    let Ok(host) = envs.hosts.get(host_name) else {
        return;
    };
    // Under the lock a hand-out holds until its block is stored, and in turn
    // with releases: the blocks read are those of the registry now.
    let _serial = envs.lock.lock().await;
    let _calls = envs.host_ports.calls.lock().await;
    let mine: Vec<u16> = blocks(envs)
        .into_values()
        .filter(|b| b.host.as_deref() == Some(host_name))
        .flat_map(|b| b.ports)
        .collect();
    let mut args = vec!["retake".to_owned()];
    args.extend(mine.iter().map(u16::to_string));
    match on_host(envs, &host, &args).await {
        Ok(answer) if !answer.held_by_others.is_empty() => tracing::warn!(
            host = host_name,
            ports = ?answer.held_by_others,
            "ports of environments on the host are held by another app there"
        ),
        Ok(_) => {}
        Err(e) => tracing::warn!(
            host = host_name,
            "cannot take the ports back on the host: {}",
            e.message
        ),
    }
}

/// The variables an environment's programs see: `KRAD_PORT`, `KRAD_PORTS` and
/// `PORT`, without `PORT` when `user_set_port` (nothing without a block).
pub(crate) fn vars(block: &[u16], user_set_port: bool) -> Vec<(&'static str, String)> {
    let Some(first) = block.first() else {
        return Vec::new();
    };
    let all: Vec<String> = block.iter().map(u16::to_string).collect();
    let mut vars = vec![
        ("KRAD_PORT", first.to_string()),
        ("KRAD_PORTS", all.join(" ")),
    ];
    if !user_set_port {
        vars.push(("PORT", first.to_string()));
    }
    vars
}

/// Adds [`vars`] to `env`, keeping a `PORT` already there.
pub(crate) fn add_env(env: &mut Vec<(String, String)>, block: &[u16]) {
    let has_port = env.iter().any(|(k, _)| k == "PORT");
    for (k, v) in vars(block, has_port) {
        env.push((k.to_owned(), v));
    }
}

/// The variables as a shell command for a script on a host, to put before the
/// program: `export KRAD_PORT=… KRAD_PORTS='…' PORT=… && ` (nothing without a
/// block).
pub(crate) fn shell_exports(block: &[u16]) -> String {
    let vars = vars(block, false);
    if vars.is_empty() {
        return String::new();
    }
    let words: Vec<String> = vars
        .into_iter()
        .map(|(k, v)| format!("{k}={}", shell_quote(&v)))
        .collect();
    format!("export {} && ", words.join(" "))
}

/// The ports of an environment's block some program outside it listens on:
/// seen here at once; on a host, what the host said last (asked again in the
/// background at most every [`HOST_IN_USE_REFRESH`]).
pub(crate) fn in_use_of(
    envs: &Environments,
    record: &EnvironmentRecord,
    ports: &[u16],
) -> Vec<PortInUse> {
    if ports.is_empty() {
        return Vec::new();
    }
    let Some(host_name) = &record.host else {
        return not_the_app(port_registry::in_use(ports, &record.path));
    };
    let (seen, ask) = envs.host_ports.seen.last(&record.name);
    if ask
        && let Ok(host) = envs.hosts.get(host_name)
        && let Ok(runtime) = tokio::runtime::Handle::try_current()
    {
        let cache = envs.host_ports.seen.clone();
        let name = record.name.clone();
        let script = in_use_script(&host, &record.path, ports);
        runtime.spawn(async move {
            let answer = match host.run(&script, None).await {
                Ok((Some(0), out, _)) => serde_json::from_slice::<PortsAnswer>(&out).ok(),
                _ => None,
            };
            cache.answered(&name, answer.map(|a| a.in_use));
        });
    }
    seen
}

/// `in_use` without the ports this app listens on itself: those it relays
/// into the environment's sandboxes ([`crate::sandbox::inbound`]) are the
/// environment's own.
pub(crate) fn not_the_app(mut in_use: Vec<PortInUse>) -> Vec<PortInUse> {
    in_use.retain(|p| p.pid != Some(std::process::id()));
    in_use
}

fn in_use_script(host: &Host, dir: &Path, ports: &[u16]) -> String {
    let mut script = format!(
        "exec {} internal ports in-use --dir {}",
        shell_quote(&host.krad()),
        shell_quote(&dir.display().to_string())
    );
    for port in ports {
        script.push_str(&format!(" {port}"));
    }
    script
}

/// The app's side of the hosts' port registries.
#[derive(Default)]
pub(crate) struct HostPorts {
    /// Taken around each call that hands out, takes back or gives back ports
    /// on a host, with the store read inside it: a take-back at start never
    /// runs on a list read before a release that it would undo.
    calls: tokio::sync::Mutex<()>,
    /// What hosts said last of their environments' ports in use.
    seen: HostPortsSeen,
}

/// What hosts said last of their environments' ports in use.
#[derive(Clone, Default)]
pub(crate) struct HostPortsSeen(Arc<Mutex<HashMap<String, Seen>>>);

struct Seen {
    /// When the host was last asked (None: never).
    asked: Option<Instant>,
    asking: bool,
    in_use: Vec<PortInUse>,
}

impl HostPortsSeen {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Seen>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What was seen last of `environment`, and whether to ask again now (it
    /// is then marked as being asked).
    fn last(&self, environment: &str) -> (Vec<PortInUse>, bool) {
        let mut all = self.lock();
        let seen = all.entry(environment.to_owned()).or_insert_with(|| Seen {
            asked: None,
            asking: false,
            in_use: Vec::new(),
        });
        let ask = !seen.asking
            && seen
                .asked
                .is_none_or(|asked| asked.elapsed() >= HOST_IN_USE_REFRESH);
        if ask {
            seen.asking = true;
            seen.asked = Some(Instant::now());
        }
        (seen.in_use.clone(), ask)
    }

    /// The host's answer (None: it could not tell; the last one stays).
    fn answered(&self, environment: &str, in_use: Option<Vec<PortInUse>>) {
        if let Some(seen) = self.lock().get_mut(environment) {
            seen.asking = false;
            if let Some(in_use) = in_use {
                seen.in_use = in_use;
            }
        }
    }

    fn forget(&self, environment: &str) {
        self.lock().remove(environment);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_keeps_a_port_the_user_set() {
        let mut env = vec![("PORT".to_owned(), "1".to_owned())];
        add_env(&mut env, &[20000, 20001]);
        assert_eq!(
            env,
            vec![
                ("PORT".to_owned(), "1".to_owned()),
                ("KRAD_PORT".to_owned(), "20000".to_owned()),
                ("KRAD_PORTS".to_owned(), "20000 20001".to_owned()),
            ]
        );
        let mut env = Vec::new();
        add_env(&mut env, &[]);
        assert!(env.is_empty());
        assert_eq!(
            shell_exports(&[20000, 20001]),
            "export KRAD_PORT=20000 KRAD_PORTS='20000 20001' PORT=20000 && "
        );
        assert_eq!(shell_exports(&[]), "");
    }

    /// Read once, then known until forgotten; a read that a write overtook is
    /// answered but not kept.
    #[test]
    fn known_blocks_are_read_once_and_forgotten_on_every_write() {
        let known = KnownBlocks::default();
        let reads = std::cell::Cell::new(0);
        let read = |ports: Vec<u16>| {
            reads.set(reads.get() + 1);
            ports
        };
        assert_eq!(known.ports("w", || read(vec![20000])), [20000]);
        assert_eq!(known.ports("w", || read(vec![1])), [20000]);
        assert_eq!(known.ports("main", || read(Vec::new())), Vec::<u16>::new());
        assert_eq!(known.ports("main", || read(vec![1])), Vec::<u16>::new());
        assert_eq!(reads.get(), 2);
        known.forget("w");
        assert_eq!(known.ports("w", || read(vec![20001])), [20001]);
        assert_eq!(reads.get(), 3);
        // A write lands while "v" is being read: what was read is not kept.
        let raced = known.ports("v", || {
            known.forget("v");
            read(vec![20002])
        });
        assert_eq!(raced, [20002]);
        assert_eq!(known.ports("v", || read(vec![20003])), [20003]);
        assert_eq!(reads.get(), 5);
    }

    #[test]
    fn blocks_of_this_machine_are_stored_as_before_and_a_host_s_with_its_name() {
        let here: Stored = serde_json::from_str("[20000,20001]").unwrap();
        assert_eq!(Block::from(here.clone()).host, None);
        assert_eq!(serde_json::to_string(&here).unwrap(), "[20000,20001]");
        let far = Block {
            host: Some("far".into()),
            ports: vec![20002],
        };
        let text = serde_json::to_string(&far.stored()).unwrap();
        assert_eq!(text, r#"{"host":"far","ports":[20002]}"#);
        let back: Stored = serde_json::from_str(&text).unwrap();
        assert_eq!(Block::from(back), far);
    }
}
