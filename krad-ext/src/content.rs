//! A tool's answer as the bus carries it: the result as the server sent it,
//! checked, and cut to fit the response limit.

use krad_bus::protocol::{ToolInfo, ToolResultInfo};
use rmcp::model::Tool;
use serde_json::{Map, Value};

/// Room kept in a response for everything around the content (the envelope of
/// the answer, `is_error`, `truncated`).
const ENVELOPE_ROOM: usize = 4 * 1024;

/// The answer's own names: members of a result named so are not passed on.
const BUS_NAMES: [&str; 2] = ["is_error", "truncated"];

/// The answer to ExtensionTool for the JSON `result` of a `tools/call`
/// response, as the server sent it: its content items and its other members
/// (`structuredContent`, `isError`, `_meta`, and any other) untouched, with
/// `is_error` from `isError`. Content and members are cut so that they take at
/// most `limit` bytes. A result that is not a tool result is an error saying
/// why.
pub(crate) fn tool_result(result: Value, limit: usize) -> Result<ToolResultInfo, String> {
    let Value::Object(mut members) = result else {
        return Err(format!("its result is {}, not an object", kind_of(&result)));
    };
    // Tasks and requests for input are results this client never asked for.
    match members.get("resultType") {
        None | Some(Value::Null) => {}
        Some(Value::String(kind)) if kind == "complete" => {}
        Some(other) => {
            return Err(format!(
                "its result has resultType {other}, not a complete tool result"
            ));
        }
    }
    let items = match members.remove("content") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(format!(
                "its result's content is {}, not an array",
                kind_of(&other)
            ));
        }
    };
    if let Some(at) = items
        .iter()
        .position(|item| !item.get("type").is_some_and(Value::is_string))
    {
        return Err(format!(
            "its result's content item {at} is not a content item (an object with a \"type\")"
        ));
    }
    let is_error = match members.get("isError") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(is_error)) => *is_error,
        Some(other) => {
            return Err(format!(
                "its result's isError is {}, not true or false",
                kind_of(other)
            ));
        }
    };
    for name in BUS_NAMES {
        if members.remove(name).is_some() {
            tracing::debug!(
                "a tool result's member {name:?} is not passed on: the answer has its own"
            );
        }
    }
    let budget = limit.saturating_sub(ENVELOPE_ROOM);
    let (content, used, mut truncated) = fit(items, budget);
    let (others, cut) = fit_members(members, budget.saturating_sub(used));
    truncated |= cut;
    Ok(ToolResultInfo {
        content,
        is_error,
        truncated,
        others,
    })
}

