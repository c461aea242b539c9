//! The agents API v1 on the wire, in one place for server and client alike:
//! the envelope, the callers, the responses, the error codes and the limits.

mod agent;
mod ask;
mod attach;
mod encoded;
mod envelope;
mod environment;
mod error;
mod extension;
mod host;
pub mod keys;
mod response;
mod scores;
mod stream;
mod tokens;

pub use agent::{AgentRecord, AgentState, StateSource, Tenths, Usage};
pub use ask::{AnsweredInfo, AskAnswer, AskInfo, DecidedBy};
pub use attach::{
    AttachInput, AttachMessage, DataInfo, ExitedInfo, ResizeInfo, ScreenInfo, TmuxInfo,
};
pub use encoded::{EncodedAnswer, RecordJson, SnapshotLine, StreamLine};
pub use envelope::{
    API_VERSION, Caller, Envelope, OutgoingEnvelope, RawRequest, RequestId, TerminalRef, Token,
};
pub use environment::{
    ArchiveInfo, BaseConflicts, ChangesInfo, CollectAction, CollectedEnvironment, CollectedInfo,
    ConflictPair, ConflictsEnvironment, ConflictsInfo, DryRunInfo, EnvironmentInfo,
    EnvironmentKind, EnvironmentStatus, FileChange, FileStatus, KeptBecause, LiveTerminal,
    PickedInfo, PortInUse, ProcessInside, SetupInfo, UpdatedInfo, VariantInfo, VariantsInfo,
};
pub use error::{ApiError, ErrorCode};
pub use extension::{CodeResultInfo, ExtensionInfo, ExtensionState, ToolInfo, ToolResultInfo};
pub use host::{HostStatus, LinkState};
pub use response::{Decoded, OutputInfo, Response, SentInfo, Streamed, TypedAnswer, Waited};
pub use scores::{
    CheckOutcome, CheckResultInfo, LandedInfo, MergedInfo, ScoresInfo, StoppedInfo, VariantScore,
};
pub use stream::{
    HeartbeatInfo, RemovedInfo, SampledAgent, SampledInfo, SnapshotInfo, StreamMessage,
};
pub use tokens::{Dollars, Tokens};

/// The build of this crate, reported by Hello and in api.json.
pub const BUILD: &str = env!("CARGO_PKG_VERSION");

/// The longest request line, its `\n` included (section 2).
pub const MAX_LINE: usize = 64 * 1024;

/// The longest response line; anything that could exceed it is cut and marked `truncated`.
pub const MAX_RESPONSE: usize = 8 * 1024 * 1024;

/// A count and its noun, as messages say it: `1 file`, `3 files`, `0 files`
/// (the noun's plural is the noun and an `s`).
pub fn counted(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// A commit id as messages show it: its first 10 characters.
pub fn short_commit(commit: &str) -> &str {
    commit.get(..10).unwrap_or(commit)
}

/// The message of `unsupported_api_version`, exactly as the seed spells it.
pub fn unsupported_version_message(asked: &serde_json::Number) -> String {
    format!("This app serves the agents API v{API_VERSION}, not v{asked}")
}

#[cfg(test)]
mod tests {
    use super::{counted, short_commit};

    #[test]
    fn a_count_takes_its_plural_unless_it_is_one() {
        assert_eq!(counted(1, "file"), "1 file");
        assert_eq!(counted(0, "file"), "0 files");
        assert_eq!(counted(3, "insertion"), "3 insertions");
        assert_eq!(short_commit("0123456789abcdef"), "0123456789");
        assert_eq!(short_commit("abc"), "abc");
    }
}
