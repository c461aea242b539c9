//! An ask as the wire shows it: its card within the seed's limits, who decided
//! it, and `allow-always` taken off for the callers that may not see it (TLS).

use krad_bus::protocol::{AskInfo, DecidedBy};
use krad_bus::request::ask::AskKind;
use krad_durable::limits;
use serde_json::{Value, json};

/// `decidedBy` on the wire.
pub(crate) fn decided_by(by: DecidedBy) -> &'static str {
    match by {
        DecidedBy::Phone => "phone",
        DecidedBy::Client => "client",
        DecidedBy::Program => "program",
        DecidedBy::Timeout => "timeout",
        DecidedBy::Other => "other",
    }
}

/// An ask as the wire shows it, within the seed's limits.
pub(crate) fn wire_ask(info: &AskInfo) -> Value {
    let (kind, max_options) = match info.kind {
        AskKind::Permission => ("permission", limits::PERMISSION_OPTIONS),
        AskKind::Choice => ("choice", limits::CHOICE_OPTIONS),
        AskKind::Text => ("text", 0),
        AskKind::Form => ("form", 0),
    };
    let options: Vec<Value> = info
        .options
        .iter()
        .filter(|o| limits::valid_id(&o.id))
        .take(max_options)
        .map(|o| json!({"id": o.id, "label": limits::cut(&o.label, limits::TITLE)}))
        .collect();
    let fields: Vec<Value> = info
        .fields
        .iter()
        .filter(|f| limits::valid_id(&f.id))
        .take(limits::FORM_FIELDS)
        .map(|f| json!({"id": f.id, "label": limits::cut(&f.label, limits::TITLE)}))
        .collect();
    let mut ask = json!({
        "id": info.ask,
        "kind": kind,
        "title": limits::cut(&info.title, limits::TEXT_ITEM),
        "revision": info.revision,
        "createdAt": info.created_at,
        "expiresAt": info.expires_at,
        "options": options,
        "fields": fields,
    });
    if let Some(tool) = &info.tool {
        ask["tool"] = json!({"name": limits::cut(&tool.name, limits::TITLE)});
    }
    ask
}

/// Takes `allow-always` off the asks of a list of events (TLS callers).
pub(crate) fn without_allow_always(events: &mut [Value]) {
    for event in events {
        if let Some(ask) = event.get_mut("ask") {
            strip_allow_always(ask);
        }
    }
}

/// Takes `allow-always` off one wire ask.
pub(crate) fn strip_allow_always(ask: &mut Value) {
    if let Some(Value::Array(options)) = ask.get_mut("options") {
        options.retain(|o| o.get("id").and_then(Value::as_str) != Some("allow-always"));
    }
}
