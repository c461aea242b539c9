//! Agent records serialized once per change, and the lines spliced from them.
//!
//! The app keeps each agent's JSON beside its record ([`RecordJson`], rebuilt
//! when the record changes) and answers List and Check ([`EncodedAnswer`]) and
//! writes every subscriber's stream ([`StreamLine`]) by splicing those bytes,
//! instead of cloning and serializing every record per request and per
//! subscriber. Each line is byte for byte what serializing the typed
//! [`Response`](super::Response) or [`StreamMessage`] gives (the tests below
//! hold them side by side).

use std::sync::Arc;

use super::agent::AgentRecord;
use super::stream::{RemovedInfo, StreamMessage};

/// One agent record as compact JSON, with its rev: cheap to clone (shared).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordJson {
    rev: u64,
    json: Arc<str>,
}

impl RecordJson {
    /// Serializes `record` (once per change).
    pub fn of(record: &AgentRecord) -> RecordJson {
        // A record of plain strings and numbers always serializes.
        let json = serde_json::to_string(record).unwrap_or_else(|_| "null".to_owned());
        RecordJson {
            rev: record.rev,
            json: json.into(),
        }
    }

    /// The record's rev when it was serialized.
    pub fn rev(&self) -> u64 {
        self.rev
    }

    /// The JSON object.
    pub fn as_str(&self) -> &str {
        &self.json
    }

    fn len(&self) -> usize {
        self.json.len()
    }
}

/// A whole answer line (`\n` included), spliced from cached records or kept
/// whole (Hello's, List's while no agent changes): cheap to clone (shared).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedAnswer(Arc<[u8]>);

impl EncodedAnswer {
    /// `{"Agent":{…}}`: the answer to Check (and Spawn, Wait with `target`).
    pub fn agent(record: &RecordJson) -> EncodedAnswer {
        let mut line = Vec::with_capacity(record.len() + 12);
        line.extend_from_slice(b"{\"Agent\":");
        line.extend_from_slice(record.as_str().as_bytes());
        line.extend_from_slice(b"}\n");
        EncodedAnswer(line.into())
    }

    /// `{"Agents":[{…},…]}`: the answer to List.
    pub fn agents<'r>(records: impl Iterator<Item = &'r RecordJson> + Clone) -> EncodedAnswer {
        let size: usize = records.clone().map(|r| r.len() + 1).sum();
        let mut line = Vec::with_capacity(size + 16);
        line.extend_from_slice(b"{\"Agents\":");
        push_array(&mut line, records);
        line.extend_from_slice(b"}\n");
        EncodedAnswer(line.into())
    }

    /// A response serialized once and answered as often as asked (Hello's).
    pub fn of(response: &super::Response) -> EncodedAnswer {
        EncodedAnswer(response.to_line().into())
    }

    /// The line's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

fn push_array<'r>(out: &mut Vec<u8>, records: impl IntoIterator<Item = &'r RecordJson>) {
    out.push(b'[');
    for (i, record) in records.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(record.as_str().as_bytes());
    }
    out.push(b']');
}

/// The first message of a SubscribeAgents stream, its agents kept as JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotLine {
    /// The global rev the snapshot was taken at.
    pub rev: u64,
    /// The agents (all of them, or those changed after `since_rev`).
    pub agents: Vec<RecordJson>,
    /// Terminals removed after `since_rev` (only when resuming).
    pub removed: Vec<RemovedInfo>,
    /// True when this is the whole state.
    pub fresh: bool,
}

/// One message of a SubscribeAgents stream, ready to be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamLine {
    /// A message serialized when written (heartbeats, removals, shutdown).
    Message(StreamMessage),
    /// `{"Agent":{…}}` from the record's cached JSON.
    Agent(RecordJson),
    /// `{"Snapshot":{…}}` from the records' cached JSON.
    Snapshot(SnapshotLine),
    /// `{"Sampled":{"rev":…,"agents":[…]}}`: `agents` is the JSON array of
    /// [`SampledAgent`](super::SampledAgent)s, serialized once per sample and
    /// shared by every subscriber; `rev` is each stream's own.
    Sampled {
        /// The rev of the last change the stream has sent.
        rev: u64,
        /// The JSON array of the sampled agents.
        agents: Arc<str>,
    },
}

impl From<StreamMessage> for StreamLine {
    fn from(message: StreamMessage) -> StreamLine {
        StreamLine::Message(message)
    }
}

impl StreamLine {
    /// Whether this is `"ShuttingDown"`, the last message of a stream.
    pub fn is_shutting_down(&self) -> bool {
        matches!(self, StreamLine::Message(StreamMessage::ShuttingDown))
    }

