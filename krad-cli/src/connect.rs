//! Finding the bus and calling it: inside a terminal from the `KRAD_ADE_*`
//! variables; otherwise the app that serves the repository of `--repo` or of
//! the working directory (its discovery file, believed while the repository's
//! lock is held), then `$KRAD_ADE_API_JSON`, then the per-user api.json.
//! `--endpoint` and `--token-file` override.
//!
//! Inside a krad terminal on an SSH host (`KRAD_ADE_TERMINAL` set, and
//! `KRAD_ADE_RETRY_SECS`, which the app gives host terminals: 60), a call
//! that did not get through is tried again for that long, every 250 ms at
//! first and then every second, so that it gets through within a second of
//! the link being back: there the bus is reached through the link's reverse
//! forward, which is gone (refused) or half gone (a connection taken by a
//! frozen or dying sshd, then reset) while the link is down, and an agent's
//! `krad report` must not be lost to a blip. A refused connection never
//! carried the request; a reset one may have, so it is tried again only when
//! that is safe: a request that is not at-most-once (reads, Report, Ask), or
//! one with a `request_id` (the CLI gives one to an at-most-once request for
//! the purpose, so the app answers a repeat with the first answer).
//!
//! An `unauthorized` answer is tried again only when the app says it is
//! worth it (`retryable`: it started again and has not yet written this
//! terminal's new token to its token file on the host), or when the token
//! file changed since it was read; each time the file is read again. Any
//! other `unauthorized` (a wrong token, another terminal's) fails at once,
//! exit 4. Terminals on this machine get no retry: a refused bus there is an
//! app that is not running, and their hooks must not hang on it.
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use krad_bus::api_json::{self, ApiJsonError};
use krad_bus::client::{Answered, Client, ClientError, Item};
use krad_bus::protocol::{Caller, ErrorCode, Response, TerminalRef, Token};
use krad_bus::request::Call;
use serde_json::Value;

use crate::apps::discovery;
use crate::apps::repository::common_dir_of;
use crate::exit::{Exit, Failure};

/// How to reach the bus, as the global flags say.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct ConnectArgs {
    /// The bus endpoint (127.0.0.1:PORT) instead of KRAD_ADE_ENDPOINT or api.json.
    /// (Hidden from each command's help — `krad serve` connects to nothing —
    /// and told in `krad --help`'s text.)
    #[arg(long, global = true, value_name = "ADDR", hide = true)]
    pub endpoint: Option<String>,
    /// A file holding the token, instead of KRAD_ADE_TOKEN_FILE or api.json's.
    #[arg(long, global = true, value_name = "PATH", hide = true)]
    pub token_file: Option<PathBuf>,
    /// Reach the app that serves this repository (default: the one of the
    /// current directory, else api.json's).
    #[arg(long, global = true, value_name = "PATH")]
    pub repo: Option<PathBuf>,
}

/// A resolved connection to the bus.
#[derive(Debug)]
pub(crate) struct AppConnection {
    client: Client,
    /// The app's pid, when api.json told it.
    pub pid: Option<u32>,
    /// Inside a krad terminal on an SSH host: how long a call that did not get
    /// through is tried again (see the module's doc).
    retry_window: Option<Duration>,
    /// The token file the token came from, read again before an unauthorized
    /// call is tried again.
    token_file: Option<PathBuf>,
    /// The token the client presents (its `Debug` never shows it).
    token: Token,
    /// The API version asked for, if not this client's own.
    api_version: Option<u64>,
}

/// Extra margin over a request's deadline before the CLI stops waiting.
const ANSWER_MARGIN: Duration = Duration::from_secs(5);
/// The variable that asks for refused connections to be tried again, in
/// seconds (at most [`MAX_REFUSED_RETRY`]).
pub(crate) const RETRY_ENV: &str = "KRAD_ADE_RETRY_SECS";
const MAX_REFUSED_RETRY: Duration = Duration::from_secs(600);
/// The first pause before trying again, doubled each time up to
/// [`MAX_RETRY_PAUSE`]: a call gets through within a second of the bus being
/// back.
const FIRST_RETRY_PAUSE: Duration = Duration::from_millis(250);
const MAX_RETRY_PAUSE: Duration = Duration::from_secs(1);