/// "a string", "an array"…: what a JSON value is, for errors.
fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Keeps each member whole if it still fits `budget` (its name, its value and
/// a comma), drops it otherwise; true when one was dropped.
fn fit_members(members: Map<String, Value>, budget: usize) -> (Map<String, Value>, bool) {
    let mut used = 0;
    let mut kept = Map::new();
    let mut dropped = false;
    for (name, value) in members {
        let size = json_len(&Value::String(name.clone())) + 1 + json_len(&value) + 1;
        if used + size <= budget {
            used += size;
            kept.insert(name, value);
        } else {
            dropped = true;
        }
    }
    (kept, dropped)
}

/// Keeps the items whose serialized size fits `budget`; the first one that does
/// not fit is cut when it is a text item (its text shortened), dropped
/// otherwise, and so are all after it. Also says how many bytes the kept items
/// take at most, and whether any was cut or dropped.
fn fit(items: Vec<Value>, budget: usize) -> (Vec<Value>, usize, bool) {
    let mut used = 2; // the brackets
    let mut kept = Vec::with_capacity(items.len());
    for mut item in items {
        let size = json_len(&item) + 1; // and its comma
        if used + size <= budget {
            used += size;
            kept.push(item);
            continue;
        }
        let room = budget.saturating_sub(used + 1);
        if cut_text(&mut item, room) {
            used += room + 1;
            kept.push(item);
        }
        return (kept, used, true);
    }
    (kept, used, false)
}

/// Shortens a text item's `text` so that the item serializes to at most `room`
/// bytes; false when it is not a text item or nothing of it fits.
fn cut_text(item: &mut Value, room: usize) -> bool {
    let Some(text) = item.get("text").and_then(Value::as_str).map(str::to_owned) else {
        return false;
    };
    let overhead = {
        let mut empty = item.clone();
        empty["text"] = Value::String(String::new());
        json_len(&empty)
    };
    // The longest the text may serialize to, quotes included.
    let Some(allowed) = (room + 2).checked_sub(overhead) else {
        return false;
    };
    let mut keep = allowed.saturating_sub(2);
    // Escaping can only make the text longer: shrink until it fits.
    loop {
        let cut = floor_char_boundary(&text, keep);
        if cut == 0 {
            return false;
        }
        let candidate = &text[..cut];
        let size = serde_json::to_string(candidate).map_or(usize::MAX, |s| s.len());
        if size <= allowed {
            item["text"] = Value::String(candidate.to_owned());
            return true;
        }
        // Scale down by how much escaping grew it.
        let scaled =
            (cut as u128 * allowed.saturating_sub(2) as u128 / (size - 2).max(1) as u128) as usize;
        keep = scaled.min(cut - 1);
    }
}

/// The largest index at most `at` that is a char boundary of `text`.
fn floor_char_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn json_len(value: &Value) -> usize {
    serde_json::to_vec(value).map_or(usize::MAX, |v| v.len())
}

/// A tool as Extensions lists it.
pub(crate) fn tool_info(tool: &Tool) -> ToolInfo {
    ToolInfo {
        name: tool.name.to_string(),
        description: tool.description.as_ref().map(|d| d.to_string()),
        input_schema: Value::Object((*tool.input_schema).clone()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn small_content_is_kept_whole() {
        let items = vec![json!({"type":"text","text":"hi"}), json!({"type":"image"})];
        let (kept, _, truncated) = fit(items.clone(), 1000);
        assert_eq!(kept, items);
        assert!(!truncated);
    }

    #[test]
    fn a_long_text_is_cut_to_fit() {
        let items = vec![
            json!({"type":"text","text":"a".repeat(50)}),
            json!({"type":"text","text":"é".repeat(500)}),
            json!({"type":"text","text":"never"}),
        ];
        let (kept, _, truncated) = fit(items, 400);
        assert!(truncated);
        assert_eq!(kept.len(), 2);
        let size = serde_json::to_vec(&kept).unwrap().len();
        assert!(size <= 400, "{size}");
        let text = kept[1]["text"].as_str().unwrap();
        assert!(!text.is_empty() && text.chars().all(|c| c == 'é'));
    }

    #[test]
    fn escaped_text_still_fits() {
        let items = vec![json!({"type":"text","text":"\u{1}".repeat(1000)})];
        let (kept, _, truncated) = fit(items, 300);
        assert!(truncated);
        assert!(serde_json::to_vec(&kept).unwrap().len() <= 300);
        assert!(!kept[0]["text"].as_str().unwrap().is_empty());
    }

    #[test]
    fn an_item_that_cannot_be_cut_is_dropped() {
        let items = vec![
            json!({"type":"text","text":"ok"}),
            json!({"type":"image","data":"x".repeat(1000),"mimeType":"image/png"}),
        ];
        let (kept, _, truncated) = fit(items, 300);
        assert!(truncated);
        assert_eq!(kept, vec![json!({"type":"text","text":"ok"})]);
    }

    #[test]
    fn a_result_is_passed_as_the_server_sent_it() {
        let line = r#"{"content":[{"type":"text","text":"hi","annotations":{"priority":0.7},
            "x-extra":{"kept":true}},{"type":"x-future","n":1e-7}],
            "structuredContent":{"ratio":0.7},"isError":true,"_meta":{"a":1},"x-top":[]}"#;
        let result = tool_result(serde_json::from_str(line).unwrap(), 1 << 20).unwrap();
        assert!(result.is_error);
        assert!(!result.truncated);
        let answer = serde_json::to_string(&result).unwrap();
        assert!(answer.contains(r#""priority":0.7}"#), "{answer}");
        assert!(answer.contains(r#""ratio":0.7}"#), "{answer}");
        let answer: Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(
            answer,
            json!({
                "content": [
                    {"type": "text", "text": "hi", "annotations": {"priority": 0.7},
                     "x-extra": {"kept": true}},
                    {"type": "x-future", "n": 1e-7}
                ],
                "is_error": true,
                "structuredContent": {"ratio": 0.7},
                "isError": true,
                "_meta": {"a": 1},
                "x-top": []
            })
        );
    }

    #[test]
    fn what_is_not_a_tool_result_is_refused_saying_why() {
        for (result, says) in [
            (json!(null), "its result is null, not an object"),
            (json!([]), "its result is an array, not an object"),
            (json!({"content": "x"}), "content is a string, not an array"),
            (
                json!({"content": [{"type": "text"}, 3]}),
                "content item 1 is not",
            ),
            (json!({"content": [{"type": 1}]}), "content item 0 is not"),
            (
                json!({"isError": "yes"}),
                "isError is a string, not true or false",
            ),
            (
                json!({"resultType": "task", "taskId": "t"}),
                r#"resultType "task""#,
            ),
        ] {
            let error = tool_result(result.clone(), 1 << 20).unwrap_err();
            assert!(error.contains(says), "{result}: {error}");
        }
    }

    #[test]
    fn lenient_where_mcp_is() {
        let empty = tool_result(json!({}), 1 << 20).unwrap();
        assert_eq!(
            serde_json::to_value(&empty).unwrap(),
            json!({"content": [], "is_error": false})
        );
        let null = tool_result(
            json!({"content": null, "isError": null, "resultType": "complete"}),
            1 << 20,
        )
        .unwrap();
        assert!(null.content.is_empty() && !null.is_error);
        assert_eq!(
            null.others,
            Map::from_iter([
                ("isError".to_owned(), Value::Null),
                ("resultType".to_owned(), json!("complete")),
            ])
        );
    }

    #[test]
    fn members_named_like_the_answers_own_are_not_passed_on() {
        let result = tool_result(
            json!({"content": [], "is_error": true, "truncated": true, "isError": false}),
            1 << 20,
        )
        .unwrap();
        let answer = serde_json::to_value(&result).unwrap();
        assert_eq!(
            answer,
            json!({"content": [], "is_error": false, "isError": false})
        );
    }

    #[test]
    fn members_that_do_not_fit_are_dropped_whole_after_the_content() {
        let limit = ENVELOPE_ROOM + 1000;
        let result = tool_result(
            json!({
                "content": [{"type": "text", "text": "a".repeat(600)}],
                "structuredContent": {"big": "b".repeat(500)},
                "_meta": {"small": 1},
                "isError": false
            }),
            limit,
        )
        .unwrap();
        assert!(result.truncated);
        assert_eq!(result.content[0]["text"].as_str().unwrap().len(), 600);
        assert!(result.others.get("structuredContent").is_none());
        assert_eq!(result.others["_meta"], json!({"small": 1}));
        assert_eq!(result.others["isError"], json!(false));
        // Content that fills the room leaves none for the rest.
        let full = tool_result(
            json!({"content": [{"type": "text", "text": "a".repeat(2000)}], "_meta": {}}),
            limit,
        )
        .unwrap();
        assert!(full.truncated && full.others.is_empty());
        assert!(serde_json::to_vec(&full.content).unwrap().len() <= 1000);
    }
}