    /// Appends the message as one line of JSON, `\n` included.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        match self {
            StreamLine::Message(message) => push_serialized(out, message),
            StreamLine::Agent(record) => {
                out.extend_from_slice(b"{\"Agent\":");
                out.extend_from_slice(record.as_str().as_bytes());
                out.extend_from_slice(b"}\n");
            }
            StreamLine::Snapshot(snapshot) => {
                out.extend_from_slice(b"{\"Snapshot\":{\"rev\":");
                out.extend_from_slice(snapshot.rev.to_string().as_bytes());
                out.extend_from_slice(b",\"agents\":");
                push_array(out, &snapshot.agents);
                if !snapshot.removed.is_empty() {
                    out.extend_from_slice(b",\"removed\":");
                    if serde_json::to_writer(&mut *out, &snapshot.removed).is_err() {
                        out.extend_from_slice(b"[]");
                    }
                }
                out.extend_from_slice(if snapshot.fresh {
                    b",\"fresh\":true}}\n"
                } else {
                    b",\"fresh\":false}}\n"
                });
            }
            StreamLine::Sampled { rev, agents } => {
                out.extend_from_slice(b"{\"Sampled\":{\"rev\":");
                out.extend_from_slice(rev.to_string().as_bytes());
                out.extend_from_slice(b",\"agents\":");
                out.extend_from_slice(agents.as_bytes());
                out.extend_from_slice(b"}}\n");
            }
        }
    }

    /// The message as one line of JSON, `\n` included.
    pub fn to_line(&self) -> Vec<u8> {
        let mut line = Vec::new();
        self.write_to(&mut line);
        line
    }
}

fn push_serialized(out: &mut Vec<u8>, message: &StreamMessage) {
    let start = out.len();
    if serde_json::to_writer(&mut *out, message).is_err() {
        out.truncate(start);
        out.extend_from_slice(b"\"ShuttingDown\"");
    }
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{AgentState, Response, SnapshotInfo, StateSource};

    fn record(terminal: u64, host: Option<&str>) -> AgentRecord {
        AgentRecord {
            terminal,
            environment: "main".into(),
            host: host.map(str::to_owned),
            name: Some("a \"quoted\" name\twith\u{1} controls and ✳ unicode".into()),
            profile: "claude".into(),
            command: vec!["sleep".into(), "3600".into()],
            lead: terminal == 1,
            parent: None,
            group: Some("g".into()),
            variant: Some(2),
            state: AgentState::Working,
            state_source: StateSource::Hook,
            message: Some("back\\slash\nnewline".into()),
            exit_code: None,
            signal: Some(9),
            pid: Some(4321),
            title: None,
            started_at: "2026-12-01T00:00:00.000Z".into(),
            state_since: "2026-12-01T00:00:01.000Z".into(),
            rev: 57 + terminal,
            usage: None,
            tokens: None,
            max_cost_usd: None,
            hook_problem: None,
            queue_place: None,
        }
    }

    fn records() -> Vec<AgentRecord> {
        vec![
            record(1, None),
            record(2, Some("build-box")),
            record(3, None),
        ]
    }

    fn jsons(records: &[AgentRecord]) -> Vec<RecordJson> {
        records.iter().map(RecordJson::of).collect()
    }

    #[test]
    fn list_answer_is_the_typed_answer_byte_for_byte() {
        let records = records();
        assert_eq!(
            EncodedAnswer::agents(jsons(&records).iter()).as_bytes(),
            Response::Agents(records.clone()).to_line()
        );
        assert_eq!(
            EncodedAnswer::agents([].iter()).as_bytes(),
            Response::Agents(Vec::new()).to_line()
        );
    }

    #[test]
    fn check_answer_is_the_typed_answer_byte_for_byte() {
        let one = record(2, Some("h"));
        assert_eq!(
            EncodedAnswer::agent(&RecordJson::of(&one)).as_bytes(),
            Response::Agent(Box::new(one.clone())).to_line()
        );
        assert_eq!(RecordJson::of(&one).rev(), one.rev);
    }

    #[test]
    fn stream_lines_are_the_typed_messages_byte_for_byte() {
        let records = records();
        let agent = StreamLine::Agent(RecordJson::of(&records[1]));
        assert_eq!(
            agent.to_line(),
            StreamMessage::Agent(Box::new(records[1].clone())).to_line()
        );
        for (removed, fresh) in [
            (Vec::new(), true),
            (
                vec![RemovedInfo {
                    terminal: 9,
                    rev: 70,
                }],
                false,
            ),
        ] {
            let line = StreamLine::Snapshot(SnapshotLine {
                rev: 120,
                agents: jsons(&records),
                removed: removed.clone(),
                fresh,
            });
            let typed = StreamMessage::Snapshot(SnapshotInfo {
                rev: 120,
                agents: records.clone(),
                removed,
                fresh,
            });
            assert_eq!(line.to_line(), typed.to_line());
        }
        let sampled: Vec<_> = records
            .iter()
            .map(|r| crate::protocol::SampledAgent {
                terminal: r.terminal,
                usage: r.usage.clone(),
                tokens: r.tokens.clone(),
            })
            .collect();
        let line = StreamLine::Sampled {
            rev: 121,
            agents: serde_json::to_string(&sampled).unwrap().into(),
        };
        let typed = StreamMessage::Sampled(crate::protocol::SampledInfo {
            rev: 121,
            agents: sampled,
        });
        assert_eq!(line.to_line(), typed.to_line());
        let shutting = StreamLine::from(StreamMessage::ShuttingDown);
        assert!(shutting.is_shutting_down());
        assert_eq!(shutting.to_line(), b"\"ShuttingDown\"\n");
    }
}
