//! Fuzzes step 4: a request name and arbitrary JSON fields through
//! `Request::parse`, which must never panic, and whose accepted requests must
//! turn back into wire JSON that parses to the same request.

#![no_main]

use krad_bus::protocol::ErrorCode;
use krad_bus::request::Request;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // First line: the name; the rest: the fields as JSON (or none).
    let (name, rest) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let Ok(name) = std::str::from_utf8(name) else {
        return;
    };
    let fields = serde_json::from_slice::<serde_json::Value>(rest).ok();
    match Request::parse(name, fields) {
        Ok(request) => {
            let wire = request.to_value();
            let (name, fields) = match wire {
                serde_json::Value::String(name) => (name, None),
                serde_json::Value::Object(mut object) if object.len() == 1 => {
                    let Some(name) = object.keys().next().cloned() else {
                        return;
                    };
                    let fields = object.remove(&name);
                    (name, fields)
                }
                other => panic!("a request's wire form is {other}"),
            };
            let again = Request::parse(&name, fields).expect("a request's own wire form parses");
            assert_eq!(again.to_value(), request.to_value());
        }
        Err(e) => assert!(matches!(
            e.code,
            ErrorCode::BadRequest | ErrorCode::UnknownRequest | ErrorCode::Invalid
        )),
    }
});
