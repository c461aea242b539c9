//! Environments and their work: the answers of Environments, CreateWorktree,
//! Changes, Conflicts, UpdateEnvironment, CollectEnvironments, RunVariants and
//! PickVariant.

use serde::{Deserialize, Serialize};

/// What kind of directory an environment is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EnvironmentKind {
    /// The repository the app was started in.
    Main,
    /// A git worktree the app created.
    Worktree,
    /// A directory on an SSH host.
    Ssh,
    /// A value this build does not know, from a newer app: shown, never acted on.
    #[serde(other)]
    Other,
}

/// Whether an environment can be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnvironmentStatus {
    /// Ready for agents.
    Ready,
    /// The config's setup command is running; agents start once it is done.
    SettingUp,
    /// The setup command failed; see `setup`.
    SetupFailed,
    /// The app's records name it, but its directory is gone.
    Missing,
    /// A value this build does not know, from a newer app: shown, never acted on.
    #[serde(other)]
    Other,
}

/// The outcome of the config's setup command in a new worktree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetupInfo {
    /// The command, as given to `sh -c`.
    pub command: String,
    /// Its exit code, once it ended (null while it runs or when killed).
    pub exit_code: Option<i32>,
    /// The end of what it printed (stdout and stderr).
    pub output: String,
}

/// An environment.
///
/// # Format
///
/// ```json
/// {"name":"fix-login","path":"/repo/.krad/worktrees/fix-login","branch":"krad/fix-login",
///  "base":"3f2a…","host":null,"kind":"worktree","group":null,"variant":null,
///  "terminals":[4],"status":"ready","setup":null}
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvironmentInfo {
    /// Its name (`main` for the repository).
    pub name: String,
    /// Its directory.
    pub path: String,
    /// Its branch (null for a detached main).
    pub branch: Option<String>,
    /// The commit it was created from (null for main).
    pub base: Option<String>,
    /// The SSH host it lives on (null: this machine).
    pub host: Option<String>,
    /// main, worktree or ssh.
    pub kind: EnvironmentKind,
    /// Its variant group.
    pub group: Option<String>,
    /// Its number in the group.
    pub variant: Option<u32>,
    /// The variant its group kept, once one was picked (PickVariant);
    /// absent before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_picked: Option<u32>,
    /// Its terminals' ids.
    pub terminals: Vec<u64>,
    /// Whether it can be used.
    pub status: EnvironmentStatus,
    /// The setup command's outcome, when the config has one.
    pub setup: Option<SetupInfo>,
    /// Its block of TCP ports (`[environments] ports`; the first is `KRAD_PORT`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<u16>,
    /// Ports of its block that a program outside the environment listens on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports_in_use: Vec<PortInUse>,
    /// When it was created (RFC 3339): kept in its record; for a record from
    /// before krad kept it, the modification time of the worktree's `.git`
    /// file (written once by `git worktree add`); absent for main or when
    /// neither is known. Its age is now minus this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    /// Its directory's disk use in bytes (not following symlinks, not counting
    /// other worktrees inside it), as last measured by the app's background
    /// measurement; absent until measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_bytes: Option<u64>,
    /// When `disk_bytes` was measured (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_measured_at: Option<String>,
    /// The tokens and cost of its terminals' model calls together (those
    /// still listed); absent when none has any. A variant group's total is
    /// the sum over its variants' environments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<super::Tokens>,
}

/// A port of an environment's block that another program holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortInUse {
    /// The port.
    pub port: u16,
    /// The process listening on it, when it can be seen.
    pub pid: Option<u32>,
}

/// How a file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileStatus {
    /// New (untracked files included).
    Added,
    /// Changed.
    Modified,
    /// Gone.
    Deleted,
    /// Moved (maybe changed too).
    Renamed,
    /// A value this build does not know, from a newer app: shown, never acted on.
    #[serde(other)]
    Other,
}

/// One changed file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    /// Its path now.
    pub path: String,
    /// Its path before, for a rename.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// How it changed.
    pub status: FileStatus,
    /// Lines added (0 for a binary file).
    pub added: u64,
    /// Lines removed (0 for a binary file).
    pub removed: u64,
    /// True for a binary file.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub binary: bool,
}

/// The answer to Changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangesInfo {
    /// The environment.
    pub environment: String,
    /// The commit it was created from.
    pub base: String,
    /// Its branch's commit now.
    pub head: String,
    /// Every changed file: committed, staged, unstaged and untracked.
    pub files: Vec<FileChange>,
    /// The patch, when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    /// True when the patch was cut at the response limit.
    pub truncated: bool,
}

