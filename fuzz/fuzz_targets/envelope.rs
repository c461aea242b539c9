//! Fuzzes step 1 of the order of checks as the server runs it: the bytes up to
//! the first `\n` (at most 64 KiB) go to `Envelope::parse`, which must never
//! panic and must refuse only with `bad_request`; what it accepts must go through
//! the request parser (step 4) without panicking either.

#![no_main]

use krad_bus::protocol::{Envelope, ErrorCode, MAX_LINE};
use krad_bus::request::Request;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let data = &data[..data.len().min(MAX_LINE)];
    let line = match memchr_newline(data) {
        Some(i) => &data[..i],
        None => data,
    };
    match Envelope::parse(line) {
        Ok(envelope) => {
            let _ = envelope.speaks_v1();
            if let Err(e) = Request::parse(&envelope.request.name, envelope.request.fields) {
                assert!(matches!(
                    e.code,
                    ErrorCode::BadRequest | ErrorCode::UnknownRequest | ErrorCode::Invalid
                ));
            }
        }
        Err(e) => assert_eq!(e.code, ErrorCode::BadRequest),
    }
});

fn memchr_newline(data: &[u8]) -> Option<usize> {
    data.iter().position(|&b| b == b'\n')
}
