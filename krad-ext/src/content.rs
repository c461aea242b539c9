//! A tool's answer as the bus carries it: the content items as the server gave
//! them, cut to fit the response limit.

use krad_bus::protocol::{ToolInfo, ToolResultInfo};
use rmcp::model::{CallToolResult, Tool};
use serde_json::Value;

/// Room kept in a response for everything around the content (the envelope of
/// the answer, `is_error`, `truncated`).
const ENVELOPE_ROOM: usize = 4 * 1024;

/// The answer to ExtensionTool for a tool's result, its content cut so that the
/// serialized items take at most `limit` bytes.
pub(crate) fn tool_result(result: CallToolResult, limit: usize) -> ToolResultInfo {
    let items = result
        .content
        .iter()
        .map(|item| serde_json::to_value(item).unwrap_or(Value::Null))
        .collect();
    let (content, truncated) = fit(items, limit.saturating_sub(ENVELOPE_ROOM));
    ToolResultInfo {
        content,
        is_error: result.is_error.unwrap_or(false),
        truncated,
    }
}

/// Keeps the items whose serialized size fits `budget`; the first one that does
/// not fit is cut when it is a text item (its text shortened), dropped
/// otherwise, and so are all after it.
fn fit(items: Vec<Value>, budget: usize) -> (Vec<Value>, bool) {
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
            kept.push(item);
        }
        return (kept, true);
    }
    (kept, false)
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
        let (kept, truncated) = fit(items.clone(), 1000);
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
        let (kept, truncated) = fit(items, 400);
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
        let (kept, truncated) = fit(items, 300);
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
        let (kept, truncated) = fit(items, 300);
        assert!(truncated);
        assert_eq!(kept, vec![json!({"type":"text","text":"ok"})]);
    }
}
