//! The messages of a SubscribeAgents stream (section 6).

use serde::{Deserialize, Serialize};

use super::agent::{AgentRecord, Usage};
use super::tokens::Tokens;

/// The first message of a stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotInfo {
    /// The global rev the snapshot was taken at.
    pub rev: u64,
    /// The agents (all of them, or those changed after `since_rev`).
    pub agents: Vec<AgentRecord>,
    /// Terminals removed after `since_rev` (only when resuming).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<RemovedInfo>,
    /// True when this is the whole state and the reader must drop what it had.
    pub fresh: bool,
}

/// A terminal that was closed and is gone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemovedInfo {
    /// Its id.
    pub terminal: u64,
    /// The rev of the removal.
    pub rev: u64,
}

/// Sent every 15 s without a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatInfo {
    /// The global rev now.
    pub rev: u64,
}

/// What the sampler measured since the last such line: the terminals whose
/// `usage` or `tokens` it changed, each with both as its record has them now.
/// Not a change: no record's rev moves, and `rev` is that of the last change
/// the stream has sent (so it never runs ahead of the lines before it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampledInfo {
    /// The rev of the last change this stream has sent.
    pub rev: u64,
    /// The terminals sampled anew, by id.
    pub agents: Vec<SampledAgent>,
}

/// One terminal's sampled values, as its record has them now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampledAgent {
    /// Its id.
    pub terminal: u64,
    /// Its record's `usage` (null: none yet).
    pub usage: Option<Usage>,
    /// Its record's `tokens` (null: none yet).
    pub tokens: Option<Tokens>,
}

/// One message of a SubscribeAgents stream.
///
/// # Format
///
/// ```json
/// {"Snapshot":{"rev":120,"agents":[…],"fresh":true}}
/// {"Agent":{…}}
/// {"Removed":{"terminal":4,"rev":121}}
/// {"Heartbeat":{"rev":121}}
/// {"Sampled":{"rev":121,"agents":[{"terminal":4,"usage":{…},"tokens":{…}}]}}
/// "ShuttingDown"
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StreamMessage {
    /// The state when the stream started.
    Snapshot(SnapshotInfo),
    /// An agent after a change.
    Agent(Box<AgentRecord>),
    /// A terminal was removed.
    Removed(RemovedInfo),
    /// Nothing changed for a while.
    Heartbeat(HeartbeatInfo),
    /// CPU, memory or tokens sampled anew (at most once per sample period).
    Sampled(SampledInfo),
    /// The app is stopping; the stream ends.
    ShuttingDown,
}

impl StreamMessage {
    /// The message as one line of JSON, `\n` included.
    pub fn to_line(&self) -> Vec<u8> {
        let mut line = serde_json::to_vec(self).unwrap_or_else(|_| b"\"ShuttingDown\"".to_vec());
        line.push(b'\n');
        line
    }
}
