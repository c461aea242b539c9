//! Spawn: starts a program on a new terminal in an environment, with its own
//! token, the `KRAD_ADE_*` variables, the profile's hooks and its prompt.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use krad_bus::protocol::{
    AgentRecord, AgentState, ApiError, ErrorCode, Response, StateSource, TerminalRef, Token,
};
use krad_bus::request::spawn::Spawn;
use krad_bus::server::CallContext;
use krad_bus::token::Principal;
use krad_term::{SpawnError, SpawnSpec};

use crate::config::{HookKind, PromptDelivery};
use crate::store::now_rfc3339;
use crate::{Core, MAIN, environments, profile, watcher};

/// Default terminal size.
const COLS: u16 = 120;
const ROWS: u16 = 40;

/// Events a terminal may queue before frequent ones are coalesced.
const EVENT_QUEUE: usize = 64;

pub(crate) async fn handle(core: &Arc<Core>, ctx: &CallContext, request: Spawn) -> Response {
    match spawn(core, ctx, request, None).await {
        Ok(record) => Response::Agent(Box::new(record)),
        Err(e) => e.into(),
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
    let cwd = environments::ready_path(core, &environment).await?;

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
    let token_file = settings.token_dir.join(format!("{id}.token"));
    write_private(&token_file, token.expose().as_bytes()).map_err(|e| {
        ApiError::new(
            ErrorCode::Failed,
            format!("cannot write the terminal's token file: {e}"),
        )
    })?;
    let claude_settings = match profile.hooks {
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
        &profile,
        command.clone(),
        request.prompt.as_deref(),
        &settings.krad,
        claude_settings.as_deref(),
    );
    let mut shown = command;
    if profile.prompt == PromptDelivery::Arg
        && let Some(prompt) = &request.prompt
    {
        shown.push(prompt.clone());
    }

    let spec = SpawnSpec {
        id,
        argv,
        cwd,
        env: environment_of(
            core,
            &me,
            &token_file,
            &token,
            profile.expose_token,
            &profile.env,
            request.env.as_ref(),
        ),
        env_remove: vec!["KRAD_ADE_TOKEN".into(), "KRAD_ADE_API_JSON".into()],
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
        let _ = std::fs::remove_file(&token_file);
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
        .insert(record, terminal.clone(), profile.clone(), Some(token_file));
    let typed = (profile.prompt == PromptDelivery::Type)
        .then_some(request.prompt)
        .flatten();
    tokio::spawn(watcher::run(
        core.clone(),
        id,
        terminal,
        events,
        typed,
        profile.idle_after,
    ));
    tracing::info!(terminal = id, profile = %profile.name, "spawned");
    Ok(record)
}

/// The terminal's environment on top of the app's: who it is, how to reach the
/// bus, and `krad` first on PATH.
fn environment_of(
    core: &Core,
    me: &TerminalRef,
    token_file: &Path,
    token: &Token,
    expose_token: bool,
    profile_env: &std::collections::BTreeMap<String, String>,
    spawn_env: Option<&std::collections::BTreeMap<String, String>>,
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = Vec::new();
    env.extend(profile_env.iter().map(|(k, v)| (k.clone(), v.clone())));
    if let Some(extra) = spawn_env {
        env.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    let krad_dir = core
        .settings
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
    env.push(("KRAD_ADE_ENDPOINT".into(), core.settings.endpoint.clone()));
    env.push((
        "KRAD_ADE_TOKEN_FILE".into(),
        token_file.display().to_string(),
    ));
    env.push(("KRAD_ADE_ENVIRONMENT".into(), me.environment.clone()));
    env.push(("KRAD_ADE_TERMINAL".into(), me.terminal.to_string()));
    if expose_token {
        env.push(("KRAD_ADE_TOKEN".into(), token.expose().to_owned()));
    }
    env
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
