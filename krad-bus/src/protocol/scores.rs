//! A variant group's scoreboard: each variant's checks, cost, time, diff and
//! conflicts, and the ranking a pick by rule follows (Scores, CheckVariants,
//! PickVariant with `best`).

use serde::{Deserialize, Serialize};

use super::agent::AgentState;
use super::tokens::Tokens;

/// What became of one check of one variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckOutcome {
    /// Waiting for room (`[checks] parallel`, `[limits]`).
    Queued,
    /// Running now.
    Running,
    /// Exited 0.
    Passed,
    /// Exited non-zero (or was killed by a signal of its own).
    Failed,
    /// Killed at its time limit.
    TimedOut,
    /// Could not be run (no worktree, the program could not start).
    Error,
    /// An outcome this build does not know (from a newer app).
    #[serde(other)]
    Other,
}

impl CheckOutcome {
    /// Its name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckOutcome::Queued => "queued",
            CheckOutcome::Running => "running",
            CheckOutcome::Passed => "passed",
            CheckOutcome::Failed => "failed",
            CheckOutcome::TimedOut => "timed_out",
            CheckOutcome::Error => "error",
            CheckOutcome::Other => "?",
        }
    }

    /// Whether the check is over (not queued or running).
    pub fn is_final(self) -> bool {
        !matches!(self, CheckOutcome::Queued | CheckOutcome::Running)
    }
}

/// One check's latest run in one variant.
///
/// # Format
///
/// ```json
/// {"name":"test","outcome":"failed","gates":true,"exit_code":1,"duration_ms":5120,
///  "commit":"77b0…","tail":["test login … FAILED"],"started_at":"…","ran_at":"…"}
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckResultInfo {
    /// The check's name in `[checks]`.
    pub name: String,
    /// What became of it.
    pub outcome: CheckOutcome,
    /// Whether a pick by rule needs it passed.
    pub gates: bool,
    /// The program's exit code, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// How long it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// The commit checked (the worktree's work, uncommitted included, as a
    /// commit; see docs/environments.md). Empty while queued.
    #[serde(default)]
    pub commit: String,
    /// The last lines of its output (stdout, then stderr).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tail: Vec<String>,
    /// When it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// When it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ran_at: Option<String>,
    /// CPU time its processes used, in milliseconds (sampled while it ran,
    /// on this machine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_ms: Option<u64>,
    /// The most memory its processes held at once, in bytes (sampled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rss_bytes: Option<u64>,
}

/// One variant on the scoreboard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VariantScore {
    /// Its number.
    pub variant: u32,
    /// Its environment.
    pub environment: String,
    /// Its agent's terminal, once spawned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal: Option<u64>,
    /// Its agent's state (none when the terminal is gone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<AgentState>,
    /// Each check of `[checks]`, by name: its latest run (none yet: absent).
    #[serde(default)]
    pub checks: Vec<CheckResultInfo>,
    /// True when every check of `[checks]` ran to an end on the variant's
    /// work as it is now.
    pub checked: bool,
    /// True when every gating check passed on the work as it is now.
    pub gates_passed: bool,
    /// The tokens and cost of its agents' model calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Tokens>,
    /// Milliseconds from its agent's spawn to its last idle (or until now
    /// while it works).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_ms: Option<u64>,
    /// Files changed since the group's base, uncommitted work included.
    pub files: usize,
    /// Lines added.
    pub added: u64,
    /// Lines removed.
    pub removed: u64,
    /// The files that would conflict with the base environment's tip.
    #[serde(default)]
    pub conflicts_with_base: Vec<String>,
    /// The other variants its work would conflict with.
    #[serde(default)]
    pub conflicts_with: Vec<u32>,
    /// CPU time its checks' latest runs used together, in milliseconds
    /// (sampled): part of the variant's usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checks_cpu_ms: Option<u64>,
    /// Its place in the ranking (1: best), among the variants still there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
}

/// A variant group's scoreboard, and the ranking a pick by rule follows:
/// every gating check passed, then fewest conflicts with the base, then least
/// cost, then shortest time.
///
/// # Format
///
/// ```json
/// {"group":"login","base":"3f2a…","base_environment":"main","checks":["lint","test"],
///  "variants":[{"variant":1,"environment":"login-1","checks":[…],"checked":true,
///               "gates_passed":true,"files":2,"added":10,"removed":1,
///               "conflicts_with_base":[],"conflicts_with":[2],"rank":1},…],
///  "ranking":[1,3,2],"best":1}
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScoresInfo {
    /// The group.
    pub group: String,
    /// The commit every variant started from.
    pub base: String,
    /// The environment it came from.
    pub base_environment: String,
    /// The names of `[checks]`.
    #[serde(default)]
    pub checks: Vec<String>,
    /// The variants still there, by number.
    pub variants: Vec<VariantScore>,
    /// Variant numbers, best first.
    #[serde(default)]
    pub ranking: Vec<u32>,
    /// The variant a pick by rule would take: none when no variant passed
    /// every gating check, or the first two tie (`why` says which).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best: Option<u32>,
    /// Why there is no best.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// The variant picked, once one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub picked: Option<u32>,
}

/// The answer to MergeVariants.
///
/// # Format
///
/// ```json
/// {"group":"login","into":"main","landed":[{"variant":1,"commit":"9c1d…"}],
///  "stopped":{"variant":3,"files":["src/login.rs"],"message":"…"},"dry_run":false}
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergedInfo {
    /// The group.
    pub group: String,
    /// The environment merged into.
    pub into: String,
    /// The order tried, variant numbers.
    pub order: Vec<u32>,
    /// The variants landed, in order, with the target's tip after each.
    pub landed: Vec<LandedInfo>,
    /// The variant the merging stopped at (a conflict), nothing of it applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<StoppedInfo>,
}

/// One variant landed by MergeVariants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LandedInfo {
    /// Its number.
    pub variant: u32,
    /// The target's tip after it landed.
    pub commit: String,
}

/// Where MergeVariants stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoppedInfo {
    /// The variant that could not land.
    pub variant: u32,
    /// The files that conflict.
    #[serde(default)]
    pub files: Vec<String>,
    /// Why.
    pub message: String,
}
