//! The layout: renaming workspaces and tabs, closing them, starting agents.

use std::sync::Arc;

use krad_bus::request::Call as _;
use krad_bus::request::close::Close;
use krad_bus::request::rename::{MAX_NAME_CHARS, Rename};
use krad_durable::wire::{Target, WireError, WireResult};
use serde_json::json;

use super::{bus_request, from_api, no_pane, spawn, tab_terminal, workspace_exists};
use crate::environments::MAIN;
use crate::feed::events::ItemKind;
use crate::phone::Phone;

/// Renames a workspace (its title on the phone), or a tab: a live terminal's
/// tab through the Rename request, as `krad rename` does — its record's name
/// and its title are one, under one length limit ([`MAX_NAME_CHARS`]; a longer
/// title is cut to it, as the wire cuts what is longer than its own); an empty
/// title takes the name away, giving the tab back its own title.
pub(super) async fn rename(phone: &Arc<Phone>, target: Target, title: &str) -> WireResult {
    let title: String = title.chars().take(MAX_NAME_CHARS).collect();
    match target {
        Target::Workspace(workspace) => {
            if !workspace_exists(phone, &workspace) {
                return Err(WireError::missing(
                    "no-such-workspace",
                    format!("no workspace {workspace}"),
                ));
            }
            phone.feed.rename(Some(&workspace), None, &title);
        }
        Target::Tab(tab) | Target::Pane(tab) => {
            let terminal = tab_terminal(phone, &tab)?;
            let request = Rename {
                target: terminal,
                name: (!title.is_empty()).then(|| title.clone()),
            };
            request.validate().map_err(from_api)?;
            if phone.store.record(terminal).is_some() {
                bus_request(phone, request).await?;
            } else {
                // A closed conversation's tab, reopened: no terminal to name.
                phone.feed.rename(None, Some(terminal), &title);
            }
        }
    }
    Ok(json!({"result": "renamed", "title": title}))
}

pub(super) async fn close(phone: &Arc<Phone>, target: Target) -> WireResult {
    let request = match target {
        Target::Pane(id) | Target::Tab(id) => {
            let terminal = id
                .get(1..)
                .and_then(|n| n.parse::<u64>().ok())
                .filter(|_| id.starts_with('p') || id.starts_with('t'))
                .ok_or_else(|| no_pane(&id))?;
            if phone.store.record(terminal).is_none() {
                return if phone.feed.hide(terminal) {
                    Ok(json!({"result": "closed"}))
                } else {
                    Err(no_pane(&id))
                };
            }
            Close {
                target: Some(terminal),
                environment: None,
                force: None,
            }
        }
        Target::Workspace(workspace) => {
            if workspace == MAIN {
                return Err(WireError::conflict(
                    "conflict",
                    "the main workspace is the repository itself; it cannot be closed",
                ));
            }
            if !workspace_exists(phone, &workspace) {
                return Err(WireError::missing(
                    "no-such-workspace",
                    format!("no workspace {workspace}"),
                ));
            }
            Close {
                target: None,
                environment: Some(workspace),
                force: None,
            }
        }
    };
    bus_request(phone, request).await?;
    Ok(json!({"result": "closed"}))
}

pub(super) async fn start(
    phone: &Arc<Phone>,
    starter: &str,
    workspace: Option<String>,
    prompt: Option<String>,
) -> WireResult {
    let profile = phone
        .profiles
        .get(starter)
        .filter(|p| !p.command.is_empty())
        .ok_or_else(|| WireError::missing("no-such-starter", format!("no starter {starter}")))?;
    let workspace = workspace.unwrap_or_else(|| MAIN.to_owned());
    if !workspace_exists(phone, &workspace) {
        return Err(WireError::missing(
            "no-such-workspace",
            format!("no workspace {workspace}"),
        ));
    }
    let prompt = prompt.filter(|p| !p.trim().is_empty());
    let terminal = spawn(phone, &workspace, &profile.name, None, prompt.clone()).await?;
    if let Some(prompt) = prompt {
        phone.feed.item(terminal, ItemKind::User, &prompt);
    }
    Ok(json!({
        "workspace": workspace,
        "tab": format!("t{terminal}"),
        "pane": format!("p{terminal}"),
    }))
}
