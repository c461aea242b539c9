//! Each call the user can make, typed: the request sent, its answer turned
//! into what the UI shows, an error into a [`Refusal`]. Must never import the
//! state's logic or the terminal.

use std::time::Duration;

use krad_bus::client::{Answered, Client};
use krad_bus::protocol::{ErrorCode, Response};
use krad_bus::request::Call;
use krad_bus::request::asks::Asks;
use krad_bus::request::changes::Changes;
use krad_bus::request::create_worktree::CreateWorktree;
use krad_bus::request::environments::Environments;
use krad_bus::request::scores::Scores;

use crate::state::{Action, Outcome, Refusal};

/// How long past a request's own deadline the UI waits for its answer.
const MARGIN: Duration = Duration::from_secs(5);

/// Makes the call.
pub(super) fn run(client: &Client, action: &Action) -> Result<Outcome, Refusal> {
    let said = |text: String| Ok(Outcome::Said(text));
    match action.clone() {
        Action::Send(send) => {
            let sent = call(client, send)?;
            said(if sent.delivered {
                format!("sent to terminal {}", sent.terminal)
            } else {
                format!("queued for terminal {}", sent.terminal)
            })
        }
        Action::Spawn {
            new_worktree,
            spawn,
        } => {
            if let Some(name) = new_worktree {
                call(
                    client,
                    CreateWorktree {
                        name,
                        ..CreateWorktree::default()
                    },
                )?;
            }
            let agent = call(client, spawn)?;
            said(format!(
                "started terminal {} in {}",
                agent.terminal, agent.environment
            ))
        }
        Action::Close(close) => {
            let what = match (&close.target, &close.environment) {
                (Some(target), _) => format!("terminal {target}"),
                (None, Some(environment)) => format!("environment {environment}"),
                (None, None) => "nothing".to_owned(),
            };
            call(client, close)?;
            said(format!("closed {what}"))
        }
        Action::RunVariants(variants) => {
            let started = call(client, variants)?;
            said(format!(
                "started {} variants in group {}",
                started.variants.len(),
                started.group
            ))
        }
        Action::Pick(pick) => {
            if pick.best {
                // A pick by rule without a best is shown with the scoreboard.
                let scores = call(
                    client,
                    Scores {
                        group: pick.group.clone(),
                    },
                )?;
                if scores.best.is_none() {
                    return Ok(Outcome::NoBest(Box::new(scores)));
                }
            }
            let dry_run = pick.dry_run;
            let picked = call(client, pick.clone())?;
            if dry_run {
                Ok(Outcome::DryRun(pick, Box::new(picked)))
            } else {
                said(format!(
                    "picked variant {} of {} into {} ({})",
                    picked.variant,
                    picked.group,
                    picked.into.as_deref().unwrap_or("its base"),
                    crate::cells::short_commit(&picked.commit)
                ))
            }
        }
        Action::Budget(budget) => {
            let agents = call(client, budget)?;
            said(format!(
                "budget set for {}",
                crate::cells::counted(agents.len(), "agent")
            ))
        }
        Action::Rename(rename) => {
            let agent = call(client, rename)?;
            said(format!(
                "terminal {} is now {}",
                agent.terminal,
                agent.name.as_deref().unwrap_or("unnamed")
            ))
        }
        Action::Answer(answer) => {
            let ask = answer.ask.clone();
            call(client, answer)?;
            said(format!("answered {ask}"))
        }
        Action::Changes(environment) => call(
            client,
            Changes {
                environment,
                patch: Some(true),
            },
        )
        .map(Outcome::Changes),
        Action::Asks(terminal) => call(
            client,
            Asks {
                terminal: Some(terminal),
            },
        )
        .map(|asks| Outcome::Asks(terminal, asks)),
        Action::Environments => call(client, Environments {}).map(Outcome::Environments),
    }
}

/// One typed call; anything but its answer is a refusal.
fn call<R: Call>(client: &Client, request: R) -> Result<R::Answer, Refusal> {
    let refuse = |message: String, conflict: bool| Refusal { message, conflict };
    match client.call(request, None, MARGIN) {
        Ok(Answered {
            answer: Ok(answer), ..
        }) => Ok(answer),
        Ok(Answered {
            answer: Err(Response::Error(error)),
            ..
        }) => Err(refuse(error.message, error.code == ErrorCode::Conflict)),
        Ok(Answered {
            answer: Err(Response::TimedOut),
            ..
        }) => Err(refuse(
            "the app timed out (the change may still happen)".to_owned(),
            false,
        )),
        Ok(Answered { raw, .. }) => Err(refuse(format!("unexpected answer: {raw}"), false)),
        Err(e) => Err(refuse(e.to_string(), false)),
    }
}
