//! The agent record: what the app knows of the program in one terminal.

use serde::{Deserialize, Serialize};

/// An agent's state (section 1 of the contract).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentState {
    /// Waiting in the app's queue for room under its `[limits]` (a Spawn or
    /// RunVariants sent with `"queue": true`); no program runs yet. Its
    /// record's `queue_place` says where it is in the queue.
    Queued,
    /// Spawned, nothing heard yet.
    Starting,
    /// Running a turn.
    Working,
    /// Turn over, waiting for the next prompt.
    Idle,
    /// Blocked on a question (a permission, a choice).
    Asking,
    /// The process ended; final.
    Exited,
    /// A value this build does not know, from a newer app: shown, never acted on.
    #[serde(other)]
    Other,
}

impl AgentState {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentState::Queued => "queued",
            AgentState::Starting => "starting",
            AgentState::Working => "working",
            AgentState::Idle => "idle",
            AgentState::Asking => "asking",
            AgentState::Exited => "exited",
            AgentState::Other => "?",
        }
    }

    /// Whether its program runs: neither still in the queue nor exited (what
    /// a Close of its environment, or of the app, ends).
    pub fn is_running(self) -> bool {
        !matches!(self, AgentState::Queued | AgentState::Exited)
    }

    /// Whether the agent has stopped working (`Wait`'s default condition): neither
    /// queued, starting nor working.
    pub fn is_stopped(self) -> bool {
        !matches!(
            self,
            AgentState::Queued | AgentState::Starting | AgentState::Working
        )
    }
}

impl std::fmt::Display for AgentState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where an agent's current state came from, so a user can tell a fact from a guess.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StateSource {
    /// The agent's own hooks, through `krad report`.
    Hook,
    /// The process: started (`starting`) or ended (`exited`).
    Process,
    /// The screen: output, a bell, an OSC 9/777 notification.
    Screen,
    /// No output for the profile's quiet time (a guess).
    Quiet,
    /// Keystrokes were sent to an agent that was asking.
    Input,
    /// Its model calls reached their cost limit: it was interrupted and is
    /// `asking` until the limit is raised (Budget) or the user sends to it.
    Budget,
    /// A value this build does not know, from a newer app: shown, never acted on.
    #[serde(other)]
    Other,
}

impl StateSource {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            StateSource::Hook => "hook",
            StateSource::Process => "process",
            StateSource::Screen => "screen",
            StateSource::Quiet => "quiet",
            StateSource::Input => "input",
            StateSource::Budget => "budget",
            StateSource::Other => "?",
        }
    }
}

/// The agent record.
///
/// # Format
///
/// ```json
/// {"terminal":4,"environment":"main","name":"fix-login","profile":"claude",
///  "command":["claude","fix the login bug"],"lead":false,"parent":2,
///  "group":null,"variant":null,"state":"working","state_source":"hook",
///  "message":"running tests","exit_code":null,"signal":null,"pid":12345,
///  "title":"✳ Fixing login","started_at":"…","state_since":"…","rev":57,
///  "usage":{"cpu_percent":3.5,"rss_bytes":183500800,"processes":4,"sampled_at":"…"}}
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentRecord {
    /// The terminal's id.
    pub terminal: u64,
    /// The environment it runs in.
    pub environment: String,
    /// The SSH host it runs on (absent: this machine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// A name given at spawn.
    pub name: Option<String>,
    /// The profile it was started with.
    pub profile: String,
    /// The argv it runs.
    pub command: Vec<String>,
    /// Whether it holds a lead token.
    pub lead: bool,
    /// The terminal that spawned it.
    pub parent: Option<u64>,
    /// Its variant group, if RunVariants started it.
    pub group: Option<String>,
    /// Its variant number in the group.
    pub variant: Option<u32>,
    /// Its state.
    pub state: AgentState,
    /// Where the state came from.
    pub state_source: StateSource,
    /// The last message: what a hook reported, a notification, the last assistant message.
    pub message: Option<String>,
    /// The exit code, once exited normally.
    pub exit_code: Option<i32>,
    /// The signal that killed it, once killed.
    pub signal: Option<i32>,
    /// The process id.
    pub pid: Option<u32>,
    /// The terminal's title.
    pub title: Option<String>,
    /// When it was spawned (RFC 3339 UTC).
    pub started_at: String,
    /// When its state last changed (RFC 3339 UTC).
    pub state_since: String,
    /// Bumped at every change; a value of the app's global rev.
    pub rev: u64,
    /// What its processes use, as last sampled (every 2 s, without a new
    /// rev); absent until the first sample and for a terminal on an SSH host
    /// without tmux; an exited terminal keeps its last sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The tokens its model calls used and their cost, from the agent's own
    /// files (Claude Code, Codex), read every 2 s and written without a new
    /// rev; absent until the agent's hooks named its files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<super::Tokens>,
    /// What its model calls may cost, in US dollars (Spawn's `max_cost_usd`,
    /// the config's `[budget]`); absent: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<super::Dollars>,
    /// What krad saw of the agent's hooks not running (Codex skips a hook it
    /// does not trust without a word: its approvals then are not asks); absent
    /// while they run as they should. `krad doctor` lists them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook_problem: Option<String>,
    /// Its place (from 1) in the queue of work waiting for room under the
    /// app's `[limits]`: its own Spawn (state `queued`) or a Send queued for
    /// it; absent when nothing of it waits there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_place: Option<u32>,
}

/// What a terminal's processes use: the program and every process below it.
///
/// # Format
///
/// ```json
/// {"cpu_percent":12.5,"rss_bytes":183500800,"processes":4,"sampled_at":"…"}
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// CPU time over the last sample period, in percent of one core (above
    /// 100 when the tree keeps more than one core busy), to a tenth.
    pub cpu_percent: Tenths,
    /// Resident memory of the whole tree, in bytes (pages shared between
    /// its processes counted in each).
    pub rss_bytes: u64,
    /// How many processes the tree has.
    pub processes: u32,
    /// When it was sampled (RFC 3339 UTC).
    pub sampled_at: String,
}

/// A number with one decimal, kept as tenths (so records compare exactly);
/// a plain JSON number on the wire (`12.5`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tenths(pub u32);

impl Tenths {
    /// The value as a float (`125` tenths → `12.5`).
    pub fn value(self) -> f64 {
        f64::from(self.0) / 10.0
    }

    /// `value` rounded to a tenth; negative and non-finite values are 0.
    pub fn of(value: f64) -> Tenths {
        if value.is_finite() && value > 0.0 {
            Tenths((value * 10.0).round().min(f64::from(u32::MAX)) as u32)
        } else {
            Tenths(0)
        }
    }
}

impl Serialize for Tenths {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.0.is_multiple_of(10) {
            serializer.serialize_u32(self.0 / 10)
        } else {
            serializer.serialize_f64(self.value())
        }
    }
}

impl<'de> Deserialize<'de> for Tenths {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Tenths::of(f64::deserialize(deserializer)?))
    }
}
