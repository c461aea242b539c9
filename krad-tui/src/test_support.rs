//! Records for the unit tests, as the app sends them. Owns no state; imports
//! only the bus protocol, never another module of this crate.

use krad_bus::protocol::AgentRecord;

/// A whole record as the app sends it, with `fields` put over a plain one.
pub(crate) fn record(fields: serde_json::Value) -> AgentRecord {
    let mut record = serde_json::json!({"terminal":1,"environment":"main","name":null,
        "profile":"shell","command":[],"lead":false,"parent":null,"group":null,
        "variant":null,"state":"working","state_source":"process","message":null,
        "exit_code":null,"signal":null,"pid":null,"title":null,
        "started_at":"2025-01-01T00:00:00Z","state_since":"2025-01-01T00:00:00Z","rev":1});
    if let (Some(record), Some(fields)) = (record.as_object_mut(), fields.as_object()) {
        record.extend(fields.clone());
    }
    serde_json::from_value(record).unwrap()
}
