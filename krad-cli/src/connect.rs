//! Finding the bus and calling it: inside a terminal from the `KRAD_ADE_*`
//! variables, otherwise from api.json; `--endpoint` and `--token-file` override.
//!
//! Inside a krad terminal on an SSH host (`KRAD_ADE_TERMINAL` set, and
//! `KRAD_ADE_RETRY_SECS`, which the app gives host terminals: 60), a refused
//! connection is tried again for that long, backing off: there the bus is
//! reached through the link's reverse forward, which is gone while the link is
//! down, and an agent's `krad report` must not be lost to a blip. A refused
//! connection never carried the request, so trying again is safe. So is an
//! `unauthorized` answer there, within the same bound, once the token file was
//! read again: an app started again (after a crash) rewrites the terminal's
//! token file on the host a moment after its link (and so the forward) is up,
//! and a call in between carries the last run's token. An unauthorized request
//! was never carried out. Terminals on this machine get no retry: a refused bus
//! there is an app that is not running, and their hooks must not hang on it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use krad_bus::api_json::{self, ApiJsonError};
use krad_bus::client::{Answered, Client, ClientError};
use krad_bus::protocol::{Caller, ErrorCode, Response, TerminalRef, Token};
use krad_bus::request::Call;
use serde_json::Value;

use crate::exit::{Exit, Failure};

/// How to reach the bus, as the global flags say.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConnectArgs {
    /// The bus endpoint (127.0.0.1:PORT) instead of KRAD_ADE_ENDPOINT or api.json.
    #[arg(long, global = true, value_name = "ADDR")]
    pub endpoint: Option<String>,
    /// A file holding the token, instead of KRAD_ADE_TOKEN_FILE or api.json's.
    #[arg(long, global = true, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
}

/// A resolved connection to the bus.
#[derive(Debug)]
pub struct Bus {
    client: Client,
    /// The app's pid, when api.json told it.
    pub pid: Option<u32>,
    /// Inside a krad terminal on an SSH host: how long a refused connection
    /// (or an unauthorized call) is tried again.
    retries_refused: Option<Duration>,
    /// The token file the token came from, read again before an unauthorized
    /// call is tried again.
    token_file: Option<PathBuf>,
    /// The API version asked for, if not this client's own.
    api_version: Option<u64>,
}

/// Extra margin over a request's deadline before the CLI stops waiting.
const ANSWER_MARGIN: Duration = Duration::from_secs(5);
/// The variable that asks for refused connections to be tried again, in
/// seconds (at most [`MAX_REFUSED_RETRY`]).
pub const RETRY_ENV: &str = "KRAD_ADE_RETRY_SECS";
const MAX_REFUSED_RETRY: Duration = Duration::from_secs(600);
/// The first pause before trying again, doubled each time up to
/// [`MAX_RETRY_PAUSE`].
const FIRST_RETRY_PAUSE: Duration = Duration::from_millis(250);
const MAX_RETRY_PAUSE: Duration = Duration::from_secs(5);

impl Bus {
    /// Finds the bus. A missing or stale api.json is [`Exit::Unreachable`].
    pub fn find(args: &ConnectArgs) -> Result<Bus, Failure> {
        let inside = env_nonempty("KRAD_ADE_ENDPOINT");
        let mut pid = None;
        let mut from_api_json: Option<(String, Token)> = None;
        let needs_api_json = (args.endpoint.is_none() && inside.is_none())
            || (args.token_file.is_none() && inside.is_none());
        if needs_api_json {
            let (endpoint, token, app_pid) = read_api_json()?;
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
        let retries_refused = matches!(from, Caller::Terminal(_))
            .then(|| env_nonempty(RETRY_ENV)?.parse::<u64>().ok())
            .flatten()
            .map(|secs| Duration::from_secs(secs).min(MAX_REFUSED_RETRY))
            .filter(|window| !window.is_zero());
        let token_file = match (&args.token_file, &inside) {
            (Some(path), _) => Some(path.clone()),
            (None, Some(_)) => env_nonempty("KRAD_ADE_TOKEN_FILE").map(PathBuf::from),
            (None, None) => None,
        };
        let client = Client::new(&endpoint, token, from)
            .map_err(|e| Failure::new(Exit::Usage, e.to_string()))?;
        Ok(Bus {
            client,
            pid,
            retries_refused,
            token_file,
            api_version: None,
        })
    }

    /// Speaks another API version (for `krad raw --api-version`).
    pub fn with_api_version(mut self, version: u64) -> Bus {
        self.client = self.client.with_api_version(version);
        self.api_version = Some(version);
        self
    }

    /// The endpoint.
    pub fn endpoint(&self) -> String {
        self.client.endpoint().to_string()
    }

    /// The underlying client, for streaming requests.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Sends a request and waits for its answer as long as the request's own
    /// deadline allows, plus a margin. An `Error` or `"TimedOut"` answer, or the
    /// answer of another request, is a [`Failure`].
    pub fn send<R: Call>(
        &self,
        request: R,
        request_id: Option<&str>,
    ) -> Result<Reply<R::Answer>, Failure> {
        // A copy to send again (the request is consumed by a call).
        let copy = self
            .retries_refused
            .and_then(|window| Some((window, serde_json::to_value(&request).ok()?)));
        let mut result = self.client.call(request, request_id, ANSWER_MARGIN);
        if let Some((window, copy)) = copy {
            result = self.retry::<R>(result, &copy, request_id, window);
        }
        let Answered { raw, answer, .. } = result.map_err(client_failure)?;
        match answer {
            Ok(answer) => Ok(Reply { raw, answer }),
            Err(other) => Err(response_failure(&other).unwrap_or_else(|| {
                Failure::new(
                    Exit::Failure,
                    format!("unexpected answer to {}: {raw}", R::KIND.name()),
                )
            })),
        }
    }
}

impl Bus {
    /// Tries `copy` (the request) again while the bus refuses connections or
    /// (the token file read again each time) answers `unauthorized`, for up to
    /// `window`, backing off; says so once on stderr.
    fn retry<R: Call>(
        &self,
        mut result: Result<Answered<R::Answer>, ClientError>,
        copy: &Value,
        request_id: Option<&str>,
        window: Duration,
    ) -> Result<Answered<R::Answer>, ClientError> {
        let until = Instant::now() + window;
        let mut pause = FIRST_RETRY_PAUSE;
        let (mut said_refused, mut said_token) = (false, false);
        let mut renewed: Option<Client> = None;
        loop {
            let token_refused = !refused(&result) && unauthorized(&result);
            if !(refused(&result) || token_refused && self.token_file.is_some())
                || Instant::now() >= until
            {
                return result;
            }
            let said = if token_refused {
                &mut said_token
            } else {
                &mut said_refused
            };
            if !*said {
                *said = true;
                let what = if token_refused {
                    "does not take this terminal's token yet (was the app started again?)"
                } else {
                    "refuses connections (is the link to the app down?)"
                };
                eprintln!(
                    "krad: the bus at {} {what}; retrying for up to {} s",
                    self.client.endpoint(),
                    window.as_secs()
                );
            }
            std::thread::sleep(pause.min(until.saturating_duration_since(Instant::now())));
            pause = (pause * 2).min(MAX_RETRY_PAUSE);
            if token_refused && let Some(client) = self.renewed_client() {
                renewed = Some(client);
            }
            let Ok(again) = serde_json::from_value::<R>(copy.clone()) else {
                return result;
            };
            let client = renewed.as_ref().unwrap_or(&self.client);
            result = client.call(again, request_id, ANSWER_MARGIN);
        }
    }

