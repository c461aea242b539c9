//! Launching: what a new terminal's program is started with — argv, working
//! directory, environment and token file — on this machine, or on an SSH host
//! through a launcher script that keeps every value off command lines (in tmux
//! there when the host has it: [`crate::remote_tmux`]); and the terminals
//! whose programs are starting ([`Launching`]): their tokens are already out
//! (the program may call the bus in its first instant — Claude Code's
//! SessionStart hook does) while the app has not yet recorded them, so a
//! request with such a token waits for the record instead of being refused as
//! `unauthorized` ([`Launching::started`], the app's `terminal_starting`).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use krad_bus::protocol::{ApiError, ErrorCode, TerminalRef, Token};
use krad_bus::server::StartSettled;
use tokio::sync::watch;

use super::Spawner;
use super::invalid;
use crate::config::HookKind;
use crate::hosts::Host;
use crate::profile::{self, Profile, shell_quote};
use crate::remote_tmux;
use krad_bus::private_file;

/// What a terminal is started with, wherever it runs.
pub(super) struct Launch<'a> {
    pub me: &'a TerminalRef,
    pub token: &'a Token,
    pub command: Vec<String>,
    pub prompt: Option<&'a str>,
    pub profile: &'a Profile,
    pub extra_env: Option<&'a std::collections::BTreeMap<String, String>>,
    /// It runs in a sandbox ([`crate::sandbox`]).
    pub contained: bool,
}

/// argv, working directory, environment and local token file of a terminal.
pub(super) type Prepared = (Vec<String>, PathBuf, Vec<(String, String)>, Option<PathBuf>);

/// A terminal on this machine: its token in a 0600 file here, `krad` first on
/// PATH, the `KRAD_ADE_*` variables.
pub(super) fn local_launch(
    spawner: &Spawner,
    launch: Launch<'_>,
    cwd: PathBuf,
) -> Result<Prepared, ApiError> {
    let settings = &spawner.settings;
    let id = launch.me.terminal;
    let token_file = settings.token_dir.join(format!("{id}.token"));
    // A host whose terminals end with the app needs the token only in this run:
    // no sync (a kept terminal's token must survive a crash).
    let write = if spawner.host.restart_safe() {
        private_file::write
    } else {
        private_file::write_for_this_run
    };
    write(&token_file, launch.token.expose().as_bytes()).map_err(|e| {
        ApiError::new(
            ErrorCode::Failed,
            format!("cannot write the terminal's token file: {e}"),
        )
    })?;
    let claude_settings = match launch.profile.hooks {
        HookKind::Claude => Some(
            write_claude_settings(&settings.state_dir, id, &settings.krad).map_err(|e| {
                let _ = std::fs::remove_file(&token_file);
                ApiError::new(
                    ErrorCode::Failed,
                    format!("cannot write the hook settings: {e}"),
                )
            })?,
        ),
        HookKind::Codex | HookKind::None => None,
    };
    let mut argv = profile::argv(
        launch.profile,
        launch.command,
        launch.prompt,
        &settings.krad,
        claude_settings.as_deref(),
    );
    let mut env = profile_env(launch.profile, launch.extra_env);
    let ports = spawner.environments.ports(&launch.me.environment);
    if launch.contained {
        let contained = crate::sandbox::Contained {
            id,
            cwd: &cwd,
            readable: [
                Some(token_file.clone()),
                claude_settings,
                Some(settings.krad.clone()),
            ]
            .into_iter()
            .flatten()
            .collect(),
            hooks: launch.profile.hooks,
            env: &env,
            environment: &launch.me.environment,
            ports: &ports,
        };
        argv = crate::sandbox::wrap(&spawner.sandbox, contained, argv).inspect_err(|_| {
            let _ = std::fs::remove_file(&token_file);
        })?;
    }
    if !ports.is_empty() {
        crate::environments::ports::add_env(&mut env, &ports);
    }
    let krad_dir = settings
        .krad
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let path = match std::env::var_os("PATH") {
        Some(path) => format!("{}:{}", krad_dir.display(), path.to_string_lossy()),
        None => krad_dir.display().to_string(),
    };
    env.push(("PATH".into(), path));
    env.push(("TERM".into(), "xterm-256color".into()));
    env.push(("KRAD_ADE_ENDPOINT".into(), settings.endpoint.to_string()));
    env.push((
        "KRAD_ADE_TOKEN_FILE".into(),
        token_file.display().to_string(),
    ));
    env.push(("KRAD_ADE_ENVIRONMENT".into(), launch.me.environment.clone()));
    env.push(("KRAD_ADE_TERMINAL".into(), id.to_string()));
    if launch.profile.expose_token {
        env.push(("KRAD_ADE_TOKEN".into(), launch.token.expose().to_owned()));
    }
    Ok((argv, cwd, env, Some(token_file)))
}

