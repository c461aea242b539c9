//! `Stats`: counters of the bus and the app, for operators and tests.

use std::collections::BTreeMap;

use super::{Call, RequestKind, Rights};
use serde::{Deserialize, Serialize};

/// The Stats request (no fields).
///
/// # Format
///
/// ```json
/// "Stats"
/// {"Stats":{"connections_open":1,"requests_total":12,"errors_by_code":{"not_found":2},
///           "waits_pending":0,"subscribers":0,"agents":0,"uptime_secs":30}}
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {}

/// The answer to Stats.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatsInfo {
    /// Connections open now, this one included.
    pub connections_open: u64,
    /// Requests answered since the app started (errors and `busy` included).
    pub requests_total: u64,
    /// Error answers since start, by code; codes never seen are left out.
    pub errors_by_code: BTreeMap<String, u64>,
    /// Requests waiting now (Wait, Check with `wait_secs`, …).
    pub waits_pending: u64,
    /// Open SubscribeAgents streams.
    pub subscribers: u64,
    /// Agents the app knows (exited ones included until closed).
    pub agents: u64,
    /// Seconds since the app started.
    pub uptime_secs: u64,
}

impl Call for Stats {
    const KIND: RequestKind = RequestKind::Stats;
    const RIGHTS: Rights = Rights::Anyone;
    const AT_MOST_ONCE: bool = false;
    type Answer = StatsInfo;
}