    /// A client with the token in the token file now, if it can be read.
    fn renewed_client(&self) -> Option<Client> {
        let token = read_token_file(self.token_file.as_deref()?).ok()?;
        let endpoint = self.client.endpoint().to_string();
        let client = Client::new(&endpoint, token, self.client.caller().clone()).ok()?;
        Some(match self.api_version {
            Some(version) => client.with_api_version(version),
            None => client,
        })
    }
}

/// Whether the app answered `unauthorized` (the request was not carried out).
fn unauthorized<T>(result: &Result<Answered<T>, ClientError>) -> bool {
    matches!(
        result,
        Ok(Answered { answer: Err(Response::Error(error)), .. })
            if error.code == ErrorCode::Unauthorized
    )
}

/// Whether a call found nothing listening (its request never left).
fn refused<T>(result: &Result<T, ClientError>) -> bool {
    matches!(
        result,
        Err(ClientError::Unreachable { source, .. })
            if source.kind() == std::io::ErrorKind::ConnectionRefused
    )
}

/// A request's answer: as the app wrote it (what `--json` prints) and typed.
#[derive(Debug, Clone)]
pub struct Reply<A> {
    /// The answer line as JSON.
    pub raw: Value,
    /// The typed answer.
    pub answer: A,
}

/// The failure an answer's JSON stands for, if it is an error or `"TimedOut"`
/// (replayed or not); for the lines of `krad raw` and of streams.
pub fn answer_failure(answer: &Value) -> Option<Failure> {
    match Response::decode(answer.clone()) {
        Ok(decoded) => response_failure(&decoded.response),
        // An error this client cannot read is an error all the same.
        Err(_) => answer.as_object()?.get("Error").map(|error| {
            Failure::new(Exit::Failure, format!("the app answered an error: {error}"))
        }),
    }
}

/// The failure a response stands for, if it is an error or `"TimedOut"`.
pub fn response_failure(response: &Response) -> Option<Failure> {
    match response {
        Response::TimedOut => Some(timed_out()),
        Response::Error(error) => {
            Some(Failure::new(Exit::for_error(error.code), error.to_string()))
        }
        _ => None,
    }
}

/// `"TimedOut"`: the app did not finish within the request's deadline.
pub fn timed_out() -> Failure {
    Failure::new(
        Exit::TimedOut,
        "the app did not finish within the request's deadline (TimedOut)",
    )
}

/// The failure a request (or a stream) that got no usable answer stands for.
pub fn client_failure(error: ClientError) -> Failure {
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
        format!("the app is not running ({why}); start it with `krad serve` in your repository"),
    )
}

fn read_api_json() -> Result<(String, Token, u32), Failure> {
    let path = api_json::default_path().map_err(|e| not_running(&e.to_string()))?;
    match api_json::read(&path) {
        Ok(found) => {
            if !api_json::pid_alive(found.pid) {
                return Err(not_running(&format!(
                    "{} is stale: its app, pid {}, is gone",
                    path.display(),
                    found.pid
                )));
            }
            Ok((found.endpoint, found.token, found.pid))
        }
        Err(ApiJsonError::Missing(path)) => Err(not_running(&format!("no {}", path.display()))),
        Err(e) => Err(not_running(&e.to_string())),
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
