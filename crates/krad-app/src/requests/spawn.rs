//! Spawn: starts a program on a new terminal in an environment, with its own
//! token, the `KRAD_ADE_*` variables, the profile's hooks and its prompt.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use krad_bus::protocol::{
    AgentRecord, AgentState, ApiError, ErrorCode, StateSource, TerminalRef, Token,
};
use krad_bus::request::spawn::Spawn;
use krad_bus::server::{CallContext, Handle};
use krad_bus::token::Principal;
use krad_term::{SpawnError, SpawnSpec};

use crate::EmbeddedApp;
use crate::config::{HookKind, PromptDelivery};
use crate::hosts::Host;
use crate::profile::shell_quote;
use crate::store::now_rfc3339;
use crate::{Core, MAIN, environments, profile, watcher};

/// Default terminal size.
const COLS: u16 = 120;
const ROWS: u16 = 40;

/// Events a terminal may queue before frequent ones are coalesced.
const EVENT_QUEUE: usize = 64;

impl Handle<Spawn> for EmbeddedApp {
    async fn handle(&self, ctx: &CallContext, request: Spawn) -> Result<AgentRecord, ApiError> {
        let core = &self.core;
        match spawn(core, ctx, request, None).await {
            Ok(record) => Ok(record),
            Err(e) => Err(e),
        }
    }
}

/// Spawns an agent; `variant` marks it as a variant of a group (RunVariants).
pub(crate) async fn spawn(
    core: &Arc<Core>,
    ctx: &CallContext,
    request: Spawn,
    variant: Option<(String, u32)>,
) -> Result<AgentRecord, ApiError> {
    let caller = ctx.principal.terminal();
    let environment = request
        .environment
        .clone()
        .or_else(|| caller.map(|t| t.environment.clone()))
        .unwrap_or_else(|| MAIN.to_owned());
    let lead = request.lead.unwrap_or(false);
    if let Principal::Terminal(me) = &ctx.principal {
        if environment != me.environment {
            return Err(forbidden(format!(
                "terminal {} may spawn only in its own environment {:?}, not {environment:?}",
                me.terminal, me.environment
            )));
        }
        if lead {
            return Err(forbidden(format!(
                "terminal {} is not a lead terminal and cannot spawn one",
                me.terminal
            )));
        }
    }
    core.check_environment(&environment)?;
    let profile_name = request
        .profile
        .clone()
        .unwrap_or_else(|| core.profiles.default_name().to_owned());
    let profile = core.profiles.get(&profile_name).ok_or_else(|| {
        invalid(
            "profile",
            format!(
                "unknown profile {profile_name:?}; profiles: {}",
                core.profiles.names().join(", ")
            ),
        )
    })?;
    let command = request
        .command
        .clone()
        .unwrap_or_else(|| profile.command.clone());
    if command.is_empty() {
        return Err(invalid(
            "command",
            format!("profile {profile_name:?} runs the command given: pass \"command\""),
        ));
    }
    if request.prompt.is_some() && profile.prompt == PromptDelivery::None {
        return Err(invalid(
            "prompt",
            format!("profile {profile_name:?} takes no prompt"),
        ));
    }
    // A new worktree's setup runs before any agent starts there.
    let (cwd, host) = environments::ready(core, &environment).await?;
    let host = environments::host(core, host.as_deref())?;

    let id = core.store.allocate_terminal_id().map_err(|e| {
        ApiError::new(
            ErrorCode::Failed,
            format!("cannot record the new terminal: {e}"),
        )
    })?;
    let me = TerminalRef {
        environment: environment.clone(),
        terminal: id,
    };
    let secret = core.bus.secret();
    let token = if lead {
        secret.lead_token(&me)
    } else {
        secret.bus_token(&me)
    };
    let settings = &core.settings;
    let mut shown = command.clone();
    shown.extend(crate::profile::prompt_args(
        &profile,
        request.prompt.as_deref(),
    ));
    let launch = Launch {
        me: &me,
        token: &token,
        command,
        prompt: request.prompt.as_deref(),
        profile: &profile,
        extra_env: request.env.as_ref(),
    };
    let (argv, cwd, env, token_file) = match &host {
        None => local_launch(core, launch, cwd)?,
        Some(host) => remote_launch(core, host, launch, &cwd).await?,
    };
    let spec = SpawnSpec {
        id,
        argv,
        cwd,
        env,
        env_remove: vec![
            "KRAD_ADE_TOKEN".into(),
            "KRAD_ADE_API_JSON".into(),
            "KRAD_ADE_TOKEN_FILE".into(),
            "KRAD_ADE_ENDPOINT".into(),
        ],
        cols: request.cols.unwrap_or(COLS),
        rows: request.rows.unwrap_or(ROWS),
        transcript: Some(
            settings
                .state_dir
                .join("transcripts")
                .join(format!("{id}.log")),
        ),
        scrollback_lines: settings.config.terminals.scrollback,
    };
    let (events_tx, events) = tokio::sync::mpsc::channel(EVENT_QUEUE);
    let terminal = core.host.spawn(spec, events_tx).map_err(|e| {
        if let Some(file) = &token_file {
            let _ = std::fs::remove_file(file);
        }
        let message = match &e {
            SpawnError::Program { program, source }
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                format!("cannot start {program:?}: no such program on PATH")
            }
            other => other.to_string(),
        };
        ApiError::new(ErrorCode::Failed, message).with_detail(serde_json::json!({ "terminal": id }))
    })?;
    let now = now_rfc3339();
    let record = AgentRecord {
        terminal: id,
        environment,
        host: host.as_ref().map(|h| h.name.clone()),
        name: request.name.clone(),
        profile: profile.name.clone(),
        command: shown,
        lead,
        parent: caller.map(|t| t.terminal),
        group: variant.as_ref().map(|v| v.0.clone()),
        variant: variant.as_ref().map(|v| v.1),
        state: AgentState::Starting,
        state_source: StateSource::Process,
        message: None,
        exit_code: None,
        signal: None,
        pid: terminal.pid(),
        title: None,
        started_at: now.clone(),
        state_since: now,
        rev: 0,
    };
    let record = core
        .store
        .insert(record, terminal.clone(), profile.clone(), token_file);
    let prompt_in_argv = profile.prompt == PromptDelivery::Arg && request.prompt.is_some();
    let typed = (profile.prompt == PromptDelivery::Type)
        .then_some(request.prompt)
        .flatten();
    if typed.is_some() || prompt_in_argv {
        core.store.update(id, |e| {
            e.prompt_pending = typed.is_some();
            e.first_turn_pending = prompt_in_argv;
            false
        });
    }
    tokio::spawn(watcher::run(
        core.clone(),
        id,
        terminal,
        events,
        typed,
        profile.idle_after,
        profile.hooks,
    ));
    tracing::info!(terminal = id, profile = %profile.name, "spawned");
    Ok(record)
}

