//! Asking (Ask): a terminal's question raised, and its wait for the decision.
//! While it is open the agent is `asking`; when decided, `working` again —
//! except when it expired: then the agent asks in its own terminal, and stays
//! `asking` until it says otherwise (a hook, its exit, keys that answer it).

use krad_bus::protocol::{
    AgentState, AnsweredInfo, ApiError, AskAnswer, DecidedBy, StateSource, TerminalRef,
};
use krad_bus::request::ask::{Ask, AskKind};

use crate::asks::{AskBoard, Raised};

use crate::store::{Store, set_state};

/// Leaves the ask when the request is dropped (client gone, deadline), so that
/// an ask nobody waits for any more is decided by `program`.
struct LeaveOnDrop<'a> {
    asks: &'a AskBoard,
    store: &'a Store,
    ask: String,
    terminal: u64,
    /// Whether the agent is taken as working again once the ask is decided:
    /// yes when a person decided it; not when it expired (the question moved to
    /// the agent's own terminal), nor when the agent went away from it and tells
    /// its own state (its hooks or its screen say what it does next).
    settle: bool,
}

impl Drop for LeaveOnDrop<'_> {
    fn drop(&mut self) {
        self.asks.leave(&self.ask);
        if self.settle {
            settle(self.asks, self.store, self.terminal);
        }
    }
}

/// Raises terminal `me`'s ask (or joins the same one) and waits for its
/// decision: a person's, the program's, or its expiry.
pub(crate) async fn ask(
    asks: &AskBoard,
    store: &Store,
    me: &TerminalRef,
    request: Ask,
) -> Result<AnsweredInfo, ApiError> {
    let (info, mut decision) = match asks.raise(me, &request) {
        Err(e) => return Err(e),
        Ok(Raised::Decided(answered)) => return Ok(answered),
        Ok(Raised::Open {
            info,
            decision,
            fresh,
        }) => {
            if fresh {
                store.update(me.terminal, |e| {
                    if request.kind == AskKind::Permission {
                        e.permission_asks += 1;
                    }
                    e.record.state != AgentState::Exited
                        && set_state(
                            &mut e.record,
                            AgentState::Asking,
                            StateSource::Hook,
                            Some(info.title.clone()),
                        )
                });
            }
            (info, decision)
        }
    };
    let tells_its_state = store
        .with(me.terminal, |e| e.tells_its_state())
        .unwrap_or(false);
    let mut waiting = LeaveOnDrop {
        asks,
        store,
        ask: info.ask.clone(),
        terminal: me.terminal,
        settle: !tells_its_state,
    };
    // The ask's own expiry (a joined ask keeps the first call's).
    let expiry = tokio::time::sleep(crate::asks::time_left(&info, std::time::SystemTime::now()));
    tokio::pin!(expiry);
    let answered = loop {
        if let Some(answered) = decision.borrow_and_update().clone() {
            break answered;
        }
        tokio::select! {
            changed = decision.changed() => {
                if changed.is_err() {
                    break asks
                        .decide(&info.ask, DecidedBy::Program, AskAnswer::Nothing, None)
                        .unwrap_or_else(|_| gone(&info.ask));
                }
            }
            () = &mut expiry => {
                // Nobody answered in time; a concurrent answer may have won.
                match asks.decide(&info.ask, DecidedBy::Timeout, AskAnswer::Nothing, None) {
                    Ok(answered) => break answered,
                    Err(_) => continue,
                }
            }
        }
    };
    waiting.settle = match answered.by {
        DecidedBy::Timeout => false,
        DecidedBy::Program => !tells_its_state,
        _ => true,
    };
    drop(waiting);
    Ok(answered)
}

fn gone(ask: &str) -> AnsweredInfo {
    AnsweredInfo {
        ask: ask.to_owned(),
        by: DecidedBy::Program,
        answer: AskAnswer::Nothing,
    }
}

/// Once its asks are decided, an agent left asking by them works again.
pub(crate) fn settle(asks: &AskBoard, store: &Store, terminal: u64) {
    if asks.has_open(terminal) {
        return;
    }
    store.update(terminal, |e| {
        e.record.state == AgentState::Asking
            && set_state(&mut e.record, AgentState::Working, StateSource::Hook, None)
    });
}