/// One variant of a group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VariantInfo {
    /// Its number, from 1.
    pub variant: u32,
    /// Its environment.
    pub environment: String,
    /// Its agent's terminal.
    pub terminal: u64,
    /// Its agent's place in the app's queue, when it waits there for room
    /// under `[limits]` (RunVariants sent with `queue`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_place: Option<u32>,
}

/// The answer to RunVariants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VariantsInfo {
    /// The group's name.
    pub group: String,
    /// Its variants.
    pub variants: Vec<VariantInfo>,
}

/// The answer to PickVariant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PickedInfo {
    /// The group.
    pub group: String,
    /// The variant kept.
    pub variant: u32,
    /// Its branch.
    pub branch: String,
    /// The environment it was merged into (null for `how: branch`).
    pub into: Option<String>,
    /// The commit the target is at now (or the branch's, for `how: branch`).
    /// In a dry run nothing moved: the target's tip (the branch's, for
    /// `how: branch`) as it is.
    pub commit: String,
    /// Set only by a dry run (`dry_run: true`): what the pick would land.
    /// Nothing was changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<Box<DryRunInfo>>,
    /// Set only by a pick by rule (`best: true`): the scoreboard and the
    /// ranking it followed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scores: Option<Box<super::ScoresInfo>>,
}

/// What a PickVariant would land, from a dry run.
///
/// # Format
///
/// ```json
/// {"tree":"4b82…","message":"krad: merge variant 2 of login (krad/login-2)",
///  "files":["src/login.rs"],"uncommitted":["notes.md"],"conflicts":[]}
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DryRunInfo {
    /// The tree the target would have after the pick (for `how: branch`, the
    /// tree of the variant's branch, its uncommitted work included). Empty
    /// when there are conflicts.
    pub tree: String,
    /// The message of the commit the pick would make in the target (for `how:
    /// branch`, of the commit of the variant's uncommitted work); null when it
    /// makes none (a fast-forward, nothing new, a branch with nothing uncommitted).
    pub message: Option<String>,
    /// True when a merge would fast-forward the target to the variant's work.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fast_forward: bool,
    /// The files the pick would change in the target (for `how: branch`, every
    /// file the variant changed since its base).
    pub files: Vec<String>,
    /// The variant's uncommitted files, which the pick would commit on its
    /// branch first.
    pub uncommitted: Vec<String>,
    /// The files that conflict; when there are any the pick would answer
    /// `conflict` with them.
    pub conflicts: Vec<String>,
}

/// The answer to Conflicts: whether the environments' work — committed and
/// uncommitted — merges cleanly, pair by pair and each against its base.
///
/// # Format
///
/// ```json
/// {"environments":[{"name":"main","head":"3f2a…","tree":"9d1e…","uncommitted":false},
///                  {"name":"fix-login","head":"77b0…","tree":"c2c4…","uncommitted":true,
///                   "base":{"environment":"main","tip":"3f2a…","clean":true,"files":[]}}],
///  "pairs":[{"a":"main","b":"fix-login","clean":false,"files":["src/login.rs"]}]}
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConflictsInfo {
    /// The environments compared: main first, then by name.
    pub environments: Vec<ConflictsEnvironment>,
    /// Every pair of them in one repository (on one machine) that could be
    /// read, in the order of `environments`.
    pub pairs: Vec<ConflictPair>,
}

/// One environment in a Conflicts answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConflictsEnvironment {
    /// Its name.
    pub name: String,
    /// The SSH host it lives on (null: this machine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Its HEAD (null when it could not be read).
    pub head: Option<String>,
    /// Its working tree as a tree object, uncommitted work included (null when
    /// it could not be read).
    pub tree: Option<String>,
    /// Whether it has uncommitted work (untracked files included).
    pub uncommitted: bool,
    /// It against its base environment's current tip (null for main, and when
    /// its base environment is gone or could not be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<BaseConflicts>,
    /// Why it could not be compared (its directory is gone, its host is down).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// An environment's work merged with its base environment's current tip.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaseConflicts {
    /// The base environment.
    pub environment: String,
    /// Its tip (its HEAD's commit) now.
    pub tip: String,
    /// True when the two merge without conflicts.
    pub clean: bool,
    /// The files that conflict.
    pub files: Vec<String>,
}

/// Two environments' work merged together.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConflictPair {
    /// One environment.
    pub a: String,
    /// The other, later in `environments`.
    pub b: String,
    /// True when their work merges without conflicts.
    pub clean: bool,
    /// The files that conflict.
    pub files: Vec<String>,
}

