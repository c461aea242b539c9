//! Property tests of the line/envelope parser (`Envelope::parse`, step 1 of the
//! order of checks) and of the request parser behind it, on stable, in CI. The same
//! code is fuzzed with cargo-fuzz under `fuzz/` (nightly, outside CI).
//!
//! What must hold for any input:
//! * the parser never panics, and every refusal is `bad_request`;
//! * a well-formed envelope parses back to exactly what was written, whatever
//!   unknown fields ride along and in whatever order the fields come;
//! * a field of the wrong shape, a truncated line or a non-object is refused.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use krad_bus::protocol::{Caller, Envelope, ErrorCode, TerminalRef};
use krad_bus::request::Request;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Any JSON value, nested a few levels.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        // Binary fractions: they survive a JSON round trip exactly.
        any::<i32>().prop_map(|i| Value::from(f64::from(i) / 8.0)),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(".{0,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn caller() -> impl Strategy<Value = Caller> {
    prop_oneof![
        Just(Caller::Client),
        ("[a-z][a-z0-9-]{0,15}", 1u64..u64::MAX).prop_map(|(environment, terminal)| {
            Caller::Terminal(TerminalRef {
                environment,
                terminal,
            })
        }),
    ]
}

/// A request: its name and its fields (absent, null, or an object).
fn request() -> impl Strategy<Value = (String, Option<Value>)> {
    (
        "[A-Z][A-Za-z]{0,15}",
        prop_oneof![
            Just(None),
            Just(Some(Value::Null)),
            prop::collection::btree_map("[a-z_]{1,8}", any_json(), 0..4)
                .prop_map(|m| Some(Value::Object(m.into_iter().collect()))),
        ],
    )
}

#[derive(Debug, Clone)]
struct Parts {
    api_version: Option<i64>,
    token: String,
    from: Caller,
    name: String,
    fields: Option<Value>,
    request_id: Option<String>,
    extra: Vec<(String, Value)>,
}

fn parts() -> impl Strategy<Value = Parts> {
    (
        prop::option::of(any::<i64>()),
        ".{0,40}",
        caller(),
        request(),
        prop::option::of("[!-~]{1,128}"),
        prop::collection::vec(("x_[a-z]{1,6}", any_json()), 0..3),
    )
        .prop_map(
            |(api_version, token, from, (name, fields), request_id, extra)| Parts {
                api_version,
                token,
                from,
                name,
                fields,
                request_id,
                extra,
            },
        )
}

fn to_object(p: &Parts) -> Map<String, Value> {
    let mut object = Map::new();
    for (k, v) in &p.extra {
        object.insert(k.clone(), v.clone());
    }
    if let Some(v) = p.api_version {
        object.insert("api_version".into(), json!(v));
    }
    object.insert("token".into(), json!(p.token));
    object.insert("from".into(), serde_json::to_value(&p.from).unwrap());
    let request = match &p.fields {
        None => json!(p.name),
        Some(fields) => {
            let mut one = Map::new();
            one.insert(p.name.clone(), fields.clone());
            Value::Object(one)
        }
    };
    object.insert("request".into(), request);
    if let Some(id) = &p.request_id {
        object.insert("request_id".into(), json!(id));
    }
    object
}

fn refused(line: &[u8]) {
    let err = Envelope::parse(line).expect_err("should be refused");
    assert_eq!(err.code, ErrorCode::BadRequest, "{err:?}");
    assert!(!err.message.is_empty());
}

