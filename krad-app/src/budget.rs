//! What agents may cost: each terminal's limit (Spawn's `max_cost_usd`, the
//! config's `[budget]`) and each variant group's, checked whenever the
//! spend of a terminal changes (the spend reader, spend.rs). An agent whose cost (or
//! whose group's) reaches its limit is interrupted with its profile's
//! interrupt keys and shown `asking`, `state_source` `budget`, "budget
//! reached: $X of $Y" — held there ([`crate::store::set_state`]) until the
//! limit is raised past its cost (Budget), the user sends to it or types
//! into it (going on past the limit: not stopped again until a limit is set
//! anew), or it exits. A cost null (a model without a price) stops nothing.

use std::sync::Arc;

use krad_bus::protocol::{AgentRecord, AgentState, Dollars, StateSource};

use crate::store::{Store, set_state};

/// The budgets: the agents' records they hold. Terminals' limits live in
/// their records, variant groups' in the groups' records.
pub(crate) struct Budgets {
    /// The config's `[budget] max_group_cost_usd`, for a group given none.
    default_group_limit: Option<Dollars>,
    store: Arc<Store>,
}

impl Budgets {
    pub(crate) fn new(store: Arc<Store>, default_group_limit: Option<Dollars>) -> Budgets {
        Budgets {
            default_group_limit,
            store,
        }
    }

    fn of(&self, group: &str) -> Option<Dollars> {
        self.store.group(group).and_then(|g| g.max_cost_usd)
    }

    /// A new group's limit: the one asked for, else the config's.
    pub(crate) fn group_limit(&self, asked: Option<Dollars>) -> Option<Dollars> {
        asked.or(self.default_group_limit)
    }

    fn put_group_limit(&self, group: &str, limit: Option<Dollars>) -> std::io::Result<()> {
        self.store.update_group(group, |g| {
            if let Some(g) = g {
                g.max_cost_usd = limit;
            }
        })
    }

    /// The group's members and what they cost together.
    fn group_cost(&self, group: &str) -> (Vec<AgentRecord>, Dollars) {
        let members: Vec<AgentRecord> = self
            .store
            .list(None)
            .into_iter()
            .filter(|r| r.group.as_deref() == Some(group))
            .collect();
        let sum = members.iter().filter_map(cost).map(|c| c.0).sum();
        (members, Dollars(sum))
    }
}

/// What a record's model calls cost, when known.
fn cost(record: &AgentRecord) -> Option<Dollars> {
    record.tokens.as_ref()?.cost_usd
}

/// Whether the record is held at its cost limit.
pub(crate) fn held(record: &AgentRecord) -> bool {
    record.state == AgentState::Asking && record.state_source == StateSource::Budget
}

impl Budgets {
    /// Checks the limits of the terminals whose tokens changed (`changed`) and
    /// of their groups; stops each agent that reached one.
    pub(crate) async fn check(&self, changed: &[u64]) {
        let mut stops: Vec<(u64, String)> = Vec::new();
        let mut groups_seen: Vec<String> = Vec::new();
        for &id in changed {
            let Some(record) = self.store.record(id) else {
                continue;
            };
            if let (Some(spent), Some(limit)) = (cost(&record), record.max_cost_usd)
                && spent >= limit
            {
                stops.push((id, format!("budget reached: {spent} of {limit}")));
            }
            let Some(group) = record.group.clone() else {
                continue;
            };
            if groups_seen.contains(&group) {
                continue;
            }
            let Some(limit) = self.of(&group) else {
                continue;
            };
            let (members, spent) = self.group_cost(&group);
            if spent >= limit {
                for member in members {
                    stops.push((
                        member.terminal,
                        format!("budget reached: {spent} of {limit} (group {group})"),
                    ));
                }
            }
            groups_seen.push(group);
        }
        for (id, message) in stops {
            self.stop(id, message).await;
        }
    }

    /// Interrupts terminal `id` and holds it `asking` with `message`, unless it
    /// has exited, is held already or the user went on past its limit.
    async fn stop(&self, id: u64, message: String) {
        let Some((terminal, keys, stoppable)) = self.store.with(id, |e| {
            let stoppable =
                e.record.state != AgentState::Exited && !held(&e.record) && !e.budget_waived;
            (e.terminal.clone(), e.profile.interrupt.clone(), stoppable)
        }) else {
            return;
        };
        if !stoppable {
            return;
        }
        tracing::info!(terminal = id, %message, "interrupting an agent at its cost limit");
        if !keys.is_empty() && !matches!(terminal.write(keys.into_bytes()).await, Ok(Ok(()))) {
            tracing::warn!(terminal = id, "cannot type the interrupt keys");
        }
        crate::crash_point::here("budget-stop");
        self.store.update(id, |e| {
            e.record.state != AgentState::Exited
                && set_state(
                    &mut e.record,
                    AgentState::Asking,
                    StateSource::Budget,
                    Some(message),
                )
        });
    }

    /// Terminal `id`'s user sent to it: held, it goes on past its limit.
    pub(crate) fn answered(&self, id: u64) {
        self.store.update(id, |e| {
            if !held(&e.record) {
                return false;
            }
            e.budget_waived = true;
            set_state(&mut e.record, AgentState::Idle, StateSource::Input, None)
        });
    }

    /// Sets terminal `id`'s limit; a held agent whose cost is now below it goes
    /// idle. Its record after.
    pub(crate) fn set_terminal_limit(
        &self,
        id: u64,
        limit: Option<Dollars>,
    ) -> Option<AgentRecord> {
        self.store.update(id, |e| {
            let mut changed = e.record.max_cost_usd != limit;
            e.record.max_cost_usd = limit;
            e.budget_waived = false;
            let under = match (cost(&e.record), limit) {
                (Some(spent), Some(limit)) => spent < limit,
                _ => true,
            };
            if held(&e.record) && under {
                let message = limit.map_or_else(
                    || "budget limit taken away".to_owned(),
                    |l| format!("budget raised to {l}"),
                );
                changed |= set_state(
                    &mut e.record,
                    AgentState::Idle,
                    StateSource::Budget,
                    Some(message),
                );
            }
            changed
        })
    }

    /// Sets group `group`'s limit; its held variants go idle once the group's
    /// cost is below it. The group's records after.
    pub(crate) fn set_group_limit_now(
        &self,
        group: &str,
        limit: Option<Dollars>,
    ) -> std::io::Result<Vec<AgentRecord>> {
        self.put_group_limit(group, limit)?;
        let (members, spent) = self.group_cost(group);
        let under = limit.is_none_or(|l| spent < l);
        Ok(members
            .into_iter()
            .filter_map(|member| {
                self.store.update(member.terminal, |e| {
                    e.budget_waived = false;
                    let own_under = match (cost(&e.record), e.record.max_cost_usd) {
                        (Some(spent), Some(limit)) => spent < limit,
                        _ => true,
                    };
                    if !(held(&e.record) && under && own_under) {
                        return false;
                    }
                    let message = limit.map_or_else(
                        || "group budget limit taken away".to_owned(),
                        |l| format!("group budget raised to {l}"),
                    );
                    set_state(
                        &mut e.record,
                        AgentState::Idle,
                        StateSource::Budget,
                        Some(message),
                    )
                })
            })
            .collect())
    }
}