/// The answer to UpdateEnvironment.
///
/// # Format
///
/// ```json
/// {"environment":"fix-login","base_environment":"main","base":"3f2a…",
///  "before":"77b0…","head":"e51c…"}
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdatedInfo {
    /// The environment.
    pub environment: String,
    /// Its base environment.
    pub base_environment: String,
    /// The base environment's tip it was brought up to, now its `base`.
    pub base: String,
    /// Its HEAD before.
    pub before: String,
    /// Its HEAD now (the same as `before` when it was already up to date).
    pub head: String,
    /// True when it was brought up by a fast-forward (it had no commits of its own).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fast_forward: bool,
}

/// One archive of Archives: work kept under `refs/krad/archive/<name>` when an
/// environment was closed.
///
/// # Format
///
/// ```json
/// {"name":"fix-login","commit":"3f2a…","date":"2026-12-01T22:40:00+00:00",
///  "subject":"krad: archive the uncommitted work of fix-login","uncommitted":true}
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchiveInfo {
    /// The archive's name: the ref is `refs/krad/archive/<name>`.
    pub name: String,
    /// The archived commit.
    pub commit: String,
    /// Its committer date (ISO 8601).
    pub date: String,
    /// Its subject line.
    pub subject: String,
    /// True when it is krad's commit of the uncommitted work: RestoreArchive
    /// makes its changes uncommitted files again.
    #[serde(default)]
    pub uncommitted: bool,
    /// The SSH host whose repository keeps it (absent: this machine's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// What CollectEnvironments did (or, in a dry run, would do) with one
/// environment that matched its selectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CollectAction {
    /// Archived and removed.
    Removed,
    /// A dry run: it would be archived and removed.
    WouldRemove,
    /// Left as it was; `kept` says why.
    Kept,
    /// A value this build does not know, from a newer app: shown, never acted on.
    #[serde(other)]
    Other,
}

/// Why CollectEnvironments kept an environment that matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeptBecause {
    /// It has live terminals (listed in `terminals`): close them first.
    LiveTerminals,
    /// Another program has its working directory in it (listed in `processes`).
    ProcessInside,
    /// The config's teardown command failed (its output in `reason`).
    TeardownFailed,
    /// It is still being created or set up.
    NotReady,
    /// Archiving or removing it failed (git, the host): see `reason`.
    Failed,
    /// A value this build does not know, from a newer app: shown, never acted on.
    #[serde(other)]
    Other,
}

/// A live terminal that keeps an environment from being collected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveTerminal {
    /// Its id.
    pub terminal: u64,
    /// Its name, if it has one.
    pub name: Option<String>,
    /// Its profile.
    pub profile: String,
}

/// A process (not krad's) whose working directory is inside an environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessInside {
    /// Its pid.
    pub pid: u32,
    /// Its command line (or its name, when the command line cannot be read).
    pub command: String,
}

/// One environment CollectEnvironments selected.
///
/// # Format
///
/// ```json
/// {"name":"spike","action":"kept","kept":"live_terminals","reason":"it has 1 live terminal: 7 (claude); close it first",
///  "terminals":[{"terminal":7,"name":"fixer","profile":"claude"}],"bytes":1048576}
/// {"name":"done","action":"removed","reason":"merged: its changes are in HEAD as one commit by patch-id (squash-merged)",
///  "archive":"refs/krad/archive/done","bytes":52428800}
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollectedEnvironment {
    /// The environment.
    pub name: String,
    /// Its SSH host (absent: this machine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// What was done.
    pub action: CollectAction,
    /// Why it was kept, when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<KeptBecause>,
    /// In words: why it matched, or why it was kept.
    pub reason: String,
    /// The archive ref its tip was recorded under (absent in a dry run, when
    /// kept, or when it had no tip to keep).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive: Option<String>,
    /// Its disk use in bytes: freed when removed (from the last measurement,
    /// or measured just before); absent when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// When it was created (RFC 3339), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    /// The live terminals that keep it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub terminals: Vec<LiveTerminal>,
    /// The processes inside it that keep it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<ProcessInside>,
}

/// The answer to CollectEnvironments.
///
/// # Format
///
/// ```json
/// {"dry_run":false,"environments":[{"name":"done","action":"removed",…}],"freed_bytes":52428800}
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollectedInfo {
    /// True when nothing was changed (what would happen is answered).
    #[serde(default)]
    pub dry_run: bool,
    /// The environments that matched, by name.
    pub environments: Vec<CollectedEnvironment>,
    /// The bytes freed (in a dry run: that would be) — the sum of `bytes` of
    /// the removed environments.
    pub freed_bytes: u64,
}
