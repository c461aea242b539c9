//! Contained agents on an SSH host: the same bubblewrap sandbox, built on
//! the host by the terminal's launcher script (the host's `$HOME`, its
//! repository root and its `krad` are known there only). With `network =
//! "all"` the host's network is shared (the bus is the link's reverse forward
//! on the host's 127.0.0.1). With a network of its own (`none`, `allow`) the
//! sandbox gets `--unshare-net` there and a folder of Unix sockets forwarded
//! over the link to this machine's app ([`crate::hosts::Carried`]): the bus's
//! socket, and with an allowlist the terminal's network socket, whose proxy
//! and relays the app serves here ([`super::net`]) — the same `krad internal
//! sandboxed` inside relays to them as on this machine, so the allowlist is
//! enforced, and every attempt logged, by this app.
//!
//! A variant's check runs in a sandbox of the same kind there
//! ([`check_preamble`]): a private home of its own, and the agent's network
//! shared — with an allowlist its carried network socket (its proxy, its
//! relays, its log), with `none` no network at all.

use std::sync::Arc;

use krad_bus::protocol::{ApiError, ErrorCode};

use super::Sandbox;
use crate::config::HookKind;
use crate::hosts::{Carried, Host};
use crate::profile::shell_quote;

/// What a contained terminal on a host is started with.
pub(crate) struct OnHost<'a> {
    /// Its working directory there (writable).
    pub cwd: &'a str,
    /// Its private home there, made anew.
    pub home: &'a str,
    /// Files it must read: its token file, its hook settings.
    pub readable: Vec<String>,
    pub hooks: HookKind,
    /// The `krad` to run there.
    pub krad: &'a str,
    /// Its own network, if it has one.
    pub net: Option<&'a HostNet>,
}

/// `failed` unless bubblewrap is on `host` (asked over the link).
pub(crate) async fn check(host: &Arc<Host>) -> Result<(), ApiError> {
    let (code, _, _) = host.run("command -v bwrap >/dev/null 2>&1", None).await?;
    if code != Some(0) {
        return Err(ApiError::new(
            ErrorCode::Failed,
            format!(
                "this agent runs in a sandbox ([sandbox] or \"sandbox\": true), which needs \
                 bubblewrap on SSH host {:?}: install it there (apt-get install bubblewrap), \
                 or run the agent without one",
                host.name
            ),
        ));
    }
    Ok(())
}

/// A contained terminal's own network on a host: the folder of sockets
/// carried there, and what `krad internal sandboxed` takes inside.
pub(crate) struct HostNet {
    /// `<files dir>/<id>-net` on the host, bound into the sandbox (the
    /// folder, not the sockets: they are made anew when the link is re-opened).
    dir: String,
    /// The bus's port on the host's 127.0.0.1 (`KRAD_ADE_ENDPOINT`), taken
    /// inside and relayed to `<dir>/bus.sock` (`None`: a check's, which has
    /// no token and no bus).
    bus_port: Option<u16>,
    /// With an allowlist: the loopback ports to relay through
    /// `<dir>/net.sock`, besides its proxy.
    relays: Option<Vec<u16>>,
    /// Whether the folder is bound (a terminal's), or the network socket
    /// alone (a check's).
    whole_dir: bool,
}