/// A terminal on an SSH host: `ssh -tt` through the host's control connection,
/// the bus reached through the host's reverse forward. Nothing the terminal is
/// given shows on a command line, here or on the host: the token goes to a 0600
/// file on the host, and the environment (the profile's `env`, the Spawn's
/// `env`, which may hold API keys), the working directory and the argv (which
/// may hold the prompt) to a 0600 launcher script in the same 0700 directory,
/// both written through ssh's stdin. The launcher removes itself before
/// anything else and then runs the program.
///
/// On a host with tmux, the launcher (`sh <launcher>`, the argv answered) runs
/// in a window of the app's tmux server there, started by the host's tmux
/// client ([`remote_tmux`]); the terminal's record is kept in the store so
/// that a restarted app takes it back. Without tmux, `ssh -tt` runs
/// `sh <launcher>`, which `exec`s the program: it ends with the link.
pub(super) async fn remote_launch(
    spawner: &Spawner,
    host: &Arc<Host>,
    launch: Launch<'_>,
    cwd: &Path,
) -> Result<Prepared, ApiError> {
    check_env_names(&launch)?;
    if launch.contained {
        crate::sandbox::host::check(host).await?;
    }
    let port = host.connect().await?;
    let id = launch.me.terminal;
    let in_tmux = host.tmux_terminals().is_some();
    let dir = if in_tmux {
        host.tmux_files_dir()
    } else {
        host.terminal_files_dir()
    };
    let token_file = format!("{dir}/{id}.token");
    host.write_private(&token_file, launch.token.expose().as_bytes())
        .await?;
    let env = host_env(
        spawner,
        (launch.profile, launch.extra_env),
        launch.me,
        port,
        &token_file,
    );
    let krad = host.krad();
    let claude_settings = match launch.profile.hooks {
        HookKind::Claude => {
            let path = format!("{dir}/{id}-claude-settings.json");
            let text = serde_json::to_vec_pretty(&profile::claude_settings(Path::new(&krad)))
                .unwrap_or_default();
            host.write_private(&path, &text).await?;
            Some(PathBuf::from(path))
        }
        HookKind::Codex | HookKind::None => None,
    };
    let argv = profile::argv(
        launch.profile,
        launch.command,
        launch.prompt,
        Path::new(&krad),
        claude_settings.as_deref(),
    );
    let launcher = format!("{dir}/{id}.launch");
    let cwd_text = cwd.display().to_string();
    // A sandbox with a network of its own reaches the bus (and its
    // allowlist) through the app's sockets, carried to the host.
    let net = if launch.contained {
        crate::sandbox::note_contained_on_host(&spawner.sandbox, id);
        let env = profile_env(launch.profile, launch.extra_env);
        let contained = (id, launch.profile.hooks, env.as_slice());
        crate::sandbox::host::network(&spawner.sandbox, host, contained, &dir, port).await?
    } else {
        None
    };
    let home = format!("{dir}/{id}-home");
    let wrap = launch.contained.then(|| {
        let on = crate::sandbox::host::OnHost {
            cwd: &cwd_text,
            home: &home,
            readable: [
                Some(token_file.clone()),
                claude_settings.as_ref().map(|p| p.display().to_string()),
            ]
            .into_iter()
            .flatten()
            .collect(),
            hooks: launch.profile.hooks,
            krad: &krad,
            net: net.as_ref(),
        };
        crate::sandbox::host::preamble(host, &on)
    });
    let mut script = launcher_script(
        &launcher,
        &cwd_text,
        &env,
        krad.rsplit_once('/').map(|(dir, _)| dir),
        (wrap.as_deref(), &argv),
    );
    if in_tmux {
        // The program runs in a subshell; its status is written after it.
        let (first, rest) = script.split_once('\n').unwrap_or((&script, ""));
        script = format!(
            "{first}\n(\nunset TMUX TMUX_PANE\n{rest})\n{}",
            remote_tmux::status_tail(&dir, id)
        );
    }
    if let Err(e) = host.write_private(&launcher, script.as_bytes()).await {
        if net.is_some() {
            host.remove_terminal_files(&[id]).await;
            crate::sandbox::forget(&spawner.sandbox, id);
        }
        return Err(e);
    }
    let env = vec![("TERM".to_owned(), "xterm-256color".to_owned())];
    if in_tmux {
        // Run by tmux there (in `cwd`); kept in the store from now on: a
        // restarted app takes it back.
        spawner.store.keep_terminal(id);
        return Ok((
            vec!["sh".to_owned(), launcher],
            cwd.to_path_buf(),
            env,
            None,
        ));
    }
    let mut ssh = vec!["ssh".to_owned()];
    ssh.extend(host.ssh_args(true));
    ssh.extend(["--".to_owned(), format!("sh {}", shell_quote(&launcher))]);
    Ok((ssh, spawner.settings.root.clone(), env, None))
}