proptest! {
    // 512 cases per property in CI; PROPTEST_CASES overrides. Failures are
    // reported (shrunk), not persisted: turn one into a plain test case.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(512),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn arbitrary_bytes_never_panic_and_refusals_are_bad_request(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        if let Err(e) = Envelope::parse(&bytes) {
            prop_assert_eq!(e.code, ErrorCode::BadRequest);
        }
    }

    #[test]
    fn arbitrary_json_never_panics(value in any_json()) {
        let line = serde_json::to_vec(&value).unwrap();
        match Envelope::parse(&line) {
            Ok(envelope) => {
                // Only an object with token, from and request can pass.
                let object = value.as_object().unwrap();
                prop_assert!(object.contains_key("token") && object.contains_key("from") && object.contains_key("request"));
                // Step 4 may refuse the request, but never panics.
                let _ = Request::parse(&envelope.request.name, envelope.request.fields);
            }
            Err(e) => prop_assert_eq!(e.code, ErrorCode::BadRequest),
        }
    }

    #[test]
    fn well_formed_envelopes_round_trip(p in parts()) {
        let line = serde_json::to_vec(&Value::Object(to_object(&p))).unwrap();
        let envelope = Envelope::parse(&line).unwrap();
        prop_assert_eq!(envelope.api_version.as_i64(), Some(p.api_version.unwrap_or(1)));
        prop_assert_eq!(envelope.speaks_v1(), p.api_version.unwrap_or(1) == 1);
        prop_assert_eq!(envelope.token.expose(), p.token.as_str());
        prop_assert_eq!(&envelope.from, &p.from);
        prop_assert_eq!(&envelope.request.name, &p.name);
        prop_assert_eq!(&envelope.request.fields, &p.fields);
        prop_assert_eq!(envelope.request_id.as_ref().map(|r| r.as_str().to_owned()), p.request_id.clone());
    }

    #[test]
    fn unknown_fields_and_whitespace_change_nothing(p in parts(), junk in prop::collection::vec(("[a-z]{1,10}", any_json()), 1..4)) {
        let plain = Envelope::parse(&serde_json::to_vec(&Value::Object(to_object(&p))).unwrap()).unwrap();
        let mut object = to_object(&p);
        for (k, v) in junk {
            if !["api_version", "token", "from", "request", "request_id"].contains(&k.as_str()) {
                object.insert(k, v);
            }
        }
        let pretty = serde_json::to_string_pretty(&Value::Object(object)).unwrap().replace('\n', " ");
        let padded = Envelope::parse(pretty.as_bytes()).unwrap();
        prop_assert_eq!(padded.token.expose(), plain.token.expose());
        prop_assert_eq!(padded.from, plain.from);
        prop_assert_eq!(padded.request, plain.request);
        prop_assert_eq!(padded.api_version, plain.api_version);
    }

    #[test]
    fn a_field_of_the_wrong_shape_is_bad_request(p in parts(), which in 0usize..5, bad in any_json()) {
        let mut object = to_object(&p);
        let field = ["api_version", "token", "from", "request", "request_id"][which];
        let wrong = match field {
            "api_version" => !(bad.is_null() || bad.is_i64() || bad.is_u64()),
            "token" => !bad.is_string(),
            "from" => bad != json!("Client") && !matches!(&bad, Value::Object(o) if o.contains_key("Terminal")),
            "request" => !bad.is_string() && !matches!(&bad, Value::Object(o) if o.len() == 1),
            _ => !(bad.is_null() || bad.is_string()),
        };
        prop_assume!(wrong);
        object.insert(field.into(), bad);
        refused(&serde_json::to_vec(&Value::Object(object)).unwrap());
    }

    #[test]
    fn a_missing_field_is_bad_request(p in parts(), which in 0usize..3) {
        let mut object = to_object(&p);
        object.remove(["token", "from", "request"][which]);
        refused(&serde_json::to_vec(&Value::Object(object)).unwrap());
    }

    #[test]
    fn a_truncated_line_is_bad_request(p in parts(), cut in any::<prop::sample::Index>()) {
        let line = serde_json::to_vec(&Value::Object(to_object(&p))).unwrap();
        let cut = cut.index(line.len());
        refused(&line[..cut]);
    }

    #[test]
    fn bad_request_ids_are_refused(p in parts(), id in prop_oneof![Just(String::new()), "[!-~]{129,140}", "[a-z]{0,5} [a-z]{0,5}", "[a-z]{0,4}[^\\x21-\\x7e][a-z]{0,4}"]) {
        let mut object = to_object(&p);
        object.insert("request_id".into(), json!(id));
        refused(&serde_json::to_vec(&Value::Object(object)).unwrap());
    }

    #[test]
    fn terminal_callers_need_a_name_and_a_positive_id(
        (env, id) in prop_oneof![
            any::<u64>().prop_map(|id| (String::new(), id)),
            "[a-z]{1,5}".prop_map(|env| (env, 0u64)),
        ],
        p in parts(),
    ) {
        let mut object = to_object(&p);
        object.insert("from".into(), json!({"Terminal": {"environment": env, "terminal": id}}));
        refused(&serde_json::to_vec(&Value::Object(object)).unwrap());
    }

    #[test]
    fn request_fields_never_panic(name in prop_oneof![
        Just("Hello".to_owned()), Just("List".to_owned()), Just("Check".to_owned()), Just("Wait".to_owned()),
        Just("Spawn".to_owned()), Just("Send".to_owned()), Just("Output".to_owned()), Just("Close".to_owned()),
        Just("Report".to_owned()), Just("SubscribeAgents".to_owned()), Just("Stats".to_owned()), Just("Shutdown".to_owned()),
        "[A-Za-z]{1,16}"
    ], fields in prop::option::of(any_json())) {
        match Request::parse(&name, fields) {
            Ok(request) => {
                // Its own wire form parses back to the same request.
                let wire = request.to_value();
                let (name, fields) = match wire.clone() {
                    Value::String(name) => (name, None),
                    Value::Object(object) if object.len() == 1 => {
                        let (name, fields) = object.into_iter().next().unwrap();
                        (name, Some(fields))
                    }
                    other => panic!("a request's wire form is {other}"),
                };
                let again = Request::parse(&name, fields).unwrap();
                prop_assert_eq!(again.to_value(), wire);
            }
            Err(e) => prop_assert!(
                matches!(e.code, ErrorCode::BadRequest | ErrorCode::UnknownRequest | ErrorCode::Invalid),
                "{:?}", e
            ),
        }
    }
}
