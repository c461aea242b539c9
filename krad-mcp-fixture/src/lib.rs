//! What the fixture answers that tests check, said once for the server
//! (src/main.rs) and for the tests that compare krad's answers with it: the
//! names of its tools, in the order it lists them, and the result of
//! `annotated`.

use serde_json::{Value, json};

/// The fixture's tools, in the order `tools/list` gives them.
pub const TOOL_NAMES: [&str; 8] = [
    "echo",
    "fail",
    "slow",
    "crash",
    "big",
    "mixed",
    "annotated",
    "raw",
];

/// What `annotated` answers, written as JSON: rmcp's typed model would turn the
/// priority into an f32 and could not carry `x-extra` or `x-top`.
pub fn annotated() -> Value {
    json!({
        "content": [
            {
                "type": "text",
                "text": "annotated",
                "annotations": {"audience": ["user"], "priority": 0.7},
                "_meta": {"krad.test/item": 1},
                "x-extra": {"kept": true}
            },
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
        ],
        "structuredContent": {"answer": 42, "ratio": 0.7, "list": [1, 2.5, "three"]},
        "isError": false,
        "_meta": {"krad.test/trace": "t-1"},
        "x-top": {"kept": true}
    })
}