impl AppConnection {
    /// Finds the bus. A missing or stale api.json is [`Exit::Unreachable`].
    pub(crate) fn find(args: &ConnectArgs) -> Result<AppConnection, Failure> {
        let inside = env_nonempty("KRAD_ADE_ENDPOINT");
        let mut pid = None;
        let mut from_api_json: Option<(String, Token)> = None;
        let needs_api_json = (args.endpoint.is_none() && inside.is_none())
            || (args.token_file.is_none() && inside.is_none());
        if needs_api_json {
            let (endpoint, token, app_pid) = read_api_json(args.repo.as_deref())?;
            pid = Some(app_pid);
            from_api_json = Some((endpoint, token));
        }
        let endpoint = match (&args.endpoint, &inside, &from_api_json) {
            (Some(flag), _, _) => flag.clone(),
            (None, Some(env), _) => env.clone(),
            (None, None, Some((endpoint, _))) => endpoint.clone(),
            (None, None, None) => return Err(not_running("no endpoint is known")),
        };
        let token = match (&args.token_file, &inside, from_api_json) {
            (Some(path), _, _) => read_token_file(path)?,
            (None, Some(_), _) => token_from_env()?,
            (None, None, Some((_, token))) => token,
            (None, None, None) => return Err(not_running("no token is known")),
        };
        let from = if inside.is_some() {
            caller_from_env()?
        } else {
            Caller::Client
        };
        let retry_window = matches!(from, Caller::Terminal(_))
            .then(|| env_nonempty(RETRY_ENV)?.parse::<u64>().ok())
            .flatten()
            .map(|secs| Duration::from_secs(secs).min(MAX_REFUSED_RETRY))
            .filter(|window| !window.is_zero());
        let token_file = match (&args.token_file, &inside) {
            (Some(path), _) => Some(path.clone()),
            (None, Some(_)) => env_nonempty("KRAD_ADE_TOKEN_FILE").map(PathBuf::from),
            (None, None) => None,
        };
        let client = Client::new(&endpoint, token.clone(), from)
            .map_err(|e| Failure::new(Exit::Usage, e.to_string()))?;
        Ok(AppConnection {
            client,
            pid,
            retry_window,
            token_file,
            token,
            api_version: None,
        })
    }

    /// Speaks another API version (for `krad raw --api-version`).
    pub(crate) fn with_api_version(mut self, version: u64) -> AppConnection {
        self.client = self.client.with_api_version(version);
        self.api_version = Some(version);
        self
    }

    /// The endpoint.
    pub(crate) fn endpoint(&self) -> String {
        self.client.endpoint().to_string()
    }

    /// The underlying client, for streaming requests.
    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// Sends a request and waits for its answer as long as the request's own
    /// deadline allows, plus a margin. An `Error` or `"TimedOut"` answer, or the
    /// answer of another request, is a [`Failure`].
    pub(crate) fn send<R: Call>(
        &self,
        request: R,
        request_id: Option<&str>,
    ) -> Result<Received<R::Answer>, Failure> {
        let result = match self.retry_window {
            None => self.client.call(request, request_id, ANSWER_MARGIN),
            Some(window) => self.call_with_retries(request, request_id, window),
        };
        let Answered { raw, answer, .. } = result.map_err(client_failure)?;
        match answer {
            Ok(answer) => Ok(Received { raw, answer }),
            Err(other) => Err(match response_failure(&other) {
                Some(failure) => failure.answered(raw),
                None => Failure::new(
                    Exit::Failure,
                    format!("unexpected answer to {}: {raw}", R::KIND.name()),
                ),
            }),
        }
    }
}

/// Why a call is tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Again {
    /// Nothing listens: the link (and its forward) is down.
    Refused,
    /// A connection taken, then dropped without an answer.
    Dropped,
    /// The app has not given this terminal its new token yet.
    NewToken,
    /// The token file holds another token than the one sent: at once.
    TokenChanged,
}

impl Again {
    /// What `krad` says on stderr the first time.
    fn says(self) -> &'static str {
        match self {
            Again::Refused => "refuses connections (is the link to the app down?)",
            Again::Dropped => {
                "dropped the connection without an answer (is the link to the app down?)"
            }
            Again::NewToken | Again::TokenChanged => {
                "does not take this terminal's token yet (was the app started again?)"
            }
        }
    }
}