/// The profile's and the Spawn's variables, the Spawn's last.
fn profile_env(
    profile: &Profile,
    extra_env: Option<&BTreeMap<String, String>>,
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = profile.env.clone().into_iter().collect();
    if let Some(extra) = extra_env {
        env.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    env
}

/// `invalid` unless every variable the terminal is given can be `export`ed
/// on the host.
fn check_env_names(launch: &Launch<'_>) -> Result<(), ApiError> {
    let extra = launch.extra_env.into_iter().flatten();
    for name in launch.profile.env.keys().chain(extra.map(|(k, _)| k)) {
        if !shell_name(name) {
            return Err(invalid(
                "env",
                format!(
                    "{name:?} cannot be set on an SSH host: a variable there is named with \
                     letters, digits and _ (not starting with a digit)"
                ),
            ));
        }
    }
    Ok(())
}

/// The environment of a terminal on a host: the profile's and the Spawn's
/// variables, its ports, and the `KRAD_ADE_*` variables (the bus through the
/// host's forward on `port`).
fn host_env<'a>(
    spawner: &Spawner,
    (profile, extra_env): (&'a Profile, Option<&'a BTreeMap<String, String>>),
    me: &TerminalRef,
    port: u16,
    token_file: &str,
) -> Vec<(&'a str, String)> {
    let mut env: Vec<(&str, String)> = Vec::new();
    for (k, v) in &profile.env {
        env.push((k, v.clone()));
    }
    if let Some(extra) = extra_env {
        for (k, v) in extra {
            env.push((k, v.clone()));
        }
    }
    let user_set_port = env.iter().any(|(k, _)| *k == "PORT");
    let ports = spawner.environments.ports(&me.environment);
    env.extend(crate::environments::ports::vars(&ports, user_set_port));
    env.push(("TERM", "xterm-256color".to_owned()));
    env.push(("KRAD_ADE_ENDPOINT", format!("127.0.0.1:{port}")));
    env.push(("KRAD_ADE_TOKEN_FILE", token_file.to_owned()));
    env.push(("KRAD_ADE_ENVIRONMENT", me.environment.clone()));
    env.push(("KRAD_ADE_TERMINAL", me.terminal.to_string()));
    // The link may drop: the `krad` calls of the terminal try again meanwhile.
    env.push(("KRAD_ADE_RETRY_SECS", "60".to_owned()));
    env
}

/// Whether `name` can be `export`ed by a POSIX shell.
fn shell_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The script a remote terminal starts with (`sh <launcher>`): it removes
/// itself first, so that the values in it live on the host's disk only until the
/// terminal starts; then it goes to `cwd`, exports `env`, puts `krad_dir` first
/// on `PATH` and `exec`s `argv` — after the sandbox's command line, which the
/// `wrap` lines put in `"$@"`, for a contained terminal. No value is ever an
/// argument of a process.
fn launcher_script(
    launcher: &str,
    cwd: &str,
    env: &[(&str, String)],
    krad_dir: Option<&str>,
    (wrap, argv): (Option<&str>, &[String]),
) -> String {
    let mut script = format!("rm -f -- {}\n", shell_quote(launcher));
    script.push_str(&format!("cd -- {} || exit 1\n", shell_quote(cwd)));
    for (k, v) in env {
        script.push_str(&format!("{k}={}\nexport {k}\n", shell_quote(v)));
    }
    if let Some(dir) = krad_dir {
        script.push_str(&format!(
            "PATH={}:\"$PATH\"\nexport PATH\n",
            shell_quote(dir)
        ));
    }
    match wrap {
        Some(wrap) => {
            script.push_str(wrap);
            script.push_str("exec \"$@\"");
        }
        None => script.push_str("exec"),
    }
    for word in argv {
        script.push(' ');
        script.push_str(&shell_quote(word));
    }
    script.push('\n');
    script
}