/// For a config whose sandboxes have a network of their own: the app's
/// sockets for terminal `id` (the bus's; with an allowlist, its network's,
/// opened here for its profile's `hooks` and `env`) carried to `files_dir`
/// on the host. `None` for a shared network. `bus_port` is the bus's port on
/// the host.
pub(crate) async fn network(
    sandbox: &Sandbox,
    host: &Arc<Host>,
    (id, hooks, env): (u64, HookKind, &[(String, String)]),
    files_dir: &str,
    bus_port: u16,
) -> Result<Option<HostNet>, ApiError> {
    let settings = &sandbox.settings;
    if !settings.config.sandbox.own_network() {
        return Ok(None);
    }
    let dir = format!("{files_dir}/{id}-net");
    let bus = sandbox.bus_socket.path(settings).map_err(|e| {
        ApiError::new(
            ErrorCode::Failed,
            format!("cannot open the bus's socket for the sandbox: {e}"),
        )
    })?;
    let mut sockets = vec![Carried {
        there: format!("{dir}/bus.sock"),
        here: bus,
    }];
    let mut relays = None;
    if settings.config.sandbox.allowlist() {
        // The host's environment is not the app's: only the profile's and
        // the Spawn's variables name base URLs.
        let policy = super::allowlist(sandbox, hooks, env, None, false);
        let (socket, ports) = sandbox.nets.open(sandbox, id, policy).map_err(|e| {
            ApiError::new(
                ErrorCode::Failed,
                format!("cannot open the sandbox's network socket: {e}"),
            )
        })?;
        sockets.push(Carried {
            there: format!("{dir}/net.sock"),
            here: socket,
        });
        relays = Some(ports.into_iter().filter(|p| *p != bus_port).collect());
    }
    host.carry_sockets(id, &dir, sockets)
        .await
        .inspect_err(|_| super::forget(sandbox, id))?;
    Ok(Some(HostNet {
        dir,
        bus_port: Some(bus_port),
        relays,
        whole_dir: true,
    }))
}

/// The lines that set `"$@"` to the sandbox of a check of the variant of
/// terminal `agent` (if it ever started), contained on `host`, running in
/// `cwd` there, up to `krad internal sandboxed --` (the check's command
/// follows), and its private home there: the agent's sandbox, but with a
/// home of its own (`<files dir>/<id>-check-<n>-home`, made anew; the
/// caller removes it once the check ran), and with the agent's network
/// shared — with an allowlist its network socket carried there (the same
/// proxy, relays and log), with `none` no network at all (a check has no
/// token: the bus is no use to it). `failed` without bubblewrap there, or
/// when the agent's network is gone (its terminal closed, or the app started
/// again since: its sockets are not carried again): the check is not run
/// outside.
pub(crate) async fn check_preamble(
    sandbox: &Sandbox,
    host: &Arc<Host>,
    (agent, cwd): (Option<u64>, &str),
    n: u64,
) -> Result<(String, String), ApiError> {
    check(host).await?;
    let bus_port = host.connect().await?;
    let files_dir = if host.tmux_terminals().is_some() {
        host.tmux_files_dir()
    } else {
        host.terminal_files_dir()
    };
    let config = &sandbox.settings.config.sandbox;
    let net = if config.own_network() {
        let (dir, relays) = if config.allowlist() {
            let Some((id, net)) = agent.and_then(|id| Some((id, sandbox.nets.get(id)?))) else {
                return Err(ApiError::new(
                    ErrorCode::Failed,
                    format!(
                        "this variant runs contained on SSH host {:?} under [sandbox] network \
                         = \"allow\", and its agent's network, which its checks share, is not \
                         there (its terminal is closed, or the app started again since): the \
                         checks are not run outside its sandbox",
                        host.name
                    ),
                ));
            };
            let ports = net.loopback_ports().into_iter();
            let relays = ports.filter(|p| *p != bus_port).collect();
            (format!("{files_dir}/{id}-net"), Some(relays))
        } else {
            // No network at all: no socket is bound.
            (String::new(), None)
        };
        Some(HostNet {
            dir,
            bus_port: None,
            relays,
            whole_dir: false,
        })
    } else {
        None
    };
    let krad = host.krad();
    let home = match agent {
        Some(id) => format!("{files_dir}/{id}-check-{n}-home"),
        None => format!("{files_dir}/check-{n}-home"),
    };
    let on = OnHost {
        cwd,
        home: &home,
        readable: Vec::new(),
        hooks: HookKind::None,
        krad: &krad,
        net: net.as_ref(),
    };
    let lines = preamble(host, &on);
    Ok((lines, home))
}