impl AppConnection {
    /// Calls `request`, trying again for up to `window` while the call does
    /// not get through (see the module's doc); says so once on stderr for
    /// each reason.
    fn call_with_retries<R: Call>(
        &self,
        request: R,
        request_id: Option<&str>,
        window: Duration,
    ) -> Result<Answered<R::Answer>, ClientError> {
        // A copy to send again (a call consumes the request).
        let Ok(copy) = serde_json::to_value(&request) else {
            return self.client.call(request, request_id, ANSWER_MARGIN);
        };
        // A dropped call is repeated only if that is safe: with an id, an
        // at-most-once request is answered, not run, a second time.
        let own_id = (R::AT_MOST_ONCE && request_id.is_none()).then(retry_request_id);
        let request_id = request_id.or(own_id.as_deref());
        let until = Instant::now() + window;
        let mut pause = FIRST_RETRY_PAUSE;
        let mut said = Vec::new();
        // The client with the token read last, and that token.
        let mut renewed = None::<(Client, Token)>;
        let mut request = Some(request);
        loop {
            let this_call = match request.take() {
                Some(first) => first,
                None => serde_json::from_value::<R>(copy.clone())
                    .map_err(|e| ClientError::BadAnswer(format!("cannot repeat the call: {e}")))?,
            };
            let (client, sent_token) = match &renewed {
                Some((client, token)) => (client, token),
                None => (&self.client, &self.token),
            };
            let result = client.call(this_call, request_id, ANSWER_MARGIN);
            let again = match &result {
                Err(error) if refused(error) => Some(Again::Refused),
                Err(error) if dropped(error) => Some(Again::Dropped),
                Ok(answered) => match unauthorized(answered) {
                    Some(true) => Some(Again::NewToken),
                    Some(false) if self.token_changed(sent_token) => Some(Again::TokenChanged),
                    _ => None,
                },
                Err(_) => None,
            };
            let Some(again) = again.filter(|_| Instant::now() < until) else {
                return result;
            };
            if again != Again::TokenChanged {
                if !said.contains(&again) {
                    said.push(again);
                    eprintln!(
                        "krad: the bus at {} {}; retrying for up to {} s",
                        self.client.endpoint(),
                        again.says(),
                        window.as_secs()
                    );
                }
                std::thread::sleep(pause.min(until.saturating_duration_since(Instant::now())));
                pause = (pause * 2).min(MAX_RETRY_PAUSE);
            }
            if matches!(again, Again::NewToken | Again::TokenChanged)
                && let Some(client) = self.renewed_client()
            {
                renewed = Some(client);
            }
        }
    }

    /// Whether the token file now holds a token other than `sent`.
    fn token_changed(&self, sent: &Token) -> bool {
        self.token_file
            .as_deref()
            .and_then(|file| read_token_file(file).ok())
            .is_some_and(|now| now != *sent)
    }

    /// A client with the token in the token file now, and that token, if
    /// the file can be read.
    fn renewed_client(&self) -> Option<(Client, Token)> {
        let token = read_token_file(self.token_file.as_deref()?).ok()?;
        let endpoint = self.client.endpoint().to_string();
        let client = Client::new(&endpoint, token.clone(), self.client.caller().clone()).ok()?;
        let client = match self.api_version {
            Some(version) => client.with_api_version(version),
            None => client,
        };
        Some((client, token))
    }
}

/// A request id of the CLI's own, for a call it may send twice.
fn retry_request_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("krad-retry-{}-{nanos}", std::process::id())
}

/// `Some(retryable)` when the app answered `unauthorized` (the request was
/// not carried out); `retryable`: the app says to read the token file again.
fn unauthorized<T>(answered: &Answered<T>) -> Option<bool> {
    match &answered.answer {
        Err(Response::Error(error)) if error.code == ErrorCode::Unauthorized => {
            Some(error.retryable)
        }
        _ => None,
    }
}

/// Whether a connection was taken and then dropped without an answer (reset,
/// closed): through an SSH forward, what a frozen or dying sshd does.
fn dropped(error: &ClientError) -> bool {
    use std::io::ErrorKind;
    match error {
        ClientError::NoAnswer => true,
        ClientError::Io(error) => matches!(
            error.kind(),
            ErrorKind::ConnectionReset
                | ErrorKind::ConnectionAborted
                | ErrorKind::BrokenPipe
                | ErrorKind::UnexpectedEof
        ),
        _ => false,
    }
}

/// Whether a call found nothing listening (its request never left).
fn refused(error: &ClientError) -> bool {
    matches!(
        error,
        ClientError::Unreachable { source, .. }
            if source.kind() == std::io::ErrorKind::ConnectionRefused
    )
}

