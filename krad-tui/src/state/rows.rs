//! The list's rows: agents grouped by environment (or by variant group, for
//! the variants of one task), groups in a stable order (main first), agents
//! by state (`asking` first, then `working`) then id; folded groups show
//! their header only; the filter keeps the agents whose text matches.
//!
//! Pure functions of the records; must never import the terminal or the bus's
//! client.

use std::collections::{BTreeMap, BTreeSet};

use krad_bus::protocol::{AgentRecord, AgentState};

/// A row of the list.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum RowKey {
    /// A group's header, by its key (`env:<name>` or `group:<name>`).
    Group(String),
    /// An agent, by terminal id.
    Agent(u64),
}

/// The key of the group an agent is listed under.
pub(crate) fn group_key(record: &AgentRecord) -> String {
    match &record.group {
        Some(group) => format!("group:{group}"),
        None => format!("env:{}", record.environment),
    }
}

/// The environment a group key names, when it names one.
pub(crate) fn environment_of_group(key: &str) -> Option<&str> {
    key.strip_prefix("env:")
}

/// The variant group a group key names, when it names one.
pub(crate) fn variant_group_of(key: &str) -> Option<&str> {
    key.strip_prefix("group:")
}

/// What a group's header reads: the environment's name, or `variants <group>`.
pub(crate) fn group_title(key: &str) -> String {
    match (environment_of_group(key), variant_group_of(key)) {
        (Some(environment), _) => environment.to_owned(),
        (None, Some(group)) => format!("variants {group}"),
        (None, None) => key.to_owned(),
    }
}

/// Where a state sorts: asking first, then working, exited last.
pub(crate) fn state_rank(state: AgentState) -> u8 {
    match state {
        AgentState::Asking => 0,
        AgentState::Working => 1,
        AgentState::Starting => 2,
        AgentState::Queued => 3,
        AgentState::Idle => 4,
        AgentState::Other => 5,
        AgentState::Exited => 6,
    }
}

/// Whether the agent's text contains the filter (case is ignored).
pub(crate) fn matches(record: &AgentRecord, filter: &str) -> bool {
    if filter.is_empty() {
        return true;
    }
    let filter = filter.to_lowercase();
    let id = record.terminal.to_string();
    let fields = [
        Some(id.as_str()),
        record.name.as_deref(),
        Some(record.environment.as_str()),
        record.group.as_deref(),
        Some(record.profile.as_str()),
        Some(record.state.as_str()),
        record.message.as_deref(),
        record.host.as_deref(),
        record.title.as_deref(),
    ];
    fields
        .into_iter()
        .flatten()
        .any(|field| field.to_lowercase().contains(&filter))
}

/// The rows in order.
pub(crate) fn visible_rows(
    agents: &BTreeMap<u64, AgentRecord>,
    collapsed: &BTreeSet<String>,
    filter: &str,
) -> Vec<RowKey> {
    let mut groups: BTreeMap<(u8, String), Vec<&AgentRecord>> = BTreeMap::new();
    for record in agents.values().filter(|r| matches(r, filter)) {
        let key = group_key(record);
        // main first, then environments, then variant groups, each by name.
        let order = match key.as_str() {
            "env:main" => 0,
            k if k.starts_with("env:") => 1,
            _ => 2,
        };
        groups.entry((order, key)).or_default().push(record);
    }
    let mut rows = Vec::with_capacity(agents.len() + groups.len());
    for ((_, key), mut members) in groups {
        let folded = collapsed.contains(&key);
        rows.push(RowKey::Group(key));
        if folded {
            continue;
        }
        members.sort_by_key(|r| (state_rank(r.state), r.terminal));
        rows.extend(members.into_iter().map(|r| RowKey::Agent(r.terminal)));
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::record;
    use serde_json::json;

    #[test]
    fn grouped_sorted_folded_and_filtered() {
        let agents: BTreeMap<u64, AgentRecord> = [
            record(json!({"terminal":1,"state":"idle"})),
            record(json!({"terminal":2,"state":"working","environment":"feat"})),
            record(json!({"terminal":3,"state":"asking"})),
            record(json!({"terminal":4,"state":"working","name":"fix-login"})),
            record(json!({"terminal":5,"environment":"g-1","group":"g","variant":1})),
        ]
        .into_iter()
        .map(|r| (r.terminal, r))
        .collect();
        let rows = visible_rows(&agents, &BTreeSet::new(), "");
        use RowKey::*;
        assert_eq!(
            rows,
            [
                Group("env:main".into()),
                Agent(3),
                Agent(4),
                Agent(1),
                Group("env:feat".into()),
                Agent(2),
                Group("group:g".into()),
                Agent(5),
            ]
        );
        let folded: BTreeSet<String> = ["env:main".to_owned()].into();
        assert_eq!(visible_rows(&agents, &folded, "").len(), 5);
        assert_eq!(
            visible_rows(&agents, &BTreeSet::new(), "LOGIN"),
            [Group("env:main".into()), Agent(4)]
        );
        assert_eq!(group_title("group:g"), "variants g");
    }
}
