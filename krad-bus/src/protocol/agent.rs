//! The agent record: what the app knows of the program in one terminal.

use serde::{Deserialize, Serialize};

/// An agent's state (section 1 of the contract).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentState {
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
            AgentState::Starting => "starting",
            AgentState::Working => "working",
            AgentState::Idle => "idle",
            AgentState::Asking => "asking",
            AgentState::Exited => "exited",
            AgentState::Other => "?",
        }
    }

    /// Whether the agent has stopped working (`Wait`'s default condition): neither
    /// starting nor working.
    pub fn is_stopped(self) -> bool {
        !matches!(self, AgentState::Starting | AgentState::Working)
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
///  "title":"✳ Fixing login","started_at":"…","state_since":"…","rev":57}
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
}