/// A request's answer: as the app wrote it (what `--json` prints) and typed.
#[derive(Debug, Clone)]
pub(crate) struct Received<A> {
    /// The answer line as JSON.
    pub raw: Value,
    /// The typed answer.
    pub answer: A,
}

/// The failure an answer's JSON stands for, if it is an error or `"TimedOut"`
/// (replayed or not); for the lines of `krad raw` and of streams.
pub(crate) fn answer_failure(answer: &Value) -> Option<Failure> {
    item_failure(&Item::<()>::of_answer(answer)).map(|failure| failure.answered(answer.clone()))
}

/// The failure a stream's line stands for, if it is an error or `"TimedOut"`
/// instead of a message.
pub(crate) fn item_failure<M>(item: &Item<M>) -> Option<Failure> {
    match item {
        Item::Answer(response) => response_failure(response),
        // An error this client cannot read is an error all the same.
        Item::UnreadableError(error) => Some(Failure::new(
            Exit::Failure,
            format!("the app answered an error: {error}"),
        )),
        Item::Message(_) | Item::Unknown => None,
    }
}

/// The failure a response stands for, if it is an error or `"TimedOut"`.
pub(crate) fn response_failure(response: &Response) -> Option<Failure> {
    match response {
        Response::TimedOut => Some(timed_out()),
        Response::Error(error) => {
            Some(Failure::new(Exit::for_error(error.code), error.to_string()))
        }
        _ => None,
    }
}

/// `"TimedOut"`: the app did not finish within the request's deadline.
pub(crate) fn timed_out() -> Failure {
    Failure::new(
        Exit::TimedOut,
        "the app did not finish within the request's deadline (TimedOut)",
    )
}

/// The failure a request (or a stream) that got no usable answer stands for.
pub(crate) fn client_failure(error: ClientError) -> Failure {
    match error {
        ClientError::Unreachable { endpoint, source } => Failure::new(
            Exit::Unreachable,
            format!(
                "the app is not running: nothing answers at {endpoint} ({source}); \
                 start it with `krad serve` in your repository"
            ),
        ),
        ClientError::BadEndpoint(_) => Failure::new(Exit::Usage, error.to_string()),
        other => Failure::new(Exit::Failure, other.to_string()),
    }
}

fn not_running(why: &str) -> Failure {
    Failure::new(
        Exit::Unreachable,
        format!(
            "the app is not running ({why}); start it with `krad serve` in your repository \
             (`krad apps` lists the apps running, `krad --repo PATH` reaches one)"
        ),
    )
}

fn read_api_json(repo: Option<&Path>) -> Result<(String, Token, u32), Failure> {
    let found = running_app(repo)?;
    Ok((found.endpoint, found.token, found.pid))
}

/// What a client outside the app's terminals reads to reach the app: the
/// discovery file of the app serving `repo` (or the working directory's
/// repository), else api.json. None found: exit 7 (with `repo` given and
/// no app serving it, no fallback).
pub(crate) fn running_app(repo: Option<&Path>) -> Result<api_json::ApiJson, Failure> {
    let dir = match repo {
        Some(repo) => repo.to_path_buf(),
        None => match std::env::current_dir() {
            Ok(dir) => dir,
            Err(_) => return from_api_json().map_err(|why| not_running(&why)),
        },
    };
    let git_dir = common_dir_of(&dir);
    if let Some(found) = git_dir.as_deref().and_then(discovery::live) {
        return Ok(found);
    }
    if repo.is_some() {
        return Err(match git_dir {
            Some(_) => Failure::new(
                Exit::Unreachable,
                format!(
                    "no app serves {} (`krad apps` lists those running); start one with \
                     `krad serve --root {}`",
                    dir.display(),
                    dir.display()
                ),
            ),
            None if !dir.is_dir() => Failure::new(
                Exit::Usage,
                format!("--repo {}: no such directory", dir.display()),
            ),
            None => Failure::new(
                Exit::Usage,
                format!(
                    "--repo {}: not in a git repository (give a folder of a checkout: \
                     `krad apps` lists the repositories apps serve)",
                    dir.display()
                ),
            ),
        });
    }
    let found = from_api_json().map_err(|why| match &git_dir {
        // In a repository: its own app is what was looked for first.
        Some(_) => Failure::new(
            Exit::Unreachable,
            format!(
                "no app serves the repository of {dir} (and api.json's app is not running: \
                 {why}); start one with `krad serve` in it (`krad apps` lists the apps running)",
                dir = dir.display()
            ),
        ),
        None => not_running(&why),
    })?;
    // In a repository no app serves, api.json's app (another repository's)
    // is reached as the contract says, but never silently.
    if let Some(here) = &git_dir
        && common_dir_of(&found.root).is_some_and(|there| &there != here)
    {
        eprintln!(
            "krad: no app serves the repository of {}; this is the app of {} (api.json's)",
            dir.display(),
            found.root.display()
        );
    }
    Ok(found)
}