/// What a terminal is started with, wherever it runs.
struct Launch<'a> {
    me: &'a TerminalRef,
    token: &'a Token,
    command: Vec<String>,
    prompt: Option<&'a str>,
    profile: &'a crate::profile::Profile,
    extra_env: Option<&'a std::collections::BTreeMap<String, String>>,
}

/// argv, working directory, environment and local token file of a terminal.
type Prepared = (Vec<String>, PathBuf, Vec<(String, String)>, Option<PathBuf>);

/// A terminal on this machine: its token in a 0600 file here, `krad` first on
/// PATH, the `KRAD_ADE_*` variables.
fn local_launch(core: &Core, launch: Launch<'_>, cwd: PathBuf) -> Result<Prepared, ApiError> {
    let settings = &core.settings;
    let id = launch.me.terminal;
    let token_file = settings.token_dir.join(format!("{id}.token"));
    write_private(&token_file, launch.token.expose().as_bytes()).map_err(|e| {
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
    let argv = profile::argv(
        launch.profile,
        launch.command,
        launch.prompt,
        &settings.krad,
        claude_settings.as_deref(),
    );
    let mut env: Vec<(String, String)> = launch.profile.env.clone().into_iter().collect();
    if let Some(extra) = launch.extra_env {
        env.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
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
    env.push(("KRAD_ADE_ENDPOINT".into(), settings.endpoint.clone()));
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
/// both written through ssh's stdin. `ssh -tt` runs `sh <launcher>`, which
/// removes itself before anything else and then `exec`s the program.
async fn remote_launch(
    core: &Core,
    host: &Arc<Host>,
    launch: Launch<'_>,
    cwd: &Path,
) -> Result<Prepared, ApiError> {
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
    let port = host.connect().await?;
    let id = launch.me.terminal;
    let home = host.home().unwrap_or_else(|| "/tmp".to_owned());
    let dir = format!("{home}/.krad-ade/remote-{}", std::process::id());
    let token_file = format!("{dir}/{id}.token");
    host.write_private(&token_file, launch.token.expose().as_bytes())
        .await?;
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
    let mut env: Vec<(&str, String)> = Vec::new();
    for (k, v) in &launch.profile.env {
        env.push((k, v.clone()));
    }
    if let Some(extra) = launch.extra_env {
        for (k, v) in extra {
            env.push((k, v.clone()));
        }
    }
    env.push(("TERM", "xterm-256color".to_owned()));
    env.push(("KRAD_ADE_ENDPOINT", format!("127.0.0.1:{port}")));
    env.push(("KRAD_ADE_TOKEN_FILE", token_file.clone()));
    env.push(("KRAD_ADE_ENVIRONMENT", launch.me.environment.clone()));
    env.push(("KRAD_ADE_TERMINAL", id.to_string()));
    let launcher = format!("{dir}/{id}.launch");
    let script = launcher_script(
        &launcher,
        &cwd.display().to_string(),
        &env,
        krad.rsplit_once('/').map(|(dir, _)| dir),
        &argv,
    );
    host.write_private(&launcher, script.as_bytes()).await?;
    let mut ssh = vec!["ssh".to_owned()];
    ssh.extend(host.ssh_args(true));
    ssh.push("--".to_owned());
    ssh.push(format!("sh {}", shell_quote(&launcher)));
    let env = vec![("TERM".to_owned(), "xterm-256color".to_owned())];
    Ok((ssh, core.settings.root.clone(), env, None))
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
/// on `PATH` and `exec`s `argv`. No value is ever an argument of a process.
fn launcher_script(
    launcher: &str,
    cwd: &str,
    env: &[(&str, String)],
    krad_dir: Option<&str>,
    argv: &[String],
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
    script.push_str("exec");
    for word in argv {
        script.push(' ');
        script.push_str(&shell_quote(word));
    }
    script.push('\n');
    script
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)
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

fn forbidden(message: String) -> ApiError {
    ApiError::new(ErrorCode::Forbidden, message)
        .with_detail(serde_json::json!({ "request": "Spawn" }))
}

fn invalid(field: &str, message: String) -> ApiError {
    ApiError::new(ErrorCode::Invalid, format!("Spawn: {message}"))
        .with_detail(serde_json::json!({ "request": "Spawn", "field": field }))
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
        let script = launcher_script("/h/.krad-ade/r/3.launch", "/w d", &env, Some("/bin"), &argv);
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
