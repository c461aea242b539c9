//! Spawning an agent: a program on a new terminal in an environment, with its
//! own token, the `KRAD_ADE_*` variables, the profile's hooks and its prompt —
//! its id and intent recorded, the program started (here or on an SSH host:
//! [`launch`]), its record kept and its watcher set going. Spawn's handler and
//! RunVariants ([`crate::run_variants`]) start agents here; those that find
//! no room go to the queue ([`Spawned::or_queued`], [`crate::queue::spawn_later`]).

mod launch;

use std::path::PathBuf;
use std::sync::Arc;

use krad_bus::protocol::{AgentRecord, AgentState, ApiError, ErrorCode, StateSource, TerminalRef};
use krad_bus::request::RequestKind;
use krad_bus::request::spawn::Spawn;
use krad_bus::server::CallContext;
use krad_bus::token::{Principal, Secret};
use krad_term::{SpawnError, SpawnSpec, Terminal, TerminalEvent, TerminalHost};

pub(crate) use self::launch::Launching;
use self::launch::{Launch, Prepared, local_launch, remote_launch};
use crate::budget::Budgets;
use crate::config::{PromptDelivery, Settings};
use crate::environments::{Environments, MAIN};
use crate::hosts::{Host, HostLinks};
use crate::intents::{Plan, Underway};
use crate::limits::Limits;
pub(crate) use crate::limits::queue::QueuedSpawn;
use crate::profile::{Profile, Profiles};
use crate::sandbox::Sandbox;
use crate::store::{Store, now_rfc3339};
use crate::watcher::Watching;
use crate::{environments, watcher};

/// What starting a terminal reaches: Spawn, each variant, the queue's starts
/// and taking terminals back after a restart. Built once by the composition
/// root. A bundle of handles: each part owns its own state.
#[derive(Clone)]
pub(crate) struct Spawner {
    /// The app's settings.
    pub(crate) settings: Arc<Settings>,
    /// The config's profiles.
    pub(crate) profiles: Arc<Profiles>,
    /// The records.
    pub(crate) store: Arc<Store>,
    /// The terminal host here.
    pub(crate) host: Arc<dyn TerminalHost>,
    /// The bus's secret, to mint the terminals' tokens.
    pub(crate) secret: Arc<Secret>,
    /// Terminals being started (their tokens work before they are recorded).
    pub(crate) launching: Launching,
    /// Where agents run.
    pub(crate) environments: Arc<Environments>,
    /// Contained agents' sandboxes.
    pub(crate) sandbox: Arc<Sandbox>,
    /// The SSH hosts.
    pub(crate) hosts: Arc<HostLinks>,
    /// `[limits]`, the room taken by starts under way, and the queue.
    pub(crate) limits: Arc<Limits>,
    /// The variant groups' cost limits.
    pub(crate) budgets: Arc<Budgets>,
    /// What each terminal's watcher reaches.
    pub(crate) watching: Watching,
}

impl Spawner {
    /// Sets terminal `id`'s watcher going, typing `typed` once its program
    /// is ready; `contained`: it runs in a sandbox on this machine.
    pub(crate) fn watch(
        &self,
        id: u64,
        terminal: Arc<dyn Terminal>,
        events: tokio::sync::mpsc::Receiver<TerminalEvent>,
        typed: Option<String>,
        profile: Arc<Profile>,
        contained: bool,
    ) {
        tokio::spawn(watcher::run(
            self.watching.clone(),
            contained,
            id,
            terminal,
            events,
            typed,
            profile,
        ));
    }
}

/// The variables of the app's own environment a terminal never inherits (it
/// is given its own).
pub(crate) const BUS_VARIABLES: [&str; 4] = [
    "KRAD_ADE_TOKEN",
    "KRAD_ADE_API_JSON",
    "KRAD_ADE_TOKEN_FILE",
    "KRAD_ADE_ENDPOINT",
];

/// Default terminal size.
const COLS: u16 = 120;
const ROWS: u16 = 40;

/// Events a terminal may queue before frequent ones are coalesced.
const EVENT_QUEUE: usize = 64;

/// What became of a Spawn.
pub(crate) enum Spawned {
    /// It runs.
    Started(Box<AgentRecord>),
    /// Sent with `queue`, it found no room under `[limits]`: resolved and
    /// given its id, for the queue ([`crate::queue::spawn_later`]) to keep.
    NoRoom(Box<QueuedSpawn>),
}