/// The launcher's lines that set `"$@"` to bubblewrap's command line, up to
/// `krad internal sandboxed --`; the launcher then runs `exec "$@" ARGV`.
/// The private home is `on.home` (a terminal's `<files dir>/<id>-home`,
/// removed with its other files), made anew with the profile CLI's files
/// copied in.
pub(crate) fn preamble(host: &Host, on: &OnHost<'_>) -> String {
    let q = |s: &str| shell_quote(s);
    let root = &host.config.root;
    let worktrees = crate::environments::worktrees_dir_on(host);
    let files: Vec<String> = super::home_files(on.hooks).iter().map(|f| q(f)).collect();
    let readable: Vec<String> = on.readable.iter().map(|f| q(f)).collect();
    let cwd = q(on.cwd);
    let mut s = String::from("krad_home=$HOME\n");
    s += &format!("krad_box={}\n", q(on.home));
    s += "rm -rf -- \"$krad_box\" && mkdir -p -- \"$krad_box\" && chmod 700 \"$krad_box\" \
          || exit 1\n";
    if !files.is_empty() {
        s += &format!(
            "for f in {}; do if [ -f \"$krad_home/$f\" ]; then mkdir -p -- \
             \"$krad_box/$(dirname -- \"$f\")\" && cp -- \"$krad_home/$f\" \"$krad_box/$f\"; \
             fi; done\n",
            files.join(" ")
        );
    }
    s += "set -- bwrap --ro-bind / / --dev-bind /dev /dev --unshare-pid --proc /proc \
          --tmpfs /tmp --bind \"$krad_box\" \"$krad_home\"\n";
    s += &format!("set -- \"$@\" --ro-bind {} {}\n", q(root), q(root));
    let worktrees = q(&worktrees.display().to_string());
    s += &format!("[ -d {worktrees} ] && set -- \"$@\" --tmpfs {worktrees}\n");
    s += &format!("set -- \"$@\" --bind {cwd} {cwd}\n");
    s += &format!("krad_gitdir=$(sed -n 's/^gitdir: //p' {cwd}/.git 2>/dev/null)\n");
    s += "[ -n \"$krad_gitdir\" ] && [ -d \"$krad_gitdir\" ] && \
          set -- \"$@\" --bind \"$krad_gitdir\" \"$krad_gitdir\"\n";
    if on.net.is_some() {
        s += "set -- \"$@\" --unshare-net\n";
    }
    if !readable.is_empty() {
        s += &format!(
            "for f in {}; do [ -e \"$f\" ] && set -- \"$@\" --ro-bind \"$f\" \"$f\"; done\n",
            readable.join(" ")
        );
    }
    s += &format!("krad_bin=$(command -v {}) || exit 127\n", q(on.krad));
    s += "set -- \"$@\" --ro-bind \"$krad_bin\" \"$krad_bin\"\n";
    if let Some(net) = on.net {
        if net.whole_dir {
            s += &format!("set -- \"$@\" --bind {dir} {dir}\n", dir = q(&net.dir));
        } else if net.relays.is_some() {
            s += &format!(
                "set -- \"$@\" --bind {socket} {socket}\n",
                socket = q(&format!("{}/net.sock", net.dir))
            );
        }
    }
    s += &format!(
        "set -- \"$@\" --die-with-parent --chdir {cwd} -- \"$krad_bin\" internal sandboxed"
    );
    if let Some(net) = on.net {
        if let Some(port) = net.bus_port {
            s += &format!(
                " --listen 127.0.0.1:{port} --to {}",
                q(&format!("{}/bus.sock", net.dir))
            );
        }
        if let Some(relays) = &net.relays {
            s += &format!(" --net {}", q(&format!("{}/net.sock", net.dir)));
            for port in relays {
                s += &format!(" --relay 127.0.0.1:{port}");
            }
        }
    }
    s += " --\n";
    s
}