fn write_claude_settings(state_dir: &Path, id: u64, krad: &Path) -> std::io::Result<PathBuf> {
    let dir = state_dir.join("hooks").join(id.to_string());
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("claude-settings.json");
    let text = serde_json::to_vec_pretty(&profile::claude_settings(krad))
        .map_err(std::io::Error::other)?;
    std::fs::write(&path, text)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_shell_names_can_be_exported_on_a_host() {
        for good in ["A", "_x", "ANTHROPIC_API_KEY", "a1"] {
            assert!(shell_name(good), "{good}");
        }
        for bad in ["", "1A", "A-B", "A B", "A.B", "É"] {
            assert!(!shell_name(bad), "{bad}");
        }
    }

    #[test]
    fn the_launcher_removes_itself_and_quotes_every_value() {
        let env = [("KEY", "it's $secret".to_owned())];
        let argv = ["codex".to_owned(), "--".to_owned(), "fix `it`".to_owned()];
        let script = launcher_script(
            "/h/.krad-ade/r/3.launch",
            "/w d",
            &env,
            Some("/bin"),
            (None, &argv),
        );
        assert_eq!(
            script,
            "rm -f -- /h/.krad-ade/r/3.launch\n\
             cd -- '/w d' || exit 1\n\
             KEY='it'\\''s $secret'\nexport KEY\n\
             PATH=/bin:\"$PATH\"\nexport PATH\n\
             exec codex -- 'fix `it`'\n"
        );
    }
}

/// The longest a request from a starting terminal waits for its record: a
/// Spawn's own deadline.
const AT_MOST: Duration = Duration::from_secs(60);

/// The terminals being started: a handle, cheap to clone.
#[derive(Debug, Default, Clone)]
pub(crate) struct Launching {
    shared: Arc<Shared>,
}

/// The terminals being started, by id, with their environments.
#[derive(Debug, Default)]
struct Shared {
    starting: Mutex<HashMap<u64, String>>,
    /// Bumped whenever a start ends, recorded or not.
    settled: watch::Sender<u64>,
}

/// A start under way; it ends when this is dropped (after the terminal is
/// recorded, or when it failed).
pub(crate) struct StartUnderway<'a> {
    launching: &'a Launching,
    id: u64,
}

impl Launching {
    /// Notes that terminal `me` starts now.
    pub(crate) fn begin(&self, me: &TerminalRef) -> StartUnderway<'_> {
        self.lock().insert(me.terminal, me.environment.clone());
        StartUnderway {
            launching: self,
            id: me.terminal,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, String>> {
        self.shared
            .starting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn starts(&self, terminal: &TerminalRef) -> bool {
        self.lock()
            .get(&terminal.terminal)
            .is_some_and(|environment| *environment == terminal.environment)
    }

    /// For `terminal` while it is being started: what resolves once its start
    /// is over (recorded, or failed; at most [`AT_MOST`]). `None` otherwise.
    pub(crate) fn started(&self, terminal: &TerminalRef) -> Option<StartSettled> {
        if !self.starts(terminal) {
            return None;
        }
        let mut settled = self.shared.settled.subscribe();
        let launching = self.clone();
        let terminal = terminal.clone();
        Some(Box::pin(async move {
            let over = async {
                while launching.starts(&terminal) {
                    if settled.changed().await.is_err() {
                        return;
                    }
                }
            };
            let _ = tokio::time::timeout(AT_MOST, over).await;
        }))
    }
}

impl Drop for StartUnderway<'_> {
    fn drop(&mut self) {
        self.launching.lock().remove(&self.id);
        self.launching
            .shared
            .settled
            .send_modify(|n| *n = n.wrapping_add(1));
    }
}