impl Spawned {
    /// The agent's record: the started one's, or the one `queue` keeps in line
    /// (the caller passes [`crate::queue::spawn_later`]: the queue stands
    /// above this module).
    pub(crate) fn or_queued(
        self,
        queue: impl FnOnce(QueuedSpawn) -> Result<AgentRecord, ApiError>,
    ) -> Result<AgentRecord, ApiError> {
        match self {
            Spawned::Started(record) => Ok(*record),
            Spawned::NoRoom(queued) => queue(*queued),
        }
    }
}

/// Spawns an agent; `variant` marks it as a variant of a group (RunVariants).
/// Sent with `queue` and no room under `[limits]`, it does not start: it is
/// handed back for the queue.
pub(crate) async fn spawn(
    spawner: &Spawner,
    ctx: &CallContext,
    mut request: Spawn,
    variant: Option<(String, u32)>,
) -> Result<Spawned, ApiError> {
    request.max_cost_usd = request
        .max_cost_usd
        .or(spawner.settings.config.budget.max_cost_usd);
    let (environment, lead) = environment_and_lead(ctx, &request)?;
    spawner.environments.check(&environment)?;
    let (profile, command) = profile_and_command(spawner, &request)?;
    let parent = ctx.principal.terminal().map(|t| t.terminal);
    let wants_queue = request.queue == Some(true);
    let room = match &variant {
        // RunVariants judged the room for all of its variants at once: a
        // group sent with `queue` that found none queues each of them.
        Some(_) if wants_queue => None,
        Some(_) => Some(None),
        None => match spawner.limits.may_start(1) {
            Ok(room) => Some(Some(room)),
            Err(e) if wants_queue && e.code == ErrorCode::Busy => None,
            Err(e) => return Err(e),
        },
    };
    let Some(_room) = room else {
        // A Spawn with a request id keeps its intent from here until its
        // answer is kept: a retry after a crash is answered with the queued
        // record, never queued twice. A variant's group records it instead.
        let terminal = match &variant {
            None => allocate_id(spawner, ctx, false)?.0,
            Some(_) => spawner
                .store
                .allocate_terminal_id()
                .map_err(cannot_record)?,
        };
        request.environment = Some(environment);
        request.profile = Some(profile.name.clone());
        return Ok(Spawned::NoRoom(Box::new(QueuedSpawn {
            terminal,
            request,
            lead,
            parent,
            variant,
        })));
    };
    let start = Start {
        environment,
        lead,
        parent,
        request,
        profile,
        command,
        variant,
    };
    start_now(spawner, Some(ctx), None, start)
        .await
        .map(|record| Spawned::Started(Box::new(record)))
}

/// Starts a Spawn whose turn in the queue came (the queue took the room).
pub(crate) async fn start_queued(
    spawner: &Spawner,
    queued: QueuedSpawn,
) -> Result<AgentRecord, ApiError> {
    let (profile, command) = profile_and_command(spawner, &queued.request)?;
    let environment = queued
        .request
        .environment
        .clone()
        .unwrap_or_else(|| MAIN.to_owned());
    spawner.environments.check(&environment)?;
    let start = Start {
        environment,
        lead: queued.lead,
        parent: queued.parent,
        request: queued.request,
        profile,
        command,
        variant: queued.variant,
    };
    start_now(spawner, None, Some(queued.terminal), start).await
}

/// A Spawn judged and resolved: what starts, where and as whom.
struct Start {
    environment: String,
    lead: bool,
    parent: Option<u64>,
    request: Spawn,
    profile: Arc<Profile>,
    command: Vec<String>,
    variant: Option<(String, u32)>,
}

