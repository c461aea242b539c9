//! Contained agents on an SSH host: the same bubblewrap sandbox, built on
//! the host by the terminal's launcher script (the host's `$HOME`, its
//! repository root and its `krad` are known there only). The host's network
//! is shared — the bus is its reverse forward on the host's 127.0.0.1 — so a
//! config whose sandboxes have a network of their own (`none`, `allow`) is
//! refused for a host rather than pretended: those are enforced by this
//! machine's app, on this machine.

use std::sync::Arc;

use krad_bus::protocol::{ApiError, ErrorCode};

use crate::Core;
use crate::config::HookKind;
use crate::hosts::Host;
use crate::profile::shell_quote;

/// What a contained terminal on a host is started with.
pub(crate) struct OnHost<'a> {
    pub id: u64,
    /// Its working directory there (writable).
    pub cwd: &'a str,
    /// The app's folder for its terminals' files there (under `$HOME`).
    pub files_dir: &'a str,
    /// Files it must read: its token file, its hook settings.
    pub readable: Vec<String>,
    pub hooks: HookKind,
    /// The `krad` to run there.
    pub krad: &'a str,
}

/// `failed` unless a sandbox can be made on `host` as the config asks: a
/// shared network, and bubblewrap there (asked over the link).
pub(crate) async fn check(core: &Core, host: &Arc<Host>) -> Result<(), ApiError> {
    let sandbox = &core.settings.config.sandbox;
    if sandbox.own_network() {
        return Err(ApiError::new(
            ErrorCode::Failed,
            format!(
                "on SSH host {:?} a sandbox shares the host's network: [sandbox] network = \
                 {:?} is enforced for agents on this machine only; run this agent here, or \
                 without a sandbox",
                host.name,
                sandbox.network.as_deref().unwrap_or_default()
            ),
        ));
    }
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

/// The launcher's lines that set `"$@"` to bubblewrap's command line, up to
/// `krad internal sandboxed --`; the launcher then runs `exec "$@" ARGV`.
/// The private home is `<files dir>/<id>-home` (removed with the terminal's
/// other files), made anew with the profile CLI's files copied in.
pub(crate) fn preamble(host: &Host, on: &OnHost<'_>) -> String {
    let q = |s: &str| shell_quote(s);
    let root = &host.config.root;
    let worktrees = crate::environments::worktrees_dir_on(host);
    let files: Vec<String> = super::home_files(on.hooks).iter().map(|f| q(f)).collect();
    let readable: Vec<String> = on.readable.iter().map(|f| q(f)).collect();
    let cwd = q(on.cwd);
    let mut s = String::from("krad_home=$HOME\n");
    s += &format!(
        "krad_box={}\n",
        q(&format!("{}/{}-home", on.files_dir, on.id))
    );
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
    if !readable.is_empty() {
        s += &format!(
            "for f in {}; do [ -e \"$f\" ] && set -- \"$@\" --ro-bind \"$f\" \"$f\"; done\n",
            readable.join(" ")
        );
    }
    s += &format!("krad_bin=$(command -v {}) || exit 127\n", q(on.krad));
    s += "set -- \"$@\" --ro-bind \"$krad_bin\" \"$krad_bin\"\n";
    s += &format!(
        "set -- \"$@\" --die-with-parent --chdir {cwd} -- \"$krad_bin\" internal sandboxed --\n"
    );
    s
}
