//! What a person reads of an ask — its card: a title, options and fields cut to
//! their limits, a permission's card built from the tool alone — and which
//! answers fit it.

use std::time::{Duration, SystemTime};

use krad_bus::protocol::{ApiError, AskAnswer, AskInfo, ErrorCode, TerminalRef};
use krad_bus::request::RequestKind;
use krad_bus::request::ask::{Ask, AskField, AskKind, AskOption, AskTool};
use serde_json::Value;

use super::{MAX_CARD_INPUT, MAX_FIELDS, MAX_OPTIONS, MAX_TITLE};

/// What an ask shows: its title, options and fields, cut to their limits.
pub(super) struct Card {
    pub(super) title: String,
    pub(super) options: Vec<AskOption>,
    pub(super) fields: Vec<AskField>,
}

impl Card {
    /// A permission ask's card comes from its tool's name and input only; any
    /// other ask shows its own (cleaned) title and options.
    pub(super) fn of(request: &Ask) -> Card {
        let (title, options) = match (request.kind, &request.tool) {
            (AskKind::Permission, Some(tool)) => permission_card(tool, request.options.as_deref()),
            _ => (
                clean(
                    request.title.as_deref().unwrap_or("The agent asks"),
                    MAX_TITLE,
                )
                .0,
                request
                    .options
                    .clone()
                    .unwrap_or_default()
                    .into_iter()
                    .take(MAX_OPTIONS)
                    .collect(),
            ),
        };
        let fields = request
            .fields
            .clone()
            .unwrap_or_default()
            .into_iter()
            .take(MAX_FIELDS)
            .collect();
        Card {
            title,
            options,
            fields,
        }
    }

    /// The new ask `id` of `terminal`, at its first revision, created now.
    pub(super) fn into_info(self, id: String, terminal: &TerminalRef, request: &Ask) -> AskInfo {
        let now = SystemTime::now();
        AskInfo {
            ask: id,
            terminal: terminal.terminal,
            environment: terminal.environment.clone(),
            kind: request.kind,
            title: self.title,
            options: self.options,
            fields: self.fields,
            tool: request.tool.clone(),
            revision: 1,
            created_at: humantime::format_rfc3339_millis(now).to_string(),
            // To the millisecond: the expiry a phone sees is the one enforced.
            expires_at: humantime::format_rfc3339_millis(
                now + Duration::from_secs(request.expiry_secs()),
            )
            .to_string(),
        }
    }
}

/// The card of a permission, from the tool's name and input only.
/// `offered`: the options the agent can act on, when it says; `allow-always`
/// is on the card only when offered (its label then names the rule it keeps).
pub(super) fn permission_card(
    tool: &AskTool,
    offered: Option<&[AskOption]>,
) -> (String, Vec<AskOption>) {
    let input = &tool.input;
    let shown = ["command", "file_path", "path", "url", "pattern"]
        .iter()
        .find_map(|key| input.get(key).and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| match input {
            Value::Null => String::new(),
            other => other.to_string(),
        });
    let (name, name_changed) = clean(&tool.name, 64);
    let (shown, shown_changed) = clean(&shown, MAX_CARD_INPUT);
    let title = if shown.is_empty() {
        name.clone()
    } else {
        format!("{name}: {shown}")
    };
    let option = |id: &str, label: &str| AskOption {
        id: id.to_owned(),
        label: label.to_owned(),
    };
    let mut options = vec![option("allow", "Allow")];
    let always = match offered {
        None => Some("Always allow".to_owned()),
        Some(offered) => offered
            .iter()
            .find(|o| o.id == "allow-always")
            .map(|o| clean(&o.label, 120).0)
            .filter(|label| !label.is_empty()),
    };
    if let Some(label) = always
        && !name_changed
        && !shown_changed
        && !name.is_empty()
    {
        options.push(option("allow-always", &label));
    }
    options.push(option("deny", "Deny"));
    (title, options)
}

/// Removes control and invisible characters and cuts to `max` characters; says
/// whether anything was removed or cut.
fn clean(text: &str, max: usize) -> (String, bool) {
    let invisible = |c: char| {
        c.is_control() && c != '\n'
            || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}' | '\u{feff}')
    };
    let kept: String = text.chars().filter(|&c| !invisible(c)).collect();
    let mut changed = kept.chars().count() != text.chars().count();
    let cut: String = kept.chars().take(max).collect();
    if cut.chars().count() < kept.chars().count() {
        changed = true;
    }
    (cut, changed)
}

/// Checks an answer against the ask's kind and options.
pub(super) fn check_answer(info: &AskInfo, answer: &AskAnswer) -> Result<(), ApiError> {
    let bad = |why: String| RequestKind::Answer.field_error(ErrorCode::Invalid, "answer", why);
    match (info.kind, answer) {
        (AskKind::Permission | AskKind::Choice, AskAnswer::Option(option)) => {
            if !info.options.iter().any(|o| &o.id == option) {
                let ids: Vec<&str> = info.options.iter().map(|o| o.id.as_str()).collect();
                return Err(bad(format!(
                    "{option:?} is not an option of this ask ({})",
                    ids.join(", ")
                )));
            }
            Ok(())
        }
        (AskKind::Permission | AskKind::Choice, _) => Err(bad("give {\"option\": …}".into())),
        (AskKind::Text, AskAnswer::Text(_)) | (AskKind::Form, AskAnswer::Fields(_)) => Ok(()),
        (AskKind::Text, _) => Err(bad("give {\"text\": …}".into())),
        (AskKind::Form, _) => Err(bad("give {\"fields\": {…}}".into())),
    }
}

/// How long until the ask expires (zero once it has); an unreadable expiry
/// counts as expired.
pub(crate) fn time_left(info: &AskInfo, now: SystemTime) -> Duration {
    humantime::parse_rfc3339(&info.expires_at)
        .ok()
        .and_then(|expires| expires.duration_since(now).ok())
        .unwrap_or_default()
}