/// Starts a Spawn now: its environment ready, its id (given now, or when it
/// was queued: `queued_id`), its program.
async fn start_now(
    spawner: &Spawner,
    ctx: Option<&CallContext>,
    queued_id: Option<u64>,
    start: Start,
) -> Result<AgentRecord, ApiError> {
    let Start {
        request,
        profile,
        command,
        ..
    } = start;
    // A new worktree's setup runs before any agent starts there.
    let (cwd, host) = spawner.environments.ready(&start.environment).await?;
    let host = environments::host(&spawner.environments, host.as_deref())?;
    if host.is_none() {
        spawner.limits.may_limit_memory(profile.memory_max_mib)?;
    }
    let contained = profile.contained_for(request.sandbox);
    let (terminal, underway) = match (queued_id, ctx) {
        // Its group knows it since it was queued.
        (Some(id), _) => (id, None),
        (None, Some(ctx)) => {
            let (terminal, underway) = allocate_id(spawner, ctx, start.variant.is_some())?;
            if let Some((group, n)) = &start.variant {
                // The group knows its variant's terminal before the program
                // starts: after a crash, `run_variants::resume` never starts
                // it twice.
                spawner
                    .store
                    .record_variant(group, *n, &start.environment, (Some(terminal), contained))
                    .map_err(|e| {
                        ApiError::new(ErrorCode::Failed, format!("cannot record the variant: {e}"))
                    })?;
            }
            (terminal, underway)
        }
        (None, None) => return Err(ApiError::internal("a Spawn without a caller nor an id")),
    };
    let newcomer = Newcomer {
        me: TerminalRef {
            environment: start.environment,
            terminal,
        },
        lead: start.lead,
        parent: start.parent,
        host,
        variant: start.variant,
    };
    let token = spawner.secret.terminal_token(&newcomer.me, newcomer.lead);
    let mut shown = command.clone();
    shown.extend(crate::profile::prompt_args(
        &profile,
        request.prompt.as_deref(),
    ));
    let launch = Launch {
        me: &newcomer.me,
        token: &token,
        command,
        prompt: request.prompt.as_deref(),
        profile: &profile,
        extra_env: request.env.as_ref(),
        contained,
    };
    let prepared = match &newcomer.host {
        None => local_launch(spawner, launch, cwd)?,
        Some(host) => remote_launch(spawner, host, launch, &cwd).await?,
    };
    let (events_tx, events) = tokio::sync::mpsc::channel(EVENT_QUEUE);
    // The one record of the terminal, made once: kept before the start, and
    // on record (with its pid) after — the same to the digit everywhere.
    let mut record = agent_record(&newcomer, &request, &profile, shown);
    if let Some(queued) = queued_id.and_then(|id| spawner.store.record(id)) {
        // It exists since it was queued.
        record.started_at = queued.started_at;
    }
    spawner
        .store
        .keep_before_start(&record, prepared.3.as_ref());
    crate::crash_point::here("spawn-before-program");
    let (spec, token_file) = spawn_spec(spawner, terminal, &request, prepared);
    let host = terminal_host(spawner, newcomer.host.as_deref());
    let after = AfterStart {
        contained_here: contained && newcomer.host.is_none(),
        newcomer,
        record,
        request,
        profile,
        events,
        token_file,
        underway,
    };
    if !host.spawn_may_block() {
        // The PTY host starts the program in place and never waits: nothing
        // from here to the record can be cancelled half-way. Its token works
        // from now on: a request with it waits for its record.
        let start = spawner.launching.begin(&after.newcomer.me);
        let spawned = host.spawn(spec, events_tx);
        let recorded = record_started(spawner, spawned, after);
        drop(start);
        return recorded;
    }
    // A host that waits (the tmux host waits for tmux's answer) starts on a
    // blocking thread, which must never hold a runtime worker, in a task of
    // its own: a caller that leaves (or times out) while the program starts
    // leaves no orphan — the terminal is recorded and watched all the same.
    let spawner = spawner.clone();
    let finish = tokio::spawn(async move {
        // Its token works from now on: a request with it waits for its record.
        let start = spawner.launching.begin(&after.newcomer.me);
        let spawned = tokio::task::spawn_blocking(move || host.spawn(spec, events_tx))
            .await
            .unwrap_or_else(|e| Err(SpawnError::Host(format!("the terminal host failed: {e}"))));
        let recorded = record_started(&spawner, spawned, after);
        drop(start);
        recorded
    });
    finish
        .await
        .map_err(|e| ApiError::internal(format!("the Spawn's start was lost: {e}")))?
}

/// What a Spawn still has to do once its program started (or failed to).
struct AfterStart {
    newcomer: Newcomer,
    /// Its record, as kept before the start (no pid yet).
    record: AgentRecord,
    request: Spawn,
    profile: Arc<Profile>,
    events: tokio::sync::mpsc::Receiver<TerminalEvent>,
    /// The terminal's token file here, if it has one.
    token_file: Option<PathBuf>,
    /// Its intent, if it records one (see [`allocate_id`]).
    underway: Option<Underway>,
    /// It runs in a sandbox on this machine.
    contained_here: bool,
}