/// api.json of the app that is running; else why there is none (missing,
/// stale or unreadable).
fn from_api_json() -> Result<api_json::ApiJson, String> {
    let path = api_json::default_path().map_err(|e| e.to_string())?;
    match api_json::read(&path) {
        Ok(found) => {
            if !api_json::pid_alive(found.pid) {
                return Err(format!(
                    "{} is stale: its app, pid {}, is gone",
                    path.display(),
                    found.pid
                ));
            }
            Ok(found)
        }
        Err(ApiJsonError::Missing(path)) => Err(format!("no {}", path.display())),
        Err(e) => Err(e.to_string()),
    }
}

fn read_token_file(path: &Path) -> Result<Token, Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Failure::new(
            Exit::Failure,
            format!("cannot read the token file {}: {e}", path.display()),
        )
    })?;
    let token = text.trim();
    if token.is_empty() {
        return Err(Failure::new(
            Exit::Failure,
            format!("the token file {} is empty", path.display()),
        ));
    }
    Ok(Token::new(token))
}

fn token_from_env() -> Result<Token, Failure> {
    if let Some(path) = env_nonempty("KRAD_ADE_TOKEN_FILE") {
        return read_token_file(Path::new(&path));
    }
    if let Some(token) = env_nonempty("KRAD_ADE_TOKEN") {
        return Ok(Token::new(token.trim()));
    }
    Err(Failure::new(
        Exit::Failure,
        "KRAD_ADE_ENDPOINT is set but neither KRAD_ADE_TOKEN_FILE nor KRAD_ADE_TOKEN is",
    ))
}

fn caller_from_env() -> Result<Caller, Failure> {
    let (Some(environment), Some(terminal)) = (
        env_nonempty("KRAD_ADE_ENVIRONMENT"),
        env_nonempty("KRAD_ADE_TERMINAL"),
    ) else {
        return Ok(Caller::Client);
    };
    let terminal = terminal
        .trim()
        .parse::<u64>()
        .ok()
        .filter(|&t| t > 0)
        .ok_or_else(|| {
            Failure::new(
                Exit::Failure,
                format!(
                    "KRAD_ADE_TERMINAL must be a terminal id (a positive integer), not {terminal:?}"
                ),
            )
        })?;
    Ok(Caller::Terminal(TerminalRef {
        environment,
        terminal,
    }))
}

fn env_nonempty(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_error_code_from_a_newer_app_is_a_plain_failure() {
        let newer = json!({"Error":{"code":"overheated","message":"too hot","retry_in":3}});
        let failure = answer_failure(&newer).unwrap();
        assert_eq!(failure.exit, Exit::Failure);
        assert!(failure.message.contains("too hot"), "{}", failure.message);
        let decoded = Response::decode(newer).unwrap();
        assert_eq!(
            response_failure(&decoded.response).unwrap().exit,
            Exit::Failure
        );
    }

    #[test]
    fn errors_and_timeouts_keep_their_exit_codes() {
        let not_found = json!({"Error":{"code":"not_found","message":"no terminal 9"}});
        assert_eq!(answer_failure(&not_found).unwrap().exit, Exit::NotFound);
        assert_eq!(
            answer_failure(&json!("TimedOut")).unwrap().exit,
            Exit::TimedOut
        );
        let replayed = json!({"Error":{"code":"conflict","message":"x","replayed":true}});
        assert_eq!(answer_failure(&replayed).unwrap().exit, Exit::Conflict);
        let unreadable = json!({"Error":{"code":"conflict"}});
        assert_eq!(answer_failure(&unreadable).unwrap().exit, Exit::Failure);
        for fine in [
            json!("Ok"),
            json!("ShuttingDown"),
            json!({"Heartbeat":{"rev":1}}),
        ] {
            assert!(answer_failure(&fine).is_none(), "{fine}");
        }
    }
}