/// Records a terminal whose program started and sets its watcher going; for
/// one that did not, removes its token file and the record kept before the
/// start, and says why.
fn record_started(
    spawner: &Spawner,
    spawned: Result<Arc<dyn Terminal>, SpawnError>,
    after: AfterStart,
) -> Result<AgentRecord, ApiError> {
    let id = after.newcomer.me.terminal;
    let terminal = match spawned {
        Ok(terminal) => terminal,
        Err(e) => {
            if let Some(file) = &after.token_file {
                let _ = std::fs::remove_file(file);
            }
            spawner.store.forget_kept(id);
            // A sandbox's home, network and sockets carried to a host.
            crate::sandbox::forget(&spawner.sandbox, id);
            if let Some(host) = after.newcomer.host.clone() {
                tokio::spawn(async move { host.remove_terminal_files(&[id]).await });
            }
            return Err(spawn_failed(id, &e));
        }
    };
    if after.newcomer.host.is_none() {
        spawner
            .limits
            .limit_memory(after.profile.memory_max_mib, id, terminal.pid());
    }
    crate::crash_point::pause("spawn-program-running");
    let mut record = after.record;
    record.pid = terminal.pid();
    let record = spawner.store.insert(
        record,
        terminal.clone(),
        after.profile.clone(),
        after.token_file,
    );
    let typed = prompt_delivered(spawner, id, &after.profile, after.request.prompt);
    let profile = after.profile;
    tracing::info!(terminal = id, profile = %profile.name, "spawned");
    spawner.watch(
        id,
        terminal,
        after.events,
        typed,
        profile,
        after.contained_here,
    );
    crate::crash_point::here("spawn-started");
    // The intent goes once the terminal is on record.
    drop(after.underway);
    Ok(record)
}

/// The environment a new terminal goes to (the caller's by default, else
/// `main`) and whether it is a lead terminal. A plain terminal spawns only
/// plain terminals, in its own environment.
fn environment_and_lead(ctx: &CallContext, request: &Spawn) -> Result<(String, bool), ApiError> {
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
    Ok((environment, lead))
}

/// The profile a Spawn names (or the default one) and the command it runs;
/// refuses an empty command and a prompt the profile cannot take.
fn profile_and_command(
    spawner: &Spawner,
    request: &Spawn,
) -> Result<(Arc<Profile>, Vec<String>), ApiError> {
    let profile_name = request
        .profile
        .clone()
        .unwrap_or_else(|| spawner.profiles.default_name().to_owned());
    let profile = spawner.profiles.get(&profile_name).ok_or_else(|| {
        invalid(
            "profile",
            format!(
                "unknown profile {profile_name:?}; profiles: {}",
                spawner.profiles.names().join(", ")
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
            format!(
                "profile {profile_name:?} runs the command given: pass \"command\" (krad spawn --profile {profile_name} -- CMD ARGS…)"
            ),
        ));
    }
    if request.prompt.is_some() && matches!(profile.prompt, PromptDelivery::None) {
        return Err(invalid(
            "prompt",
            format!("profile {profile_name:?} takes no prompt"),
        ));
    }
    Ok((profile, command))
}

/// A new terminal id, reserved so that it is never given twice, and the
/// Spawn's intent, recorded in the same transaction (see [`crate::intents`])
/// when a crash could leave it something to settle: the answer to its request
/// id, or the variant it starts (RunVariants resumes those that never
/// started). Without either, recovery would have nothing to take forward or
/// back — the terminal is on record or not (`keep_before_start`) and no answer
/// is kept — so no intent is written, nor removed afterwards.
fn allocate_id(
    spawner: &Spawner,
    ctx: &CallContext,
    variant: bool,
) -> Result<(u64, Option<Underway>), ApiError> {
    let cannot = cannot_record;
    if ctx.once.is_none() && !variant {
        let id = spawner.store.allocate_terminal_id().map_err(cannot)?;
        return Ok((id, None));
    }
    let mut underway = None;
    let id = spawner
        .store
        .allocate_terminal_id_with(|tx, terminal| {
            let intent = Underway::new(spawner.store.db(), ctx, Plan::Spawn { terminal });
            intent.write(tx)?;
            underway = Some(intent);
            Ok(())
        })
        .map_err(cannot)?;
    let underway = underway.ok_or_else(|| ApiError::internal("the Spawn's intent was not made"))?;
    Ok((id, Some(underway)))
}

fn cannot_record(e: std::io::Error) -> ApiError {
    ApiError::new(
        ErrorCode::Failed,
        format!("cannot record the new terminal: {e}"),
    )
}

/// Who a new terminal is: its place on the bus and where it runs.
struct Newcomer {
    me: TerminalRef,
    lead: bool,
    /// The terminal that spawned it, if one did.
    parent: Option<u64>,
    host: Option<Arc<Host>>,
    /// Its group and number when it is a variant.
    variant: Option<(String, u32)>,
}

/// What the terminal host is given to start terminal `id`, and the token file
/// of a local terminal (removed again if its program does not start).
fn spawn_spec(
    spawner: &Spawner,
    id: u64,
    request: &Spawn,
    (argv, cwd, env, token_file): Prepared,
) -> (SpawnSpec, Option<PathBuf>) {
    let spec = SpawnSpec {
        id,
        argv,
        cwd,
        env,
        env_remove: BUS_VARIABLES.map(String::from).to_vec(),
        cols: request.cols.unwrap_or(COLS),
        rows: request.rows.unwrap_or(ROWS),
        transcript: Some(crate::transcripts::path(&spawner.settings, id)),
        scrollback_lines: spawner.settings.config.terminals.scrollback,
    };
    (spec, token_file)
}

/// The terminal host a new terminal starts on: the app's, or for a host whose
/// terminals live in tmux there, its own tmux client.
fn terminal_host(spawner: &Spawner, on: Option<&Host>) -> Arc<dyn TerminalHost> {
    match on.and_then(Host::tmux_terminals) {
        Some(tmux) => tmux,
        None => spawner.host.clone(),
    }
}

/// `failed` for a program that could not start.
fn spawn_failed(id: u64, error: &SpawnError) -> ApiError {
    let message = match error {
        SpawnError::Program { program, source }
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            if program.contains('/') {
                format!("cannot start {program:?}: no such file")
            } else if matches!(program.as_str(), "claude" | "codex") {
                format!(
                    "cannot start {program:?}: no such program on PATH; `krad doctor` says \
                     how to install it"
                )
            } else {
                format!("cannot start {program:?}: no such program on PATH")
            }
        }
        other => other.to_string(),
    };
    ApiError::new(ErrorCode::Failed, message).with_detail(serde_json::json!({ "terminal": id }))
}

/// The record of a terminal about to start: `starting`, no pid yet.
fn agent_record(
    newcomer: &Newcomer,
    request: &Spawn,
    profile: &Profile,
    command: Vec<String>,
) -> AgentRecord {
    new_record(
        &newcomer.me,
        newcomer.host.as_ref().map(|h| h.name.clone()),
        request,
        profile,
        command,
        newcomer.lead,
        newcomer.parent,
        newcomer.variant.as_ref(),
    )
}

/// A new terminal's record, `starting` (the queue's are made `queued`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn new_record(
    me: &TerminalRef,
    host: Option<String>,
    request: &Spawn,
    profile: &Profile,
    command: Vec<String>,
    lead: bool,
    parent: Option<u64>,
    variant: Option<&(String, u32)>,
) -> AgentRecord {
    let now = now_rfc3339();
    AgentRecord {
        terminal: me.terminal,
        environment: me.environment.clone(),
        host,
        name: request.name.clone(),
        profile: profile.name.clone(),
        command,
        lead,
        parent,
        group: variant.map(|v| v.0.clone()),
        variant: variant.map(|v| v.1),
        state: AgentState::Starting,
        state_source: StateSource::Process,
        message: None,
        exit_code: None,
        signal: None,
        pid: None,
        title: None,
        started_at: now.clone(),
        state_since: now,
        rev: 0,
        usage: None,
        tokens: None,
        max_cost_usd: request.max_cost_usd,
        hook_problem: None,
        queue_place: None,
    }
}

/// Notes on terminal `id`'s record how its prompt reaches the program (typed
/// by the watcher, or in its argv); returns what the watcher is to type.
fn prompt_delivered(
    spawner: &Spawner,
    id: u64,
    profile: &Profile,
    prompt: Option<String>,
) -> Option<String> {
    let prompt_in_argv = matches!(profile.prompt, PromptDelivery::Arg) && prompt.is_some();
    let typed = matches!(profile.prompt, PromptDelivery::Type)
        .then_some(prompt)
        .flatten();
    if typed.is_some() || prompt_in_argv {
        spawner.store.update(id, |e| {
            e.prompt_pending = typed.is_some();
            e.first_turn_pending = prompt_in_argv;
            false
        });
    }
    typed
}

fn forbidden(message: String) -> ApiError {
    RequestKind::Spawn.error(ErrorCode::Forbidden, message)
}

fn invalid(field: &str, message: String) -> ApiError {
    RequestKind::Spawn.field_error(ErrorCode::Invalid, field, message)
}
